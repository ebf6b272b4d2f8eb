"""data.py on generated files: decoding, augmentation, spectrograms, layouts, faulty positives, scan."""

import io
import os
import shutil

import numpy as np
import pytest
import torch

import data
from augment import ClipSpec
from conftest import RATE, clicks, counter_frames
from media import decode, manifest
from tools import scan, synthetic


@pytest.mark.parametrize("fps,start", [(25, 0.4), (25, 1.73), (10, 0.4), (10, 2.0)])
def test_frames_map_to_16_fps_by_timestamp(files, fps, start):
    import av

    with av.open(str(files[f"{fps}fps"])) as c:
        frames = decode.decode_frames(c, start, 8, 16)
    assert frames.shape == (8, 32, 32, 3) and frames.dtype == torch.uint8
    expected = [3 * int(np.floor((start + k / 16) * fps + 1e-6)) for k in range(8)]
    got = frames[:, 16, 16, 0].int().tolist()
    assert np.abs(np.array(got) - expected).max() <= 2, (got, expected)  # H.264 rounding only
    if fps == 10:  # slower source: frames repeat
        assert len(set(expected)) < 8


@pytest.mark.parametrize("start", [0.0, 1.0, 1.3, 2.0])
def test_audio_is_aligned_after_seeking(files, start):
    import av

    with av.open(str(files["25fps"])) as c:
        wav = decode.decode_audio(c, start, 1.0, 11025).numpy()
    assert wav.shape == (11025,)
    first = np.argmax(np.abs(wav) > 0.1) / 11025 + start
    burst = min(s for s in (0.5, 1.5, 2.5) if s >= start)
    assert abs(first - burst) < 0.005


def test_read_clip_and_window_past_the_end(files):
    spec = ClipSpec()
    frames, wav = decode.read_clip(files["25fps"], 2.9, spec, audio_start=2.0)
    assert frames.shape == (8, 32, 32, 3) and wav.shape == (22050,)
    assert frames[-1, 0, 0, 0] >= 3 * 73  # last frames repeat the final one


def test_augmentation_uses_one_set_of_parameters_for_all_frames():
    torch.manual_seed(1)
    still = torch.randint(0, 256, (1, 48, 48, 3), dtype=torch.uint8).repeat(8, 1, 1, 1)
    transform = data.video_transform(32, train=True)
    for _ in range(10):
        out = transform(still)
        assert out.shape == (3, 8, 32, 32) and out.dtype == torch.uint8  # workers send small uint8 crops
        assert torch.equal(out[:, :1].expand_as(out), out)  # identical input frames stay identical
    a, b = transform(still), transform(still)
    assert not torch.equal(a, b)  # but the parameters do change between clips


def _scan(root):
    """The scan training and evaluation read (tools/scan.py), keeping silent videos as an evaluation's does."""
    scan.make_manifest(root, need_audio=False, jobs=1)
    return root


def _tree(root, rels, src):
    for rel in rels:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, root / rel)


def test_layouts(tmp_path, files):
    src = files["25fps"]
    # UCF101
    ucf = tmp_path / "ucf"
    _tree(ucf, ["A/v_A_g01.avi", "A/v_A_g02.avi", "B/v_B_g01.avi", "B/v_B_g02.avi"], src)
    (ucf / "ucfTrainTestlist").mkdir()
    (ucf / "ucfTrainTestlist/classInd.txt").write_text("1 A\n2 B\n")
    (ucf / "ucfTrainTestlist/trainlist01.txt").write_text("A/v_A_g01.avi 1\nB/v_B_g01.avi 2\n")
    (ucf / "ucfTrainTestlist/testlist01.txt").write_text("A/v_A_g02.avi\nB/v_B_g02.avi\n")
    recs, classes = manifest.load_records("ucf101", _scan(ucf), "test", need_audio=False)
    assert classes == ["A", "B"] and [os.path.basename(r.path) for r in recs] == ["v_A_g02.avi", "v_B_g02.avi"]
    assert [r.label for r in recs] == [0, 1] and abs(recs[0].duration - 3.0) < 0.1
    assert (ucf / "manifest.csv").exists()
    # HMDB51
    hmdb = tmp_path / "hmdb"
    _tree(hmdb, ["run/r1.avi", "run/r2.avi", "sit/s1.avi", "sit/s2.avi"], src)
    (hmdb / "splits").mkdir()
    (hmdb / "splits/run_test_split1.txt").write_text("r1.avi 1\nr2.avi 2\n")
    (hmdb / "splits/sit_test_split1.txt").write_text("s1.avi 2\ns2.avi 0\n")
    recs, classes = manifest.load_records("hmdb51", _scan(hmdb), "test", annotations=hmdb / "splits")
    assert classes == ["run", "sit"] and [(os.path.basename(r.path), r.label) for r in recs] == [
        ("r2.avi", 0),
        ("s1.avi", 1),
    ]
    # Kinetics, folders and CSV
    kin = tmp_path / "kin"
    _tree(
        kin, ["train/drums/x_000001_000011.mp4", "train/harp/y_000000_000010.mp4", "val/harp/z_000002_000012.mp4"], src
    )
    recs, classes = manifest.load_records("kinetics", _scan(kin), "train")
    assert classes == ["drums", "harp"] and len(recs) == 2
    (kin / "k.csv").write_text(
        "label,youtube_id,time_start,time_end,split\nharp,z,2,12,validate\n"
        "harp,missing,0,10,validate\ndrums,x,1,11,train\n"
    )
    recs, classes = manifest.load_records("kinetics", _scan(kin), "val", annotations=kin / "k.csv")
    assert classes == ["harp"] and [os.path.basename(r.path) for r in recs] == ["z_000002_000012.mp4"]
    # plain folder with split lists; '_' folders are not classes
    fol = tmp_path / "fol"
    _tree(fol, ["cat/1.mp4", "cat/2.mp4", "dog/1.mkv", "_pool/p.mp4"], src)
    (fol / "train.txt").write_text("cat/1.mp4\ndog/1.mkv\n")
    recs, classes = manifest.load_records("folder", _scan(fol), "train")
    assert classes == ["cat", "dog"] and [r.label for r in recs] == [0, 1]
    with pytest.raises(ValueError, match="layout"):
        manifest.list_split("youtube", fol, "train")
    with pytest.raises(FileNotFoundError, match="classInd"):
        manifest.list_split("ucf101", fol, "train")


def _dataset_files(tmp_path, files, n=10):
    fol = tmp_path / "ds"
    rels = [f"c{k % 2}/{k}.mp4" for k in range(n)]
    _tree(fol, rels, files["25fps"])
    (fol / "train.txt").write_text("\n".join(rels) + "\n")  # every file trains
    return manifest.load_records("folder", _scan(fol), "train")[0]


def test_a_preload_mode_string_is_refused_not_read_as_on(tmp_path, files):
    """bool("off") is True: a --preload mode passed through as the flag would decode the whole set."""
    recs = _dataset_files(tmp_path, files, n=2)
    for mode in ("off", "auto", "on"):
        with pytest.raises(TypeError, match=f"preload='{mode}'"):
            data.AVDataset(recs, train=False, preload=mode)
    assert data.AVDataset(recs, train=False, preload=False).memory is None


def test_faulty_fraction_is_seeded_and_replaces_the_audio(tmp_path, files):
    recs = _dataset_files(tmp_path, files)
    pool = manifest.audio_pool(files["silent_pool"].parent)

    def make(seed, p=0.3):
        return data.AVDataset(recs, train=True, faulty_fraction=p, faulty_source="heldout", pool=pool, seed=seed)

    a, b, c = make(0), make(0), make(1)
    assert int(a.injected.sum()) == 3 and torch.equal(a.injected, b.injected)
    assert not torch.equal(a.injected, c.injected)
    assert int(make(0, 0.6).injected.sum()) == 6
    i_fake, i_real = int(a.injected.nonzero()[0]), int((~a.injected).nonzero()[0])
    fake, real = a[i_fake], a[i_real]
    assert fake["faulty"] and not real["faulty"] and fake["index"] == i_fake
    assert fake["audio"].shape == real["audio"].shape == (22050,)  # 2 s waveforms; spectrograms come later
    assert fake["audio"].abs().max() == 0 and real["audio"].abs().max() > 0.1  # the silent pool vs clicks
    with pytest.raises(ValueError, match="pool"):
        data.AVDataset(recs, faulty_fraction=0.3, faulty_source="heldout")


def test_each_injected_instance_gets_a_pool_file_of_its_own_and_a_small_pool_is_refused(tmp_path, files):
    """Reusing a replacement sound would put it in several bank slots, the very thing that made the
    'train' deviation score clean videos as faulty: the pool is drawn without replacement."""
    recs = _dataset_files(tmp_path, files)
    pool = manifest.audio_pool(files["silent_pool"].parent)  # 6 files
    ds = data.AVDataset(recs, train=True, faulty_fraction=0.6, faulty_source="heldout", pool=pool, seed=2)
    used = [path for path, _ in ds.donor.values()]
    assert len(used) == 6 and len(set(used)) == 6 and set(used) <= {p for p, _ in pool}
    assert data.AVDataset(recs, faulty_fraction=0.6, pool=pool, seed=2).donor == ds.donor  # pool is the default
    with pytest.raises(ValueError, match=r"holds 6 audio files.*injects 7 of 10.*file of its own"):
        data.AVDataset(recs, train=True, faulty_fraction=0.7, faulty_source="heldout", pool=pool)


def test_the_train_deviation_lends_another_training_videos_audio(tmp_path, files):
    """faulty_source='train' (not the paper's: Sec. 5.2 takes audio outside the training set): the
    audio of another training video, never the instance's own, fixed per instance and seed."""
    recs = _dataset_files(tmp_path, files, n=10)
    ds = data.AVDataset(recs, train=True, faulty_fraction=0.5, faulty_source="train", seed=3)
    assert int(ds.injected.sum()) == 5 and set(ds.donor) == set(ds.injected.nonzero().flatten().tolist())
    paths = [r.path for r in recs]
    for i, (path, seconds) in ds.donor.items():
        assert path in paths and path != recs[i].path  # another video of the same training set
        assert seconds == recs[paths.index(path)].audio_duration
    again = data.AVDataset(recs, train=True, faulty_fraction=0.5, faulty_source="train", seed=3)
    assert again.donor == ds.donor
    # the item carries the donor's sound: two videos whose clicks differ, one of them injected
    two = tmp_path / "two"
    _tree(two, ["a/0.mp4"], files["25fps"])
    _tree(two, ["b/1.mp4"], files["10fps"])
    (two / "train.txt").write_text("a/0.mp4\nb/1.mp4\n")
    recs2 = manifest.load_records("folder", _scan(two), "train")[0]
    swapped = data.AVDataset(recs2, train=False, faulty_fraction=0.5, faulty_source="train", seed=0)
    clean = data.AVDataset(recs2, train=False)
    i = int(swapped.injected.nonzero()[0])
    assert torch.equal(swapped[i]["audio"], clean[1 - i]["audio"])  # the other video's clicks
    assert not torch.equal(swapped[i]["audio"], clean[i]["audio"])
    assert torch.equal(swapped[i]["video"], clean[i]["video"])  # its own picture


def test_eval_items_hold_ten_clips(tmp_path, files):
    recs = _dataset_files(tmp_path, files, n=2)
    item = data.AVDataset(recs, train=False, audio=False)[0]
    assert item["video"].shape == (10, 3, 8, 80, 80) and "audio" not in item


def make_bad_folder(root, files):
    root.mkdir()
    good = root / "good.mp4"
    shutil.copy(files["25fps"], good)
    frames, wav = counter_frames(3.0, 25), clicks(3.0, ())
    synthetic.write_mp4(root / "noaudio.mp4", frames, None, 25, RATE)
    synthetic.write_mp4(root / "short.mp4", frames[:10], wav[: RATE // 4], 25, RATE)
    (root / "empty.mp4").write_bytes(b"")
    (root / "random.mp4").write_bytes(np.random.default_rng(0).bytes(20000))
    # moov atom first (faststart), so a cut file still opens but loses its second half
    import av

    with av.open(str(root / "full.mp4"), "w", options={"movflags": "faststart"}) as c:
        vs = c.add_stream("libx264", rate=25, options={"preset": "ultrafast"})
        vs.width = vs.height = 32
        vs.pix_fmt = "yuv420p"
        aus = c.add_stream("aac", rate=RATE)
        for img in np.concatenate([counter_frames(3.0, 25)] * 2):  # 6 s
            c.mux(vs.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
        c.mux(vs.encode())
        frame = av.AudioFrame.from_ndarray(clicks(6.0, ())[None], format="fltp", layout="mono")
        frame.sample_rate = RATE
        c.mux(aus.encode(frame))
        c.mux(aus.encode())
    blob = (root / "full.mp4").read_bytes()
    (root / "truncated.mp4").write_bytes(blob[: len(blob) // 2])
    (root / "full.mp4").unlink()
    return root


def test_scan_reports_each_bad_file_with_its_reason(tmp_path, files):
    root = make_bad_folder(tmp_path / "bad", files)
    out = io.StringIO()
    rows = scan.scan(root, out=out)
    assert [r["path"] for r in rows] == ["good.mp4"]
    assert rows[0]["has_audio"] == 1 and abs(float(rows[0]["duration"]) - 3.0) < 0.1
    lines = dict(line.split(": ", 2)[1:] for line in out.getvalue().strip().splitlines())
    reasons = {os.path.basename(k): v for k, v in lines.items()}
    assert reasons["empty.mp4"] == "empty file"
    assert reasons["random.mp4"].startswith("cannot be opened")
    assert reasons["noaudio.mp4"] == "no audio stream"
    assert reasons["short.mp4"].startswith("shorter than one clip")
    assert reasons["truncated.mp4"].startswith("truncated")
    video_only = scan.scan(root, need_audio=False, out=io.StringIO())
    assert sorted(r["path"] for r in video_only) == ["good.mp4", "noaudio.mp4"]


def test_a_bad_file_met_in_training_stops_it_naming_the_file(tmp_path, files):
    recs = _dataset_files(tmp_path, files, n=4)
    bad = tmp_path / "ds/c0/0.mp4"
    bad.write_bytes(b"not a video")
    ds = data.AVDataset(recs, train=True)
    assert ds[1]["index"] == 1  # the others read as before
    with pytest.raises(RuntimeError, match=f"{bad} failed to decode"):
        ds[0]


def test_scan_cli_writes_a_manifest(tmp_path, files, capsys):
    root = make_bad_folder(tmp_path / "bad", files)
    scan.main([str(root), "--out", str(tmp_path / "m.csv")])
    text = (tmp_path / "m.csv").read_text().splitlines()
    assert text[0].startswith("path,label,duration") and len(text) == 2
    assert "1 usable videos" in capsys.readouterr().out


def test_seeded_items_do_not_depend_on_workers(tmp_path, files):
    ds = data.AVDataset(_dataset_files(tmp_path, files, n=6), ClipSpec(size=32), train=True)
    sampler = data.SeededSampler(torch.utils.data.DistributedSampler(ds, num_replicas=1, rank=0, seed=3), seed=3)

    def epoch(e, workers):
        sampler.set_epoch(e)
        loader = torch.utils.data.DataLoader(ds, batch_size=3, sampler=sampler, num_workers=workers)
        return [(b["index"], b["video"], b["audio"]) for b in loader]

    a, b = epoch(1, 0), epoch(1, 2)
    assert all(torch.equal(x, y) for ba, bb in zip(a, b) for x, y in zip(ba, bb))
    assert ds[np.int64(2)]["index"] == 2  # plain indices of any integer type still work (Subset gives numpy's)
    c = epoch(2, 0)  # another epoch draws other clips and crops
    assert not all(torch.equal(x[1], y[1]) for x, y in zip(a, c))


def test_a_seeded_item_is_what_its_seed_alone_draws_and_leaves_the_global_stream_alone(tmp_path, files):
    ds = data.AVDataset(_dataset_files(tmp_path, files, n=6), ClipSpec(size=32), train=True)
    torch.manual_seed(123)
    expected = torch.rand(3)  # the global stream, as it goes on without any item made
    torch.manual_seed(123)
    item = ds[(4, 99)]
    assert torch.equal(torch.rand(3), expected)  # making the item neither drew from nor reseeded it
    torch.manual_seed(99)  # the seed as the whole global state, the way a fresh process would hold it
    ref = ds[4]  # an index alone: the global generator draws
    assert torch.equal(item["video"], ref["video"]) and torch.equal(item["audio"], ref["audio"])
    assert not torch.equal(ds[(4, 100)]["video"], item["video"])  # another seed, another crop


def _write_mpeg_ps(path, seconds=3.0, fps=25):
    """A real MPEG-PS file (.mpg): MPEG-1 video and MP2 audio, as old archives hold."""
    import av

    with av.open(str(path), "w", format="mpeg") as c:
        vs = c.add_stream("mpeg1video", rate=fps)
        vs.width = vs.height = 32
        vs.pix_fmt = "yuv420p"
        aus = c.add_stream("mp2", rate=44100)
        aus.layout = "mono"
        for img in counter_frames(seconds, fps):
            c.mux(vs.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
        c.mux(vs.encode())
        wav = np.zeros((1, int(44100 * seconds)), np.int16)
        for k in range(0, wav.shape[1], 1152):
            frame = av.AudioFrame.from_ndarray(wav[:, k : k + 1152], format="s16", layout="mono")
            frame.sample_rate, frame.pts = 44100, k
            c.mux(aus.encode(frame))
        c.mux(aus.encode())


def test_every_common_container_is_used_and_other_media_are_named_once(tmp_path, files):
    root = tmp_path / "media"
    _tree(root, ["a/phone.mov", "a/clip.m4v", "b/old.3gp"], files["25fps"])  # MP4 content: PyAV reads it
    _write_mpeg_ps(root / "b" / "archive.mpg")
    (root / "a" / "talk.wmv").write_bytes(b"0" * 100)
    (root / "b" / "song.wav").write_bytes(b"0" * 100)
    (root / "b" / "notes.txt").write_text("not media")
    out = io.StringIO()
    rows = scan.scan(root, need_audio=False, out=out)
    assert sorted(r["path"] for r in rows) == ["a/clip.m4v", "a/phone.mov", "b/archive.mpg", "b/old.3gp"]
    text = out.getvalue()
    assert "talk.wmv: .wmv is not a supported video container" in text and "song.wav: audio only" in text
    assert "notes.txt" not in text


def test_the_first_epoch_does_not_visit_the_injected_videos_first(tmp_path, files):
    """The injection draw and the loader's shuffle must be independent: when both were seeded with
    `seed`, epoch 0 visited every injected video first, in batches of faulty positives only."""
    import types

    recs = _dataset_files(tmp_path, files) * 20  # 200 instances; nothing is decoded here
    for seed in range(3):
        ds = data.AVDataset(recs, train=True, faulty_fraction=0.5, faulty_source="train", seed=seed)
        sampler, _ = data.train_loader(
            types.SimpleNamespace(batch_size=20, seed=seed, workers=0), ds, 0, 1, torch.device("cpu")
        )
        for epoch in range(3):
            sampler.set_epoch(epoch)
            order = torch.tensor([i for i, _ in sampler])  # (200,) the epoch's visiting order
            first_half = ds.injected[order[:100]].float().mean()
            assert 0.3 < first_half < 0.7, (seed, epoch, float(first_half))  # hypergeometric: 0.5 +- 0.035


def test_training_evaluation_and_preload_decode_and_convert_with_one_thread(tmp_path, files, monkeypatch):
    """FFmpeg's and PyAV's default (0: one thread per core) is replaced wherever a clip is decoded:
    training items, injected audio, evaluation items, and the preload that decodes whole files."""
    seen = []
    for name in ("decode_frames", "decode_audio"):
        real = getattr(decode, name)

        def spy(container, *a, _real=real, **k):
            seen.extend(s.codec_context.thread_count for s in container.streams if s.type in ("video", "audio"))
            return _real(container, *a, **k)

        monkeypatch.setattr(decode, name, spy)
    recs = _dataset_files(tmp_path, files, n=4)
    pool = manifest.audio_pool(files["silent_pool"].parent)
    data.AVDataset(recs, train=True, faulty_fraction=0.5, pool=pool)[0]  # a training item
    decode.read_clip(recs[0].path, 0.5, ClipSpec(), audio_path=pool[0][0], audio_start=0.0)  # injected audio
    data.AVDataset(recs, train=False, audio=False, num_clips=2)[1]  # evaluation
    data.AVDataset(
        manifest.load_records("folder", _scan(_tree_for(tmp_path, files["10fps"])), "train")[0], preload=True
    )
    assert len(seen) >= 8 and set(seen) == {decode.DECODER_THREADS} == {1}
    # every frame conversion asks swscale for SWSCALE_THREADS (1), not PyAV's default of one per core:
    # an invalid count there is refused by FFmpeg, so it does reach the conversion
    assert decode.SWSCALE_THREADS == 1
    monkeypatch.setattr(decode, "SWSCALE_THREADS", -1)
    with pytest.raises(Exception, match="Invalid argument"):
        decode.read_clip(recs[0].path, 0.5, ClipSpec(), audio_start=0.0)


def test_decoded_frames_are_those_of_a_per_frame_conversion_and_a_mislabelled_container_still_opens(files, tmp_path):
    """decode_frames converts a clip's frames with one reused swscale context: the same pixels as PyAV's
    per-frame to_ndarray. open_media names the demuxer from the suffix, and a file whose suffix lies (a
    Matroska file called .mp4) is opened by FFmpeg's probe instead of failing."""
    import av

    path = files["25fps"]
    with av.open(str(path)) as c:
        want = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]  # (H, W, 3) each, at 25 fps
    with decode.open_media(path) as c:
        assert c.format.name == "mp4"  # named, not probed ("mov,mp4,m4a,3gp,3g2,mj2")
        got = decode.decode_frames(c, 0.0, 6, 12.5)  # every second frame, from the first
    assert torch.equal(got, torch.from_numpy(np.stack(want[0:12:2])))
    liar = tmp_path / "really_matroska.mp4"
    with av.open(str(path)) as src, av.open(str(liar), "w", format="matroska") as dst:
        stream = dst.add_stream_from_template(src.streams.video[0])
        for packet in src.demux(video=0):
            if packet.dts is not None:
                packet.stream = stream
                dst.mux(packet)
    with decode.open_media(liar) as c:
        assert c.format.name.startswith("matroska")
        assert torch.equal(decode.decode_frames(c, 0.0, 6, 12.5), got)


def _tree_for(tmp_path, video):
    root = tmp_path / "one"
    _tree(root, ["c/a.mp4"], video)
    (root / "train.txt").write_text("c/a.mp4\n")
    return root


def test_the_training_transform_is_v2s_compose_of_crop_and_flip_draw_for_draw():
    """data.video_transform calls RandomResizedCrop and the flip through their parts: for the same seed
    the same clip as v2.Compose([RandomResizedCrop, RandomHorizontalFlip]) on a tv_tensors.Video, and
    the generator left in the same state."""
    from torchvision import tv_tensors
    from torchvision.transforms import v2

    frames = torch.randint(0, 256, (4, 50, 70, 3), dtype=torch.uint8)
    for strength in (1.0, 0.5):
        fast = data.video_transform(32, True, strength)
        reference = v2.Compose(
            [v2.RandomResizedCrop(32, scale=(1 - 0.6 * strength, 1.0), antialias=True), v2.RandomHorizontalFlip()]
        )
        for seed in range(40):
            torch.manual_seed(seed)
            got, after = fast(frames), torch.rand(1)
            torch.manual_seed(seed)
            want = reference(tv_tensors.Video(frames.permute(0, 3, 1, 2))).permute(1, 0, 2, 3)
            assert torch.equal(got, want) and torch.equal(after, torch.rand(1))


def test_uniform_rounds_as_the_float32_tensor_expressions_it_replaced():
    """data.uniform draws from an item's own generator what `float(torch.rand(()) * room)` (a clip's start)
    and `float(0.8 + 0.4 * torch.rand(()))` (its volume) drew from the seeded global one, to the last bit."""
    for seed in range(300):
        g = torch.Generator().manual_seed(seed)
        got = [data.uniform(g, 7.3), data.uniform(g, 0.4, 0.8), data.uniform(g, 1e-3)]
        torch.manual_seed(seed)
        want = [float(torch.rand(()) * 7.3), float(0.8 + 0.4 * torch.rand(())), float(torch.rand(()) * 1e-3)]
        assert got == want, seed


def test_a_file_that_fails_to_decode_is_named_and_a_bug_is_not_dressed_as_one(tmp_path, files):
    ds = data.AVDataset(_dataset_files(tmp_path, files, n=2), ClipSpec(size=32), train=True)
    with open(ds.records[1].path, "wb") as f:  # broken after the scan
        f.write(b"\x00" * 4096)
    with pytest.raises(data.BadMedia, match=f"data: {ds.records[1].path} failed to decode"):
        ds[(1, 0)]

    def bug(i, g):
        raise TypeError("a mistake in the item's code")

    with pytest.raises(TypeError, match="a mistake"):  # its own traceback, not "failed to decode"
        ds.seeded((0, 0), make=bug)
