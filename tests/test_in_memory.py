"""media/in_memory.py: the batches cut on the device from memory are the batches a DataLoader collates from
the same preloaded set, for the same seed, epoch and index: frames, indices and failed slots bit for bit, and
the sound's mel power equal to the loader's waveform's to rounding but for a clip's first frame (centre
padding: at the sound's edges here, at the clip's there); injected sounds, failed files and a resumed epoch
included. Where a file read (--preload off) decodes the same instants, they are its batches too. And
--preload auto picks the path by the set's size against free memory.

The set is distinct, textured videos (no two pixels, frames, videos or mirror images alike) of several
lengths, and distinct sounds of several lengths: a wrong crop box, a missing flip, another video's or
sound's row, or a clip start clamped to the padded table instead of its own video all change the batch."""

import numpy as np
import pytest
import torch
from torch.utils.data import default_collate

import augment
import data
from augment import ClipSpec
from conftest import RATE
from media import in_memory, manifest
from test_data import _dataset_files
from tools import scan
from tools.render import write_mp4

SPEC = ClipSpec(size=24, frames=4, fps=8.0, n_mels=20, n_time=20)  # a clip is 0.5 s; its sound window 2 s


def textured(seconds, k, fps=10, size=32):
    """Video k's frames: gradients of another slope per channel, shifted per video and per frame."""
    yy, xx = np.mgrid[:size, :size]
    base = np.stack([xx * 7 + yy * 3 + 40 * k, yy * 11 + 17 * k, xx * yy + 5 * k], -1)
    return np.stack([(base + 9 * f) % 256 for f in range(int(round(seconds * fps)))]).astype(np.uint8)


def tone(seconds, k):
    """Sound k: a tone of its own pitch under seeded noise."""
    t = np.arange(int(RATE * seconds)) / RATE
    noise = np.random.default_rng(k).standard_normal(len(t))
    return (0.3 * np.sin(2 * np.pi * (200 + 150 * k) * t) + 0.1 * noise).astype(np.float32)


@pytest.fixture(scope="module")
def varied(tmp_path_factory):
    """{"short": (records, pool), "long": (records, pool)}. short: videos no longer than one clip (each
    clip starts at 0) with sounds of 2-3 s, and a pool of 2 s sounds (each window starts at 0): a file
    read decodes the instants memory holds. long: videos of 0.6-2.4 s (0.6 s is 4.8 frames at 8 fps,
    decoded as 4: a start past 0.06 s is clamped to the video's end) with sounds of 1-3 s, some shorter
    than the window, and a pool of 1-4 s sounds."""
    root = tmp_path_factory.mktemp("varied")

    def video(name, k, seconds, sound_seconds):
        write_mp4(root / name, textured(seconds, k), tone(sound_seconds, k), 10, RATE)
        return manifest.Record(str(root / name), k % 2, seconds, sound_seconds)

    def pool(name, seconds, k):
        write_mp4(root / name, None, tone(seconds, k), 25, RATE)
        return (str(root / name), seconds)

    short = [video(f"s{k}.mp4", k, s, 2.0 + 0.2 * k) for k, s in enumerate([0.3, 0.4, 0.5, 0.3, 0.5, 0.4])]
    long = [
        video(f"l{k}.mp4", 10 + k, s, a)
        for k, (s, a) in enumerate(zip([0.6, 1.1, 1.6, 2.4, 0.6, 1.6], [1.0, 3.0, 1.4, 2.4, 2.6, 1.8]))
    ]
    return {
        "short": (short, [pool(f"ps{k}.mp4", 2.0, 20 + k) for k in range(3)]),
        "long": (long, [pool(f"pl{k}.mp4", s, 30 + k) for k, s in enumerate([1.0, 3.0, 4.0])]),
    }


def _set(varied, which, preload=True, **kwargs):
    records, pool = varied[which]
    return data.AVDataset(records, SPEC, train=True, faulty_fraction=0.5, pool=pool, seed=3, preload=preload, **kwargs)


def _assert_same_batch(got, want):
    """got: an in-memory batch, want: the loader's. The loader's spectrogram frames come from the clip's
    waveform: frame j covers samples [(j-1)*hop, (j+1)*hop) of it, so frame 0 reaches hop samples before
    the clip (reflected there, the sound's own samples here) and SPEC's last frame, 20*1102 <= 22050, none
    past it. The volume enters as its square here, inside the waveform there: a rounding of ~1e-7."""
    assert set(got) >= {"video", "mel", "index"} and "audio" not in got
    for key in ("video", "index"):
        assert got[key].dtype == want[key].dtype and torch.equal(got[key], want[key]), key
    loader = augment.MelPower(SPEC)(want["audio"])[..., : SPEC.n_time]  # (B, n_mels, n_time)
    assert got["mel"].shape == loader.shape == (len(want["index"]), SPEC.n_mels, SPEC.n_time)
    torch.testing.assert_close(got["mel"][..., 1:], loader[..., 1:], rtol=1e-5, atol=1e-10)
    return loader


KEYS = [(i, 1000 + 7 * i + 100 * r) for r in range(4) for i in range(6)]  # every instance, 4 seeds each


def test_audio_windows_start_on_the_hop_grid_and_at_a_sounds_start_even_the_edge_frame_agrees(varied):
    ds = _set(varied, "long")
    clips = in_memory.InMemoryClips(ds, torch.device("cpu"))
    draws = [ds.seeded(k, make=clips._draw) for k in KEYS]
    assert all(SPEC.first_sample(d["audio_start"]) % SPEC.hop == 0 for d in draws)
    at_start = torch.tensor([d["audio_start"] == 0 for d in draws])  # (B,): both paths pad the sound's start
    assert at_start.any() and not at_start.all()
    got = clips.batch(KEYS)
    loader = _assert_same_batch(got, default_collate([ds[k] for k in KEYS]))
    torch.testing.assert_close(got["mel"][at_start], loader[at_start], rtol=1e-5, atol=1e-10)
    assert not torch.allclose(got["mel"][~at_start, :, 0], loader[~at_start, :, 0], rtol=1e-3)  # elsewhere not


def test_in_memory_batches_equal_the_loaders_on_videos_and_sounds_of_several_lengths(varied):
    ds = _set(varied, "long")
    assert ds.injected.any() and not ds.injected.all()
    clips = in_memory.InMemoryClips(ds, torch.device("cpu"))
    assert len(set(clips.lengths.tolist())) > 2 and clips.mel.shape[0] == len(ds) + int(ds.injected.sum())
    got = clips.batch(KEYS)
    _assert_same_batch(got, default_collate([ds[k] for k in KEYS]))
    assert got["video"].shape == (len(KEYS), 3, SPEC.frames, SPEC.size, SPEC.size)
    draws = [ds.seeded(k, make=clips._draw) for k in KEYS]
    clamped = [d["start"] * SPEC.fps > int(clips.lengths[i]) - SPEC.frames + 0.5 for (i, _), d in zip(KEYS, draws)]
    assert any(clamped) and not all(clamped)  # some clips start where only the clamp keeps them in the video
    assert {d["flip"] for d in draws} == {True, False}
    assert len({v.sum().item() for v in got["video"]}) == len(KEYS)  # no two clips alike


def test_in_memory_batches_equal_a_file_reads_where_it_decodes_the_same_instants(varied):
    """--preload off reads each clip at its own start time and resamples each sound window; memory holds
    frames on the 1/fps grid from 0 and whole resampled sounds. Where every clip and window starts at 0
    (videos no longer than one clip, windows at a sound's start) the two paths decode the same samples:
    frames bit for bit, mel power to rounding, the edge frame included."""
    on, off = _set(varied, "short"), _set(varied, "short", preload=False)
    assert off.memory is None and on.injected.any() and not on.injected.all()
    got = in_memory.InMemoryClips(on, torch.device("cpu")).batch(KEYS)
    loader = _assert_same_batch(got, default_collate([off[k] for k in KEYS]))
    torch.testing.assert_close(got["mel"], loader, rtol=1e-5, atol=1e-10)
    assert len({v.sum().item() for v in got["video"]}) == len(KEYS)  # no two clips alike


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU cut needs CUDA")
def test_the_gpu_cut_is_within_one_level_of_the_loaders_cpu_cut(varied):
    """On a GPU, TF.resized_crop takes the uint8 crop through float32 and rounds, where the CPU's uint8
    resize rounds in fixed point. The bound: every pixel within 1 uint8 level of the loader's CPU cut,
    a mean absolute difference of at most 0.5 levels (a wrong crop, flip or row differs by tens), the
    mel power the CPU's to float32 rounding, and the index and failed slots equal."""
    ds = _set(varied, "long")
    got = in_memory.InMemoryClips(ds, torch.device("cuda")).batch(KEYS)
    want = default_collate([ds[k] for k in KEYS])
    assert got["video"].is_cuda and got["video"].dtype == want["video"].dtype == torch.uint8
    diff = (got["video"].cpu().int() - want["video"].int()).abs()
    print(f"GPU cut: largest difference {int(diff.max())} uint8 levels, mean {diff.float().mean():.4f}")  # gpu_check
    assert diff.max() <= 1 and diff.float().mean() <= 0.5
    cpu = in_memory.InMemoryClips(ds, torch.device("cpu")).batch(KEYS)
    torch.testing.assert_close(got["mel"].cpu(), cpu["mel"], rtol=1e-4, atol=1e-8)
    assert torch.equal(got["index"].cpu(), want["index"])


def test_a_failed_file_stops_both_paths_naming_it(varied):
    ds = _set(varied, "long")
    bad = ds.records[0].path
    ds.memory[bad] = (RuntimeError("broken"), None)  # as a file that did not decode is held
    clips = in_memory.InMemoryClips(ds, torch.device("cpu"))
    for cut in (lambda: clips.batch([(1, 9), (0, 3)]), lambda: ds[(0, 3)]):
        with pytest.raises(RuntimeError, match=f"{bad} failed to decode: broken"):
            cut()


def test_the_in_memory_loader_follows_the_sampler(varied):
    ds = _set(varied, "long")
    sampler = data.SeededSampler(torch.utils.data.RandomSampler(ds, generator=torch.Generator()), seed=4)
    loader = in_memory.InMemoryLoader(in_memory.InMemoryClips(ds, torch.device("cpu")), sampler, 3)
    reference = torch.utils.data.DataLoader(ds, batch_size=3, sampler=sampler, drop_last=True)
    assert len(loader) == len(reference) == len(ds) // 3
    for seed in (11, 12):  # two epochs' orders
        sampler.sampler.generator.manual_seed(seed)
        mine = list(loader)
        sampler.sampler.generator.manual_seed(seed)
        theirs = list(reference)
        assert len(mine) == len(theirs) == len(ds) // 3
        for a, b in zip(mine, theirs):
            _assert_same_batch(a, b)


def test_preload_auto_is_on_only_when_the_set_fits_in_half_the_free_memory(tmp_path, files, monkeypatch):
    recs = _dataset_files(tmp_path, files, n=4)
    need, _ = in_memory.decoded_bytes(recs, SPEC)
    assert need >= 4 * int(3.0 * SPEC.fps) * 32 * 32 * 3  # 4 videos of 3 s, 32x32 pixels
    monkeypatch.setattr(in_memory, "free_bytes", lambda device: 2 * need)
    assert in_memory.choose("auto", recs, SPEC) == "on"
    monkeypatch.setattr(in_memory, "free_bytes", lambda device: 2 * need - 2)
    assert in_memory.choose("auto", recs, SPEC) == "off"
    assert in_memory.choose("on", recs, SPEC) == "on" and in_memory.choose(False, recs, SPEC) == "off"


@pytest.mark.parametrize("mode", ["on", "off"])
def test_train_py_names_the_path_it_took_and_records_it_resolved(tiny_data, tmp_path, capsys, mode):
    from config import parse_config

    cfg = parse_config(
        ["--preset", "demo", "--data", str(tiny_data), "--num-negatives", "7", "--batch-size", "8", "--preload", mode]
    )
    ds = data.build_train_set(cfg)
    data.train_loader(cfg, ds, 0, 1, torch.device("cpu"))
    said = capsys.readouterr().out
    assert said.startswith("train.py: data in memory" if mode == "on" else "train.py: data read from the files")
    cfg = parse_config(["--preset", "demo", "--data", str(tiny_data), "--num-negatives", "7", "--preload", "auto"])
    data.build_train_set(cfg)
    assert cfg.preload in ("on", "off")  # what the checkpoint keeps, so a resume compares like with like


def test_a_resumed_run_keeps_the_path_its_checkpoint_took_whatever_memory_is_free_now(tiny_data, tmp_path, monkeypatch):
    """--preload auto, resumed where less memory is free: the path is the checkpoint's ("on"), not a new
    answer that Run.restore would then refuse as a changed setting ("preload 'on' -> 'off'")."""
    from config import parse_config

    monkeypatch.setattr(in_memory, "free_bytes", lambda device: 1000)  # bytes: far below the set
    argv = ["--preset", "demo", "--data", str(tiny_data), "--num-negatives", "7", "--out", str(tmp_path)]
    cfg = parse_config([*argv, "--preload", "auto"])
    data.build_train_set(cfg)
    assert cfg.preload == "off"  # a fresh run: the memory decides
    from checkpoint import CHECKPOINT_FORMAT

    started = {"format": CHECKPOINT_FORMAT, "config": {"preload": "on"}, "model": {}}  # as the restore reads it
    torch.save(started, tmp_path / "ckpt.pt")  # the started run's setting, as saved
    cfg = parse_config([*argv, "--preload", "auto"])
    assert data.build_train_set(cfg).memory is not None and cfg.preload == "on"


def test_a_resume_from_the_previous_checkpoint_keeps_the_path_that_checkpoint_took(tiny_data, tmp_path, monkeypatch):
    """--preload auto with ckpt.pt unreadable (truncated) and 1 kB free now: the resume restores ckpt.pt.prev, and
    takes its path ("on"), not a new answer that the restore would refuse ("preload 'on' -> 'off'")."""
    import checkpoint
    import train
    from config import parse_config
    from test_train import TINY, log

    argv = ["--preset", "demo", "--data", str(tiny_data), "--out", str(tmp_path), "--warmup-epochs", "2"]
    argv += ["--epochs", "0", "--preload", "auto", *TINY, "--workers", "0"]
    monkeypatch.setattr(in_memory, "free_bytes", lambda device: 2**40)
    train.main(parse_config(argv))  # ckpt.pt after epoch 1, ckpt.pt.prev after epoch 0: both "on"
    ckpt = tmp_path / "ckpt.pt"
    ckpt.write_bytes(ckpt.read_bytes()[:1000])
    monkeypatch.setattr(in_memory, "free_bytes", lambda device: 1000)
    train.main(parse_config(argv))  # the same command: epoch 1 again, from ckpt.pt.prev
    assert checkpoint.load_checkpoint(ckpt)["config"]["preload"] == "on"
    assert [r["epoch"] for r in log(tmp_path)] == [0, 1]


def test_preload_auto_counts_the_padded_tables_and_the_decoded_copy_beside_them(tmp_path, monkeypatch):
    """Videos of uneven lengths (UCF101's): the tables pad each to the longest, and on the CPU the decoded
    files stay alive beside them. The estimate covers what a preloaded training set holds, within 2x."""
    from conftest import RATE, clicks, counter_frames
    from tools.render import write_mp4

    root = tmp_path / "uneven"
    for k, seconds in enumerate([6.0] + [1.0] * 5):
        (root / "c0").mkdir(parents=True, exist_ok=True)
        write_mp4(root / "c0" / f"{k}.mp4", counter_frames(seconds, 10), clicks(seconds, (0.5,)), 10, RATE)
    (root / "train.txt").write_text("".join(f"c0/{k}.mp4\n" for k in range(6)))
    scan.make_manifest(root, need_audio=False, jobs=1)
    recs = manifest.load_records("folder", root, "train")[0]
    ds = data.AVDataset(recs, SPEC, train=True, preload=True)
    clips = in_memory.InMemoryClips(ds, torch.device("cpu"))
    held = sum(sum(t.nbytes for t in pair if isinstance(t, torch.Tensor)) for pair in ds.memory.values())
    decoded, table = in_memory.decoded_bytes(recs, SPEC)
    assert held + clips.nbytes() <= decoded + table <= 2 * (held + clips.nbytes())
    monkeypatch.setattr(in_memory, "free_bytes", lambda device: 2 * (decoded + table) - 2)
    assert in_memory.choose("auto", recs, SPEC, torch.device("cpu")) == "off"  # both on the host: no room
    assert in_memory.choose("auto", recs, SPEC) == "on"  # evaluation holds the decoded files alone
