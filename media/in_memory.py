"""The in-memory training set (--preload): every file decoded once, and each batch cut on the training device
(the clips of paper Sec. 5.1).

A set that fits (the synthetic one: 1000 clips are a few hundred MB of uint8 frames) needs no loader workers.
`hold` decodes every file whole, in threads (FFmpeg releases the GIL); InMemoryClips keeps the frames in one
padded (N, F, H, W, 3) uint8 table and every sound as its mel power (augment.MelPower), on the device. A batch's
draws are data.AVDataset.cut's, a loader item's code and order (so resumes, ranks and worker counts see the same
clips); on the CPU its frames are the loader's from the same memory bit for bit (a GPU resizes through float32:
within one uint8 level). Two deviations from a file read (--preload off), so a resume refuses a changed path
(checkpoint.NOT_RESUMABLE):
    frames on the grid    memory holds frames at k/fps from 0 and whole resampled sounds, where a file read
                          decodes at each clip's own start: up to a frame's shift, and the resampler's edges;
    edge frames           the spectrogram's first frame (and its last where n_time * hop exceeds the window)
                          sees the sound's own samples, where the loader's clip is reflect-padded.
--preload auto takes this path where the set fits in half the free memory (choose). With --preload-cache DIR each
decoded part is also kept there, keyed by the file's path, size and mtime: a run's other processes read it.

    python train.py --preset demo --preload on      # --preload off: the DataLoader's path

Tests: tests/test_in_memory.py, tests/test_preload.py
"""

import hashlib
import itertools
import os
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import av
import torch
import torch.distributed as dist
from torch import Tensor

import checkpoint
from augment import ClipSpec, MelPower
from config import Config
from media import decode, manifest


class InMemoryClips:
    """A preloaded training data.AVDataset as device tables; `batch(keys)` cuts the clips of (index, seed) keys.
    Raises ValueError where the videos' frame sizes differ (one table cannot hold them: a loader cuts instead)."""

    def __init__(self, dataset: torch.utils.data.Dataset, device: torch.device) -> None:  # a data.AVDataset
        if dataset.memory is None or not dataset.train:
            raise ValueError("InMemoryClips needs a preloaded training set (AVDataset(preload=True, train=True))")
        self.dataset, self.device, spec = dataset, device, dataset.spec
        frames = [dataset.memory[r.path][0] for r in dataset.records]
        good = [f for f in frames if not isinstance(f, Exception)]
        sizes = {tuple(f.shape[1:]) for f in good}
        if len(sizes) != 1:
            raise ValueError(f"the videos' frames have {len(sizes)} sizes, not one")
        (h, w, c), longest = sizes.pop(), max(len(f) for f in good)
        self.frames = torch.zeros(len(frames), longest, h, w, c, dtype=torch.uint8)  # (N, F, H, W, 3)
        self.lengths = torch.ones(len(frames), dtype=torch.long)  # (N,): a failed file keeps one blank frame
        for i, f in enumerate(frames):
            if not isinstance(f, Exception):
                self.frames[i, : len(f)], self.lengths[i] = f, len(f)
        self.frames = self.frames.to(device)
        self.n, self.mel = spec.samples, torch.zeros(0, 0, spec.n_mels, device=device)
        sounds = [p for p, (f, wav) in dataset.memory.items() if wav is not None and not isinstance(f, Exception)]
        self.row = {p: k for k, p in enumerate(sounds)}  # path -> row of the sound table
        if self.n and sounds:
            self.mel = self._spectrograms([dataset.memory[p][1] for p in sounds], MelPower(spec).to(device))

    def _spectrograms(self, sounds: list[Tensor], power: MelPower, chunk: int = 64) -> Tensor:
        """Every sound's mel power, a frame every hop: (A, F, n_mels). The sounds are zero-padded past the
        longest's end by more than a window, so a window past a sound's end reads the frames of silence, as a
        loader's zero-padded waveform gives."""
        width = max(len(wav) for wav in sounds) + self.n + 1
        sound = torch.zeros(len(sounds), width)  # (A, S)
        for k, wav in enumerate(sounds):
            sound[k, : len(wav)] = wav
        mel = [power(part.to(self.device)).transpose(1, 2) for part in sound.split(chunk)]  # [(<=chunk, F, n_mels)]
        return torch.cat(mel).contiguous()  # (A, F, n_mels): a clip's window is a run of rows

    def nbytes(self) -> int:
        return self.frames.nbytes + self.mel.nbytes

    def _look_up(self, path: str, start: float, audio_path: str | None, audio_start: float) -> tuple[Tensor, Any]:
        """AVDataset.cut's `read`, cutting nothing: the draws need only the frames' size and the sound."""
        return self.dataset.held(path, audio_path)

    def _draw(self, i: int, g: torch.Generator) -> dict[str, Any]:
        return {"index": i, **self.dataset.cut(i, self._look_up, g)[2]}

    def batch(self, keys: list[tuple[int, int]]) -> dict[str, Tensor]:
        """keys: (index, seed) pairs (data.SeededSampler's) -> the batch a DataLoader of the same dataset
        collates: video (B, 3, T, S, S) uint8, mel power (B, n_mels, n_time) and index (B,), on the device."""
        spec, dev = self.dataset.spec, self.device
        items = [self.dataset.seeded(key, make=self._draw) for key in keys]  # the draws, on the host
        idx = torch.tensor([d["index"] for d in items])  # (B,)
        first = [spec.first_frame(d["start"], int(self.lengths[i])) for d, i in zip(items, idx.tolist())]  # (B,)
        t = torch.tensor(first)[:, None] + torch.arange(spec.frames)  # (B, T)
        t = torch.minimum(t, self.lengths[idx, None] - 1)  # (B, T): a short video repeats its last frame
        rows = (idx[:, None] * self.frames.shape[1] + t).flatten()  # (B*T,) rows of the (N*F, H*W*3) table
        clips = self.frames.flatten(0, 1).index_select(0, rows.to(dev)).view(len(idx), -1, *self.frames.shape[2:])
        # (B, T, H, W, 3) -> (B, 3, T, S, S): each clip cropped and flipped as its item drew
        video = self.dataset.transform.apply_many(clips, [d["box"] for d in items], [d["flip"] for d in items])
        batch = {"video": video, "index": idx.to(dev)}
        if self.n:
            (f, bands), steps = self.mel.shape[1:], spec.n_time
            rows = [self.row[d["audio_path"] or self.dataset.records[d["index"]].path] for d in items]
            # each start is on the hop grid (AVDataset.cut); past a sound's end its frames are silence
            first = [min(round(spec.first_sample(d["audio_start"]) / spec.hop), f - steps) for d in items]
            t = torch.tensor(rows)[:, None] * f + torch.tensor(first)[:, None] + torch.arange(steps)  # (B, n_time)
            mel = self.mel.flatten(0, 1).index_select(0, t.flatten().to(dev)).view(len(items), steps, bands)
            volume = torch.tensor([d["volume"] for d in items], dtype=torch.float32).to(dev)  # (B,)
            # power goes as the amplitude squared: the loader scales the waveform by the volume
            batch["mel"] = (mel * volume.square()[:, None, None]).transpose(1, 2).contiguous()  # (B, n_mels, n_time)
        return batch


class InMemoryLoader:
    """What train.py iterates in place of a DataLoader: InMemoryClips' batches of `batch_size` keys from a
    data.SeededSampler, the last incomplete one dropped, as the loader drops it."""

    def __init__(self, clips: InMemoryClips, sampler: torch.utils.data.Sampler, batch_size: int) -> None:
        self.clips, self.sampler, self.batch_size = clips, sampler, batch_size

    def __len__(self) -> int:
        return len(self.sampler) // self.batch_size

    def __iter__(self) -> Iterator[dict[str, Tensor]]:
        keys = iter(self.sampler)
        while len(chunk := list(itertools.islice(keys, self.batch_size))) == self.batch_size:
            yield self.clips.batch(chunk)


# ----------------------------------------------------------------------------- whether to preload
def decoded_bytes(records: list, spec: Any, probe: str | None = None) -> tuple[int, int]:
    """What preloading `records` holds, from the manifest's durations and one file's frame size: (the decoded
    files, InMemoryClips' tables: every video padded to the longest, and a video's own sound and at most one
    injected one each, as long as the longest)."""
    if not records:
        return 0, 0
    with decode.open_media(probe or records[0].path) as c:
        v = c.streams.video[0].codec_context
        pixels = v.width * v.height * 3
    frames = [max(spec.frames, int(r.duration * spec.fps) + 1) for r in records]
    seconds = [r.audio_duration or r.duration for r in records] if spec.audio_seconds else []
    decoded = sum(frames) * pixels + 2 * int(sum(seconds) * spec.audio_rate) * 4
    width = int(max(seconds, default=0) * spec.audio_rate) + spec.samples + 1  # InMemoryClips' zeros past the end
    mel = (width // spec.hop + 1) * spec.n_mels * 4 if seconds and spec.hop else 0  # a sound's mel power row
    table = len(records) * max(frames) * pixels + 2 * len(records) * mel
    return decoded, table


def free_bytes(device: torch.device) -> int:
    """Memory free for the set, the GPU's or the host's (MemAvailable), shared by the processes on this node."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            free = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration):
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return free // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def choose(preload: Any, records: list, spec: Any, device: torch.device | None = None) -> str:
    """--preload as it applies, "on" or "off" (an older Config's True / False too): auto is on where what it
    holds fits in half the free memory of each place. Evaluation (no device) holds the decoded files on the
    host; training also the tables on `device` (on the CPU, both in the host's memory)."""
    mode = {True: "on", False: "off"}.get(preload, preload)
    if mode != "auto":
        return mode
    decoded, table = decoded_bytes(list(records), spec)
    cpu = torch.device("cpu")
    if device is None:  # evaluation: the decoded files alone
        need = {cpu: decoded}
    elif device.type == "cuda":  # the tables go to the GPU
        need = {cpu: decoded, device: table}
    else:  # the decoded files stay alive beside the tables (AVDataset.held reads them)
        need = {cpu: decoded + table}
    return "on" if all(n <= free_bytes(d) // 2 for d, n in need.items()) else "off"


def preload_path(cfg: Config, records: list, spec: Any, device: torch.device) -> str:
    """choose's answer for a training run. For auto: the path of the checkpoint a resume restores (a resume
    keeps it, whatever memory is free now), else rank 0's answer, on every rank."""
    if cfg.preload != "auto":
        return choose(cfg.preload, records, spec, device)
    saved, ckpt = None, Path(cfg.out) / "ckpt.pt"
    for path in (ckpt, checkpoint.previous(ckpt)) if ckpt.exists() else ():
        try:  # as the restore reads it: ckpt.pt, or ckpt.pt.prev where it cannot be read
            saved = checkpoint.load_checkpoint(path, mmap=True)["config"].get("preload")
            break
        except checkpoint.CheckpointError:
            continue
        except (OSError, ValueError):  # no checkpoint before it, or not train.py's: the restore says so
            break
    saved = {True: "on", False: "off"}.get(saved, saved)
    if saved in ("on", "off"):
        return saved
    rank0 = not dist.is_initialized() or dist.get_rank() == 0
    choice = [choose("auto", records, spec, device) if rank0 else None]
    if dist.is_initialized():
        dist.broadcast_object_list(choice, src=0)
    return choice[0]


# ----------------------------------------------------------------------------- preloading: whole files decoded once
_PRELOADED = {}  # (path, part, settings) -> the part: frames (F, H, W, 3) uint8, audio (samples,), or None


def hold(videos: list[str], sounds: list[str], spec: ClipSpec, cache: str = "") -> dict[str, tuple[Any, Any]]:
    """{path: (frames, sound)} for every video and {path: (None, sound)} for every other sound (an injected one),
    (its error, None) for a file that does not decode. Decoded in threads over the cores torch may use, so that
    nothing is pickled back as from processes. With a cache, rank r of a DDP run starts r/world of the way down
    the list: the ranks decode different files first, and read the others' from the cache."""
    held = set(videos)
    jobs = [(p, True) for p in videos] + [(p, False) for p in dict.fromkeys(sounds) if p not in held]
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    shift = len(jobs) * rank // world if cache else 0
    with ThreadPoolExecutor(max(1, min(torch.get_num_threads(), len(jobs)))) as pool:
        done = list(pool.map(lambda job: _decode_all(job[0], spec, job[1], cache), jobs[shift:] + jobs[:shift]))
    done = done[len(jobs) - shift :] + done[: len(jobs) - shift]  # (path, video) order again
    return {path: parts for (path, _), parts in zip(jobs, done)}


def _decode_all(path: str, spec: ClipSpec, video: bool = True, cache: str = "") -> tuple[Any, Tensor | None]:
    """(the whole video's frames at spec.fps or None, its whole audio at spec.audio_rate or None), or (the error,
    None). Each part comes from this process's memory, else the cache folder, else the file (then kept in both)."""
    keys = {"frames": (str(path), "frames", spec.fps, spec.frames)} if video else {}
    if spec.audio_seconds:
        keys["audio"] = (str(path), "audio", spec.audio_rate)
    for key in keys.values():
        if key not in _PRELOADED and cache:
            try:
                _PRELOADED[key] = torch.load(_cache_file(cache, key), weights_only=True)["part"]
            except (OSError, EOFError, RuntimeError, KeyError):  # not there yet, or unreadable: decode it
                pass
    missing = {part: key for part, key in keys.items() if key not in _PRELOADED}
    if missing:
        try:
            with decode.open_media(path) as c:
                got = {}
                if "frames" in missing:
                    n = max(spec.frames, int(manifest.stream_duration(c, c.streams.video[0]) * spec.fps))
                    got["frames"] = decode.decode_frames(c, 0.0, n, spec.fps)
                if "audio" in missing and c.streams.audio:
                    seconds = manifest.stream_duration(c, c.streams.audio[0])
                    got["audio"] = decode.decode_audio(c, 0.0, seconds, spec.audio_rate)
        except (av.FFmpegError, RuntimeError, IndexError) as err:
            return err, None
        for part, key in missing.items():
            _PRELOADED[key] = got.get(part)  # None: a file without an audio stream
            if cache:
                _write_atomically(_cache_file(cache, key), _PRELOADED[key])
    return (_PRELOADED[keys["frames"]] if video else None), _PRELOADED.get(keys.get("audio"))


def _cache_file(cache: str, key: tuple) -> Path:
    st = os.stat(key[0])
    digest = hashlib.sha1(repr((os.path.abspath(key[0]), st.st_size, st.st_mtime_ns, *key[1:])).encode())
    return Path(cache) / f"{digest.hexdigest()}.pt"


def _write_atomically(path: Path, value: Tensor | None) -> None:
    """Another process may read or write the same part at once: it sees the whole file or none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save({"part": value}, f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
