"""prepare.py: the re-encoded copy keeps frames, audio alignment, layout and labels."""

import av
import numpy as np
import pytest
import torch

from conftest import RATE, clicks, counter_frames
from media import decode, manifest
from tools import prepare, synthetic


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    src = tmp_path_factory.mktemp("raw")
    for cls in ("a", "b"):
        (src / cls).mkdir()
    # 25 fps with x264's default keyframe interval, as downloads come; 10 fps repeats frames
    synthetic.write_mp4(
        src / "a" / "c25.mp4", counter_frames(3.0, 25, size=48), clicks(3.0, (0.5, 1.5, 2.5)), 25, RATE, gop=250
    )
    synthetic.write_mp4(src / "b" / "c10.mp4", counter_frames(3.0, 10, size=48), clicks(3.0, (1.0,)), 10, RATE)
    (src / "_pool").mkdir()
    synthetic.write_mp4(src / "_pool" / "noise.mp4", None, clicks(4.0, (3.0,)), 25, RATE)
    (src / "b" / "broken.mp4").write_bytes(np.random.default_rng(0).bytes(3000))
    synthetic.write_mp4(src / "b" / "quiet.mp4", counter_frames(3.0, 10, size=48), None, 10, RATE)  # no audio
    (src / "train.txt").write_text("a/c25.mp4\nb/c10.mp4\n")
    dst = src.parent / "prepared"
    prepare.prepare(src, dst, short_side=32, gop=8, workers=1)
    return src, dst


def test_streams_are_what_training_reads(prepared):
    _, dst = prepared
    with av.open(str(dst / "a" / "c25.mp4")) as c:
        v, a = c.streams.video[0], c.streams.audio[0]
        assert (v.codec_context.width, v.codec_context.height) == (32, 32)
        assert v.average_rate == 16 and v.frames == 48  # 3 s at 16 fps
        assert a.codec_context.name == "pcm_s16le" and a.rate == 11025 and a.channels == 1
        keyframes = [p.pts for p in c.demux(v) if p.is_keyframe]
    assert len(keyframes) == 6  # every 8 frames
    with av.open(str(dst / "_pool" / "noise.mp4")) as c:
        assert not c.streams.video and c.streams.audio[0].rate == 11025


@pytest.mark.parametrize("name,start", [("a/c25.mp4", 0.4), ("a/c25.mp4", 1.73), ("b/c10.mp4", 2.0)])
def test_frames_keep_the_source_clock(prepared, name, start):
    _, dst = prepared
    fps = 25 if name.startswith("a") else 10
    with av.open(str(dst / name)) as c:
        frames = decode.decode_frames(c, start, 8, 16)
    # prepared frame j (time j/16) shows the source frame on screen then; a clip picks frames by time
    expected = [3 * int(np.floor(np.floor((start + k / 16) * 16 + 1e-6) / 16 * fps + 1e-6)) for k in range(8)]
    got = frames[:, 16, 16, 0].int().tolist()
    assert np.abs(np.array(got) - expected).max() <= 3, (got, expected)  # H.264 rounding only


@pytest.mark.parametrize("start", [0.0, 1.3, 2.0])
def test_audio_stays_aligned(prepared, start):
    _, dst = prepared
    with av.open(str(dst / "a" / "c25.mp4")) as c:
        wav = decode.decode_audio(c, start, 1.0, 11025).numpy()
    first = np.argmax(np.abs(wav) > 0.1) / 11025 + start
    assert abs(first - min(s for s in (0.5, 1.5, 2.5) if s >= start)) < 0.005
    assert abs(np.abs(wav).max() - 0.5) < 0.02  # 16-bit PCM read back at the clicks' amplitude
    with av.open(str(dst / "_pool" / "noise.mp4")) as c:
        wav = decode.decode_audio(c, 2.5, 1.0, 11025).numpy()
    assert abs(np.argmax(np.abs(wav) > 0.1) / 11025 + 2.5 - 3.0) < 0.005


def test_layout_labels_and_bad_files(prepared, capsys):
    src, dst = prepared
    assert (dst / "train.txt").read_text() == (src / "train.txt").read_text()
    records, classes = manifest.load_records("folder", dst, "train")
    assert classes == ["a", "b"] and [r.label for r in records] == [0, 1]
    assert not (dst / "b" / "broken.mp4").exists()
    mtime = (dst / "a" / "c25.mp4").stat().st_mtime_ns
    (dst / "a" / ".c26.tmp.mp4").write_bytes(b"half a file")  # as a killed run leaves it
    prepare.prepare(src, dst, short_side=32, gop=8, workers=1)  # rerun: done files are skipped
    assert not (dst / "a" / ".c26.tmp.mp4").exists()
    assert (dst / "a" / "c25.mp4").stat().st_mtime_ns == mtime
    err = capsys.readouterr().err
    assert "left out" in err and "broken.mp4" in err


def test_refuses_to_overwrite_the_source_or_to_nest_in_it(tmp_path, capsys):
    with pytest.raises(ValueError, match="must differ"):
        prepare.prepare(tmp_path, tmp_path)
    (tmp_path / "a").mkdir()
    synthetic.write_mp4(tmp_path / "a" / "v.mp4", counter_frames(1.0, 10), None, 10, RATE)
    for src, dst in ((tmp_path, tmp_path / "sub"), (tmp_path / "a", tmp_path)):
        with pytest.raises(SystemExit) as stop:  # a later scan of the outer folder would find each video twice
            prepare.main([str(src), str(dst), "--workers", "1"])
        said = str(stop.value.code)
        assert "\n" not in said and f"{dst if dst != tmp_path else src} is inside" in said, said
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "v.mp4"]


def test_a_rerun_re_prepares_nothing_that_is_up_to_date(prepared, capsys):
    """b/quiet.mp4 has no audio, so no sidecar: it is up to date without one."""
    src, dst = prepared
    index = decode.frame_index(dst / "b" / "quiet.mp4")
    mtime = index.stat().st_mtime_ns
    capsys.readouterr()
    prepare.prepare(src, dst, short_side=32, gop=8, workers=1)
    assert "prepared 0 videos" in capsys.readouterr().out and index.stat().st_mtime_ns == mtime


def test_other_containers_keep_their_names_and_stay_readable(tmp_path):
    """An MPEG-PS .mpg cannot hold H.264 + PCM: the prepared file is Matroska under the same name,
    so split lists still match, and PyAV reads it by its content."""
    from test_data import _write_mpeg_ps

    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    _write_mpeg_ps(src / "a" / "old.mpg")
    (src / "train.txt").write_text("a/old.mpg\n")
    prepare.prepare(src, tmp_path / "dst", short_side=32, gop=8, workers=1)
    out = tmp_path / "dst" / "a" / "old.mpg"
    with av.open(str(out)) as c:
        assert c.format.name.startswith("matroska") and c.streams.video[0].codec_context.name == "h264"
        assert c.streams.audio[0].codec_context.name == "pcm_s16le"
    records, _ = manifest.load_records("folder", tmp_path / "dst", "train")
    assert [r.path for r in records] == [str(out)]


def test_the_audio_sidecar_gives_the_containers_samples_and_an_old_copy_reads_as_before(prepared, tmp_path):
    """prepare.py writes VIDEO.RATE.pcm16 beside each video (and the pool's sounds); a window read from
    it is the window decode_audio gives from the container, up to the zero padding past the end. A copy
    without sidecars (made before them) reads the container as before, and a rerun of prepare adds them."""
    import shutil

    from augment import ClipSpec

    _, dst = prepared
    video = dst / "a" / "c25.mp4"
    assert decode.sidecar(video, 11025).is_file() and decode.sidecar(dst / "_pool" / "noise.mp4", 11025).is_file()
    rng = np.random.default_rng(0)
    for start in [0.0, 2.6, *rng.uniform(0, 3.0, 20)]:  # 2.6: the window runs past the end
        with av.open(str(video)) as c:
            want = decode.decode_audio(c, float(start), 2.0, 11025)
        assert torch.equal(decode.read_sidecar(video, float(start), 2.0, 11025), want)
    spec = ClipSpec(frames=8, fps=16, size=32)
    with_sidecar = decode.read_clip(video, 1.1, spec, dst / "_pool" / "noise.mp4", 0.7)
    old = tmp_path / "old"
    shutil.copytree(dst, old, ignore=shutil.ignore_patterns("*.pcm16"))
    without = decode.read_clip(old / "a" / "c25.mp4", 1.1, spec, old / "_pool" / "noise.mp4", 0.7)
    assert all(torch.equal(x, y) for x, y in zip(with_sidecar, without))
    assert decode.read_sidecar(old / "a" / "c25.mp4", 0.0, 2.0, 11025) is None
    src, _ = prepared
    prepare.prepare(src, old, short_side=32, gop=8, workers=1)  # the rerun writes only what is missing
    assert decode.sidecar(old / "a" / "c25.mp4", 11025).read_bytes() == decode.sidecar(video, 11025).read_bytes()


def test_the_frame_index_gives_the_containers_frames_and_a_stale_or_missing_one_is_handled(prepared, tmp_path):
    """prepare.py writes VIDEO.index beside each video; read through it (no container, one decoder kept
    open across clips and videos) a clip's frames are decode_frames' from the container, bit for bit, at
    every start including the first frame, the last keyframe and past the end. A copy without indexes
    reads its containers and a rerun of prepare adds them; an index that does not fit its video (the
    video replaced) is refused by name, with the command that remakes it."""
    import shutil

    from augment import ClipSpec

    _, dst = prepared
    rng = np.random.default_rng(1)
    for video in (dst / "a" / "c25.mp4", dst / "b" / "c10.mp4"):
        index = decode.read_frame_index(video)
        assert index is not None and index.rows[0, 3] == 1  # starts on a keyframe
        for start in [0.0, 0.5, 1.0, 2.9, 3.5, *rng.uniform(0, 3.0, 25)]:
            with decode.open_media(video) as c:
                want = decode.decode_frames(c, float(start), 8, 16.0)
            assert torch.equal(decode.decode_indexed(video, index, float(start), 8, 16.0), want), (video, start)
    pool_sound = dst / "_pool" / "noise.mp4"  # no video: an empty index, so a rerun sees the file done
    assert decode.frame_index(pool_sound).is_file() and decode.read_frame_index(pool_sound) is None
    spec = ClipSpec(frames=8, fps=16, size=32)
    video = dst / "a" / "c25.mp4"
    old = tmp_path / "old"
    shutil.copytree(dst, old, ignore=shutil.ignore_patterns("*.index"))
    assert decode.read_frame_index(old / "a" / "c25.mp4") is None
    assert all(
        torch.equal(x, y)
        for x, y in zip(
            decode.read_clip(old / "a" / "c25.mp4", 1.1, spec, audio_start=0.5),
            decode.read_clip(video, 1.1, spec, audio_start=0.5),
        )
    )
    src, _ = prepared
    prepare.prepare(src, old, short_side=32, gop=8, workers=1)  # the rerun adds the indexes
    assert decode.frame_index(old / "a" / "c25.mp4").read_bytes() == decode.frame_index(video).read_bytes()
    shutil.copy(dst / "b" / "c10.mp4", old / "a" / "c25.mp4")  # the video replaced, its index left behind
    with pytest.raises(ValueError, match=r"c25\.mp4\.index does not belong to .*python -m tools\.prepare"):
        decode.read_clip(old / "a" / "c25.mp4", 1.1, spec, audio_start=0.5)


def test_the_copys_manifest_keeps_silent_videos_for_evaluation_and_training_leaves_them_out(prepared):
    _, dst = prepared
    rows = {r["path"]: r for r in manifest.read_manifest(dst / "manifest.csv")}
    assert rows["b/quiet.mp4"]["has_audio"] == "0" and rows["a/c25.mp4"]["has_audio"] == "1"
    seen = manifest.load_split("folder", dst, "test", need_audio=False)  # the test split: what train.txt omits
    assert seen.missing == [] and [r.path for r in seen.records] == [str(dst / "b" / "quiet.mp4")]
    with pytest.raises(ValueError, match="1 listed, none in .* with a clip's audio"):  # nothing left to train on
        manifest.load_split("folder", dst, "test", need_audio=True)


@pytest.mark.parametrize(
    "argv,words",
    [
        (["{tmp}/nowhere", "{tmp}/out"], "source folder not found: {tmp}/nowhere"),
        (["{tmp}/empty", "{tmp}/out"], "no videos under {tmp}/empty"),
        (["{tmp}/empty", "{tmp}/out", "--fps", "-3"], "--fps -3.0: expected a value above 0"),
        (["{tmp}/empty", "{tmp}/out", "--gop", "0"], "--gop 0: expected a value of at least 1"),
    ],
)
def test_bad_inputs_end_in_one_line(tmp_path, capsys, argv, words):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as stop:
        prepare.main([a.format(tmp=tmp_path) for a in argv])
    said = str(stop.value.code) if stop.value.code != 2 else capsys.readouterr().err.strip()
    assert said.startswith("tools/prepare.py: ") and "\n" not in said and words.format(tmp=tmp_path) in said, said
    assert not (tmp_path / "out").exists()
