"""Audio-visual clips from video files: the dataset, its injected faults and its loaders (paper Sec. 5.1-5.2).

A training item is T=8 frames at 16 fps from a random start (temporal jitter), one multi-scale crop and flip for
every frame (augment.TrainCrop, on uint8), and the 2 s mono audio window around the clip (11025 Hz; 24 kHz in
Sec. 6) with its volume changed by up to 20%; an evaluation item is 10 clips evenly spaced over the video, centre
crop. Colour, blur, normalisation and the log-mel run later, on the device in batches (augment.ClipAugment).

Faulty positives are injected as in Sec. 5.2 (--faulty-fraction): a fixed, seeded share of the instances gets "a
randomly selected audio that is not part of the training set", a file of a pool outside both splits, each used once.
Deviation: --faulty-source train lends another training video's audio instead; that sound then sits in two bank
slots, and xID scores the lender almost like a faulty positive (tests/test_injection.py).

build_train_set and train_loader make train.py's set and batches (a set that fits is cut in batches from memory,
media/in_memory.py; any other by a DataLoader's workers), eval_set evaluation's (its splits: evaluate.resolve). The
files are the scan's manifest's (python -m tools.scan ROOT; media/manifest.py reads it), decoded by media/decode.py.
Tests: test_data.py, test_injection.py, test_in_memory.py, test_devices.py"""

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import av
import numpy as np
import torch
from torch import Tensor

from augment import ClipSpec, clip_spec, video_transform
from config import PRESETS, Config, shown
from media import in_memory, manifest
from media.decode import read_clip
from media.manifest import Record

# What reading a broken file raises: FFmpeg's errors, the decoders' own (no frame, no audio), a short read
DECODE_ERRORS = (av.FFmpegError, RuntimeError, ValueError, OSError, IndexError)
INJECTION_STREAM = 1_000_000_007  # seed offset of the injection draw; no run has that many epochs


def uniform(g: torch.Generator | None, scale: float, shift: float = 0.0) -> float:
    """shift + scale * torch.rand((), generator=g), rounded as that float32 tensor arithmetic rounds it."""
    return float(np.float32(shift) + np.float32(scale) * np.float32(torch.rand((), generator=g).item()))


# ----------------------------------------------------------------------------- dataset


class BadMedia(RuntimeError):
    """A file that fails to decode: the run stops with its name (the scan is where files are refused)."""


class AVDataset(torch.utils.data.Dataset):
    """Items are dicts: video (3, T, H, W) uint8 (eval: (clips, 3, T, H, W)), audio (n,) waveform (eval:
    (clips, n); absent without audio), index (the memory-bank slot), label, faulty.

    faulty_fraction p gives a fixed, seeded p-share of the instances another audio (Sec. 5.2): a distinct file of
    `pool`, (path, seconds) outside the training set (faulty_source "heldout", the paper's, or "noise"), or another
    record's ("train", a deviation). `injected` flags them, `donor` maps each to its audio; `faulty` is `injected`
    or the record's ground truth. preload=True holds every file decoded (media/in_memory.py)."""

    def __init__(
        self,
        records: Sequence[Record],
        spec: ClipSpec = ClipSpec(),
        train: bool = True,
        audio: bool = True,
        num_clips: int = 10,
        faulty_fraction: float = 0.0,
        faulty_source: str = "heldout",
        pool: Sequence[tuple[str, float]] = (),
        seed: int = 0,
        preload: bool = False,
        preload_cache: str = "",
    ) -> None:
        if not records:
            raise ValueError("AVDataset: no usable videos (check the root, the split and the manifest)")
        if not isinstance(preload, bool):  # a --preload mode: bool("off") is True; in_memory.choose resolves it
            raise TypeError(f"AVDataset(preload={preload!r}): expected True or False")
        self.records, self.train, self.num_clips = list(records), train, num_clips
        self.spec = spec if audio else ClipSpec(**{**spec.__dict__, "audio_seconds": 0.0})
        self.transform = video_transform(spec.size, train, spec.augment)
        n = len(self.records)
        self.injected = torch.zeros(n, dtype=torch.bool)
        self.donor = {}  # instance -> (path, seconds) of the audio that replaces its own
        if faulty_fraction > 0:
            self.inject(faulty_fraction, faulty_source, pool, seed)
        self.faulty = self.injected | torch.tensor([r.faulty for r in self.records])
        self.memory = None  # path -> (frames, sound), or (the error, None) for a file that did not decode
        if preload:
            sounds = [p for p, _ in self.donor.values()]
            self.memory = in_memory.hold([r.path for r in self.records], sounds, self.spec, preload_cache)

    def inject(self, faulty_fraction: float, faulty_source: str, pool: Sequence[tuple[str, float]], seed: int) -> None:
        """Draw the injected instances and their replacement audio (sets `injected` and `donor`)."""
        n = len(self.records)
        # A stream of its own: the DistributedSampler shuffles with torch.randperm seeded by seed + epoch, and this draw
        # seeded with `seed` made epoch 0 visit the injected videos first (eq. (5)'s batch mean then weighs nothing)
        g = torch.Generator().manual_seed(INJECTION_STREAM + seed)
        self.injected[torch.randperm(n, generator=g)[: int(round(faulty_fraction * n))]] = True
        chosen = self.injected.nonzero().flatten().tolist()
        if faulty_source in ("heldout", "noise"):  # config.FAULTY_SOURCES: a pool outside both splits
            if len(pool) < len(chosen):  # reuse would put one sound in several bank slots, as "train" does
                raise ValueError(
                    f"the faulty-positive pool holds {len(pool)} audio files, but faulty_fraction="
                    f"{faulty_fraction} injects {len(chosen)} of {n} instances and each needs a "
                    f"file of its own: add files to the pool or lower --faulty-fraction"
                )
            picks = torch.randperm(len(pool), generator=g)[: len(chosen)].tolist()  # without replacement
            self.donor = {i: tuple(pool[k]) for i, k in zip(chosen, picks)}
        elif faulty_source == "train":
            if n < 2:
                raise ValueError("faulty_source='train' needs at least 2 videos to lend audio between")
            for i in chosen:  # uniform over the other n-1 videos, never itself
                j = int(torch.randint(0, n - 1, (), generator=g))
                self.donor[i] = (self.records[j + (j >= i)].path, self.records[j + (j >= i)].audio_duration)
        else:
            raise ValueError(f"faulty_source {faulty_source!r}: expected 'heldout', 'noise' (pools) or 'train'")

    def read(
        self, path: str, start: float, audio_path: str | None = None, audio_start: float | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """read_clip, or the same cut from memory when preloaded."""
        if self.memory is None:
            return read_clip(path, start, self.spec, audio_path, audio_start)
        frames, wav = self.held(path, audio_path)
        j = self.spec.first_frame(start, len(frames))
        clip = frames[j : j + self.spec.frames]  # (T, H, W, 3)
        clip = torch.cat([clip, clip[-1:].expand(self.spec.frames - len(clip), -1, -1, -1)])
        if wav is None:
            return clip, None
        n, k = self.spec.samples, self.spec.first_sample(audio_start)
        wav = wav[k : k + n]
        return clip, torch.nn.functional.pad(wav, (0, n - len(wav)))

    def held(self, path: str, audio_path: str | None = None) -> tuple[Tensor, Tensor | None]:
        """A preloaded video's frames (F, H, W, 3) and the sound its clips take, its own or `audio_path`'s
        (None without audio in the spec); raises what a file's decode raised."""
        frames, wav = self.memory[path]
        if isinstance(frames, Exception):
            raise frames
        if not self.spec.audio_seconds:
            return frames, None
        failed, wav = self.memory[audio_path] if audio_path else (frames, wav)
        if wav is None:
            raise failed if isinstance(failed, Exception) else ValueError(f"no audio in {audio_path or path}")
        return frames, wav

    def __len__(self) -> int:
        return len(self.records)

    def instances(self) -> dict[str, Any]:
        """The per-slot facts a checkpoint keeps (checkpoint.py)."""
        return {
            "paths": [r.path for r in self.records],
            "labels": self.labels,
            "faulty": self.faulty,
            "injected": self.injected,
            "classes": list(getattr(self, "classes", [])),
            "replacement_audio": [self.donor.get(i, ("",))[0] for i in range(len(self))],
        }

    @property
    def labels(self) -> Tensor:
        return torch.tensor([r.label for r in self.records])

    def clip_starts(self, rec: Record, g: torch.Generator | None = None) -> list[float]:
        room = max(0.0, rec.duration - self.spec.seconds)
        if self.train:
            return [uniform(g, room)]
        return list(np.linspace(0, room, self.num_clips))

    def audio_around(self, start: float, audio_len: float) -> float:
        """Where the audio window around a clip starting at `start` begins, kept inside a sound of audio_len s."""
        centre = start + self.spec.seconds / 2
        return min(max(0.0, centre - self.spec.audio_seconds / 2), max(0.0, audio_len - self.spec.audio_seconds))

    def cut(self, i: int, read: Callable[..., tuple[Any, Any]], g: torch.Generator) -> tuple[Any, Any, dict[str, Any]]:
        """Instance i's training clip: (frames, waveform or None) as read(path, start, audio_path, audio_start)
        gives them, and the draws, from g in the one order both paths take (start, the replacement audio's start,
        on the hop grid, [the read], volume, crop, flip); media/in_memory.py's `read` cuts nothing."""
        rec = self.records[i]
        start = self.clip_starts(rec, g)[0]
        audio_path, audio_len = self.donor.get(i, (None, rec.audio_duration))
        audio_start = self.audio_around(start, audio_len)
        if audio_path is not None:  # the replacement audio comes from anywhere in its file
            audio_start = uniform(g, max(0.0, audio_len - self.spec.audio_seconds))
        audio_start = self.spec.on_hop_grid(audio_start)  # a frame of the sound's spectrogram starts there
        frames, wav = read(rec.path, start, audio_path, audio_start)
        volume = uniform(g, 0.4, 0.8) if wav is not None else None  # x U(0.8, 1.2)
        box, flip = self.transform.draw(frames.shape[1], frames.shape[2], g)
        draws = dict(start=start, audio_path=audio_path, audio_start=audio_start, volume=volume, box=box, flip=flip)
        return frames, wav, draws

    def load(self, i: int, g: torch.Generator | None = None) -> dict[str, Any]:
        rec = self.records[i]
        item = {"index": i, "label": rec.label, "faulty": bool(self.faulty[i])}
        if self.train:  # one clip, (3, T, H, W) and (n,), not copied into a stack of one
            frames, wav, d = self.cut(i, self.read, g)
            item["video"] = self.transform.apply(frames, d["box"], d["flip"])
            if wav is not None:
                item["audio"] = wav * d["volume"]
            return item
        clips = []
        audio_path, audio_len = self.donor.get(i, (None, rec.audio_duration))
        for start in self.clip_starts(rec):  # evaluation: evenly spaced clips, the audio around each
            frames, wav = self.read(rec.path, start, audio_path, self.audio_around(start, audio_len))
            clips.append((self.transform(frames), wav))
        item["video"] = torch.stack([c[0] for c in clips])  # (clips, 3, T, H, W)
        if clips[0][1] is not None:
            item["audio"] = torch.stack([c[1] for c in clips])  # (clips, n)
        return item

    def __getitem__(self, key: int | tuple[int, int]) -> dict[str, Any]:
        return self.seeded(key)

    def seeded(self, key: int | tuple[int, int], make: Callable | None = None) -> dict[str, Any]:
        """make(i, g) (load, or the in-memory set's draws alone) for key, an index (numpy's from a Subset too: the
        global generator draws) or (index, seed) from SeededSampler: the draws then depend on the seed alone, not
        on which worker made the item or what it made before, from a generator seeded as the global one would be."""
        i, g = (key[0], torch.Generator().manual_seed(key[1])) if isinstance(key, tuple) else (int(key), None)
        try:
            return (make or self.load)(i, g)
        except DECODE_ERRORS as err:  # one line naming the file, not a decoder's traceback from a loader worker
            raise BadMedia(f"data: {self.records[i].path} failed to decode: {err}") from err


class SeededSampler(torch.utils.data.Sampler):
    """Wraps a sampler of indices (the DistributedSampler) to yield (index, seed), the seed a function of (seed,
    epoch, index): the same augmentations for any number of workers, persistent ones, and a resumed run."""

    def __init__(self, sampler: torch.utils.data.Sampler, seed: int = 0) -> None:
        self.sampler, self.seed, self.epoch = sampler, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        base = (self.seed * 1_000_003 + self.epoch) * 10_000_019
        return ((i, base + i) for i in self.sampler)

    def __len__(self) -> int:
        return len(self.sampler)


# ----------------------------------------------------------------------------- a run's datasets


def build_train_set(cfg: "Config", device: torch.device | None = None) -> AVDataset:
    """The pre-training instances (one bank slot each), faults injected; cfg.preload set to on or off."""
    if not Path(cfg.data).is_dir():
        name = Path(cfg.data).name
        make = (
            "make demo makes it (tools/synthetic.py generates it with its SETS options)"
            if name == Path(PRESETS["demo"]["data"]).name
            else "make demo makes it, or python -m tools.synthetic --out data/synth2000 --train-per-class 200"
            if name == "synth2000"
            else f"python -m tools.synthetic --out {cfg.data} makes a synthetic set"
            if name.startswith("synth")
            else "python -m tools.recorded --set drums makes it"
            if name == "drums"
            else 'README, "Real datasets", says how to lay one out'
        )
        raise SystemExit(f"train.py: dataset folder not found: {shown(cfg.data)} (--data). {make}")
    try:  # a split list, a manifest or a folder that holds nothing usable: one line, not a traceback
        records, classes = manifest.load_records(
            cfg.layout, cfg.data, cfg.split, cfg.fold, cfg.annotations or None, cfg.manifest or None, need_audio=True
        )
    except (FileNotFoundError, ValueError) as err:
        raise SystemExit(f"train.py: {err}") from None
    if cfg.num_negatives >= len(records):  # eq. (1)'s negatives are other instances: K >= N only repeats them
        raise SystemExit(
            f"train.py: --num-negatives {cfg.num_negatives}: expected fewer than the {len(records)} training "
            f"videos of {cfg.data} (at most {len(records) - 1})"
        )
    cfg.preload = in_memory.preload_path(cfg, records, clip_spec(cfg), device or torch.device("cpu"))
    pooled = cfg.faulty_fraction > 0 and cfg.faulty_source != "train"  # --faulty-source heldout or noise
    try:
        dataset = AVDataset(
            records,
            clip_spec(cfg),
            train=True,
            faulty_fraction=cfg.faulty_fraction,
            faulty_source=cfg.faulty_source,
            pool=injection_pool(cfg, records) if pooled else (),
            seed=cfg.injection_seed,
            preload=cfg.preload == "on",
            preload_cache=cfg.preload_cache,
        )
    except ValueError as err:  # e.g. a faulty-positive pool smaller than the share to inject
        raise SystemExit(f"train.py: {err}") from None
    dataset.classes = classes
    return dataset


def pool_folder(cfg: "Config") -> Path:
    """Where --faulty-source heldout or noise takes its sounds: --faulty-pool, else the synthetic set's."""
    if cfg.faulty_pool:
        return Path(cfg.faulty_pool)
    return Path(cfg.data) / ("_heldout" if cfg.faulty_source == "heldout" else "_pool")


def injection_pool(cfg: "Config", records: list[Record]) -> list[tuple[str, float]]:
    """Sec. 5.2's replacement audio as (path, seconds), from pool_folder; one holding a file of the training or the
    test split is refused: the paper's injected audio is "not part of the training set"."""
    root, folder = Path(cfg.data), pool_folder(cfg)
    if not folder.is_dir():
        raise SystemExit(
            f"--faulty-fraction {cfg.faulty_fraction} injects audio from outside the training set "
            f"(paper, Sec. 5.2), but the pool {shown(folder)} does not exist. Pass --faulty-pool DIR, a folder "
            f"of media in neither split (for example the videos left out of a Kinetics subset), or "
            f"regenerate the synthetic set (synthetic.py writes ROOT/_heldout); --faulty-source train "
            f"lends other training videos' audio instead (a deviation)"
        )
    try:
        test = manifest.list_split(cfg.layout, root, "test", cfg.fold, cfg.annotations or None)[0]
    except (FileNotFoundError, ValueError):  # a dataset without a test split: nothing there to leak into
        test = []
    in_splits = {Path(r.path).resolve() for r in records} | {(root / rel).resolve() for rel, _ in test}
    pool = manifest.audio_pool(folder)
    shared = [p for p, _ in pool if Path(p).resolve() in in_splits]
    if shared:
        raise SystemExit(
            f"--faulty-pool {folder}: {len(shared)} of its files are training or test videos "
            f"(first: {shared[0]}); injected audio must come from outside both splits"
        )
    return pool


def split_records(cfg: "Config", split: str, need_audio: bool = False) -> manifest.Split:
    """One split's usable videos and the listed ones that are not (UCF101/HMDB51 hold silent videos)."""
    return manifest.load_split(
        cfg.layout, cfg.data, split, cfg.fold, cfg.annotations or None, cfg.manifest or None, need_audio
    )


def eval_set(
    cfg: "Config",
    records: Sequence[Record],
    train_mode: bool = False,
    num_clips: int = 10,
    audio: bool = False,
    preload: bool | None = None,
) -> AVDataset:
    """The dataset of an evaluation split's `records` (evaluate.resolve's), video only unless `audio`; preload
    defaults to the config's --preload as it applies to these records."""
    spec = clip_spec(cfg, audio=audio)
    return AVDataset(
        list(records),
        spec,
        train=train_mode,
        audio=audio,
        num_clips=num_clips,
        preload=in_memory.choose(cfg.preload, records, spec) == "on" if preload is None else preload,
        preload_cache=cfg.preload_cache,
    )


# ----------------------------------------------------------------------------- loaders
PROCESSES = 1  # processes sharing the machine's cores where torchrun does not say (demo.py's branches side by side)
# The most loader workers a process gets by default: in lab/results/gpu.md's loader table (prepared files, an H200
# box with 16 cores), 16 workers delivered the most, 4998 clips/s, against 3036 at 8 and 1246 at 4.
BEST_WORKERS = 16


def workers_per_process(requested: int, cores: int | None = None, processes: int | None = None) -> int:
    """--workers as asked, or for a negative request (the default) the cores of the affinity mask over the
    processes sharing the machine (torchrun's LOCAL_WORLD_SIZE, else PROCESSES), at least 1, at most BEST_WORKERS."""
    if requested >= 0:
        return requested
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    env = os.environ
    processes = processes or (int(env["LOCAL_WORLD_SIZE"]) if "LOCAL_RANK" in env else PROCESSES)
    return max(1, min(BEST_WORKERS, cores // processes))


def worker_init(worker_id: int) -> None:
    torch.set_num_threads(1)  # a loader worker takes one core; the main process keeps the rest


def loader(
    dataset: torch.utils.data.Dataset,
    batch_size: int,
    workers: int,
    seed: int = 0,
    sampler: torch.utils.data.Sampler | None = None,
    drop_last: bool = False,
    pin_memory: bool = False,
    persistent: bool = False,
) -> torch.utils.data.DataLoader:
    """Every DataLoader of training and evaluation: workers of one thread, and a generator of its own (the
    workers' seeds), so that the loader leaves the global RNG alone."""
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=workers,
        drop_last=drop_last,
        pin_memory=pin_memory,
        persistent_workers=persistent and workers > 0,
        worker_init_fn=worker_init,
        generator=torch.Generator().manual_seed(seed),
    )


def train_loader(
    cfg: "Config", dataset: AVDataset, rank: int, world: int, device: torch.device
) -> tuple[SeededSampler, torch.utils.data.DataLoader]:
    """Pre-training's batches, shuffled per rank, each item's draws seeded by (seed, epoch, index): a preloaded
    set cut on `device` in batches (media/in_memory.py), any other by a DataLoader's workers. Rank 0 says which."""
    if cfg.batch_size % world:
        raise SystemExit(f"--batch-size {cfg.batch_size} is the global batch: it must divide by {world} processes")
    sampler = SeededSampler(
        torch.utils.data.DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=cfg.seed),
        seed=cfg.seed + 7919 * rank,
    )
    batches, how = None, "read from the files by a DataLoader (--preload off, or the set does not fit in memory)"
    if dataset.memory is not None:
        try:
            clips = in_memory.InMemoryClips(dataset, device)
            batches = in_memory.InMemoryLoader(clips, sampler, cfg.batch_size // world)
            how = f"in memory ({clips.nbytes() / 2**30:.2f} GiB on {device.type}), clips cut in batches there"
        except ValueError as err:
            how = f"preloaded, clips cut by a DataLoader ({err})"
    if rank == 0:
        print(f"train.py: data {how}")
    if batches is None:
        size, workers = cfg.batch_size // world, workers_per_process(cfg.workers)
        pin = device.type == "cuda"  # page-locked batches, copied to the GPU without a staging copy
        batches = loader(dataset, size, workers, cfg.seed, sampler, drop_last=True, pin_memory=pin, persistent=True)
    if len(batches) == 0:
        raise SystemExit(
            f"train.py: --batch-size {cfg.batch_size}: expected at most the {len(dataset)} training videos of "
            f"{cfg.data} (a step takes one batch, and the last, incomplete one is dropped)"
        )
    return sampler, batches
