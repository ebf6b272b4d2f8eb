"""The in-memory training set: every clip decoded once, and each batch cut on the training device (Sec. 5.1).

For a set that fits (the synthetic one: 1000 clips are a few hundred MB of uint8 frames), a loader that
cuts every clip on the CPU is machinery for sets that do not. Here the decoded frames of all N videos sit
in one padded uint8 table, and every sound (the videos' own and the injected ones) as its mel power
spectrogram, computed once (augment.MelPower), in RAM or in the GPU's memory. A step's batch is
drawn on the host and cut on the device:

    the draws    each item's start, replacement-audio start (on the spectrogram's hop grid), volume, crop
                 and flip, taken from the item's seeded generator by data.AVDataset.cut, the same code in the
                 same order as a loader's item (so resumed runs, ranks and worker counts see the same clips);
    the cut      frames (B, T, H, W, 3) gathered from the table by index, cropped and flipped per clip
                 (augment.py); mel power (B, n_mels, n_time) gathered as windows of n_time frames of
                 the sound's, times the volume squared (power goes as amplitude squared).

On the CPU the frames equal the loader's from the same decoded memory bit for bit (on a GPU the resize
runs there, through float32, and may round differently: within one uint8 level, a bound tested only where
CUDA exists). A loader reading the files (--preload off) takes each frame at the clip's own start time and
resamples each sound window, where memory holds frames on the 1/fps grid from 0 and whole sounds: the same
draws, equal where both decode the same instants, else up to a frame's shift and the resampler's edges (so
a resume refuses a changed path, config.NOT_RESUMABLE). The log-mel
(augment.ClipAugment) is the loader path's math, the log of the mel power of the volume-scaled
window, but for two things: the window starts on the hop grid (moved by at most half a hop, 12.5 ms at
the paper's rate; the loader's items start there too, data.AVDataset.cut), and the edge frames. A frame
spans two hops around its centre: the loader's clip frame 0 (and frame n_time-1 where n_time * hop >
the window's samples, as at 11025 Hz with 80 steps) reaches past the clip and is reflect-padded there,
where here it sees the sound's own samples (both pad alike at a sound's start). Every other frame equals
the loader's to rounding (tests/test_in_memory.py). data.train_loader picks this path, or the loader, by
the set's decoded size.

    python train.py --preset demo --preload on      # forces this path; --preload off, the DataLoader's

Preloading (data.AVDataset(preload=True), `hold` below): every file decoded once, whole, frames at the clip's fps
and audio at its rate, kept per (file, part, its settings) for the life of the process, so training and then
evaluation in one process decode once. With a cache folder (`train.py --preload-cache DIR`) each decoded part is
also written there, one small file per part, and the other processes of a run read it instead of decoding: the
warm-up's ranks share the work, and the branches and their evaluations that follow decode nothing. A cached part
is keyed by the file's path, size and modification time, so a regenerated set is decoded afresh. Files are decoded
in threads: FFmpeg releases the GIL, and the tensors stay in this process. Tests: tests/test_in_memory.py,
tests/test_preload.py
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
    """A preloaded data.AVDataset (train=True) as device tensors; `batch(keys)` cuts the clips of a list
    of (index, seed) keys. Raises ValueError where the videos' frame sizes differ (one table cannot hold
    them: the loader then cuts from the same memory)."""

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
        """Every sound's mel power spectrogram, once: (A, F, n_mels), a frame every hop. The sounds are
        zero-padded to one length, more than a window past the longest's end, so that a window past a
        sound's end reads the frames of silence, as a loader's zero-padded waveform gives."""
        width = max(len(wav) for wav in sounds) + self.n + 1
        sound = torch.zeros(len(sounds), width)  # (A, S)
        for k, wav in enumerate(sounds):
            sound[k, : len(wav)] = wav
        mel = [power(part.to(self.device)).transpose(1, 2) for part in sound.split(chunk)]  # [(<=chunk, F, n_mels)]
        return torch.cat(mel).contiguous()  # (A, F, n_mels): a clip's window is a run of rows

    def nbytes(self) -> int:
        return self.frames.nbytes + self.mel.nbytes

    def _look_up(self, path: str, start: float, audio_path: str | None, audio_start: float) -> tuple[Tensor, Any]:
        """AVDataset.cut's `read` here: no cut, only what the draws need (the frames' size, whether there is
        sound) and the error of a file that did not decode."""
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
            # AVDataset.cut put each start on the hop grid; past a sound's end its frames are silence
            first = [min(round(spec.first_sample(d["audio_start"]) / spec.hop), f - steps) for d in items]
            t = torch.tensor(rows)[:, None] * f + torch.tensor(first)[:, None] + torch.arange(steps)  # (B, n_time)
            mel = self.mel.flatten(0, 1).index_select(0, t.flatten().to(dev)).view(len(items), steps, bands)
            volume = torch.tensor([d["volume"] for d in items], dtype=torch.float32).to(dev)  # (B,)
            # power goes as the amplitude squared: the volume's change, applied to the waveform before
            batch["mel"] = (mel * volume.square()[:, None, None]).transpose(1, 2).contiguous()  # (B, n_mels, n_time)
        return batch


class InMemoryLoader:
    """What train.py iterates in place of a DataLoader: batches of `batch_size` (index, seed) keys from a
    data.SeededSampler, cut by InMemoryClips; the last incomplete batch is dropped, as the loader's."""

    def __init__(self, clips: InMemoryClips, sampler: torch.utils.data.Sampler, batch_size: int) -> None:
        self.clips, self.sampler, self.batch_size = clips, sampler, batch_size

    def __len__(self) -> int:
        return len(self.sampler) // self.batch_size

    def __iter__(self) -> Iterator[dict[str, Tensor]]:
        keys = iter(self.sampler)
        while len(chunk := list(itertools.islice(keys, self.batch_size))) == self.batch_size:
            yield self.clips.batch(chunk)


def decoded_bytes(records: list, spec: Any, probe: str | None = None) -> tuple[int, int]:
    """What preloading `records` holds, from the manifest's durations and one file's frame size: (the
    decoded files, uint8 frames at spec.fps and float32 sound at spec.audio_rate, each its own length;
    InMemoryClips' tables, every video padded to the longest and every sound's mel power likewise). Sounds: a video's
    own and at most one injected one each, as long as the longest."""
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
    """Memory free for the set: the GPU's where it trains on one, else the host's (MemAvailable), shared
    by the processes torchrun starts on this node."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            free = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration):
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return free // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def choose(preload: Any, records: list, spec: Any, device: torch.device | None = None) -> str:
    """--preload as it applies: on or off as given (or a Config's older True / False); auto is on when what
    it holds fits in half the free memory of each place. Evaluation (no device) holds the decoded files on
    the host; training also InMemoryClips' tables on `device`: on the CPU both sit in the host's memory."""
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
    """--preload as this run applies it: on or off as given; auto, the path of the checkpoint a resume restores
    (checkpoint.NOT_RESUMABLE: a resume keeps it, whatever memory is free now), else rank 0's answer for its
    memory, on every rank."""
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


def preloads(preload: Any, records: list, spec: Any, device: torch.device | None = None) -> bool:
    """Whether --preload `preload` holds `records` decoded: choose's answer as data.AVDataset's preload flag."""
    return choose(preload, records, spec, device) == "on"


# ----------------------------------------------------------------------------- preloading: whole files decoded once

_PRELOADED = {}  # (path, part, settings) -> the part: frames (T, H, W, 3) uint8, audio (samples,), or None


def _keys(path: str, spec: ClipSpec, video: bool) -> dict[str, tuple]:
    """The parts a preload of `path` needs, each with the settings its decode depends on."""
    keys = {"frames": (str(path), "frames", spec.fps, spec.frames)} if video else {}
    if spec.audio_seconds:
        keys["audio"] = (str(path), "audio", spec.audio_rate)
    return keys


def _cache_file(cache: str, key: tuple) -> Path:
    st = os.stat(key[0])
    digest = hashlib.sha1(repr((os.path.abspath(key[0]), st.st_size, st.st_mtime_ns, *key[1:])).encode())
    return Path(cache) / f"{digest.hexdigest()}.pt"


def _decode_all(path: str, spec: ClipSpec, video: bool = True, cache: str = "") -> tuple[Any, torch.Tensor | None]:
    """(frames at spec.fps for the whole video or None, whole audio at spec.audio_rate or None); the
    exception instead of the frames when the file does not decode. Parts come from this process's
    memory, else from the cache folder, else from the file (and then go to both)."""
    keys = _keys(path, spec, video)
    for key in keys.values():
        if key not in _PRELOADED and cache:
            try:
                _PRELOADED[key] = torch.load(_cache_file(cache, key), weights_only=True)["part"]
            except (OSError, EOFError, RuntimeError, KeyError):  # not there yet, or unreadable: decode it
                pass
    missing = [part for part, key in keys.items() if key not in _PRELOADED]
    if missing:
        got = _decode_whole_file(path, spec, "frames" in missing, "audio" in missing)
        if isinstance(got[0], Exception):
            return got
        for part, value in zip(("frames", "audio"), got):
            if part in missing:
                _PRELOADED[keys[part]] = value
                if cache:
                    _write_atomically(_cache_file(cache, keys[part]), value)
    return (_PRELOADED[keys["frames"]] if video else None), _PRELOADED.get(keys.get("audio"))


def _write_atomically(path: Path, value: torch.Tensor | None) -> None:
    """Another process may read or write the same part at the same time: it sees the whole file or none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save({"part": value}, f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def hold(videos: list[str], sounds: list[str], spec: ClipSpec, cache: str = "") -> dict[str, tuple[Any, Any]]:
    """{path: (frames, sound)} for every video, and {path: (None, sound)} for every other sound (an
    injected one; a sound lent by a training video is held with its frames); a file that does not decode
    holds (its error, None)."""
    held = set(videos)
    sounds = list(dict.fromkeys(p for p in sounds if p not in held))
    return dict(zip(videos + sounds, decode_many(videos, spec, True, cache) + decode_many(sounds, spec, False, cache)))


def decode_many(
    paths: list[str], spec: ClipSpec, video: bool, cache: str = ""
) -> list[tuple[Any, torch.Tensor | None]]:
    """_decode_all for many files, in threads over the cores torch may use: FFmpeg decodes with the
    GIL released (the same CPU time, less wall time), and the results stay in this process, so no
    tensors are pickled back as they would be from a process pool. With a cache, rank r of a DDP run
    starts its walk r/world of the way down the list, so the ranks decode different files first and
    read the ones the others have cached by the time they get there."""
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    shift = len(paths) * rank // world if cache else 0
    order = paths[shift:] + paths[:shift]
    threads = max(1, min(torch.get_num_threads(), len(paths)))
    if threads == 1:
        done = [_decode_all(p, spec, video, cache) for p in order]
    else:
        with ThreadPoolExecutor(threads) as pool:
            done = list(pool.map(lambda p: _decode_all(p, spec, video, cache), order))
    return done[len(paths) - shift :] + done[: len(paths) - shift]


def _decode_whole_file(path: str, spec: ClipSpec, video: bool, audio: bool = True) -> tuple[Any, torch.Tensor | None]:
    try:
        with decode.open_media(path) as c:
            frames = None
            if video:
                vs = c.streams.video[0]
                frames = decode.decode_frames(
                    c, 0.0, max(spec.frames, int(manifest.stream_duration(c, vs) * spec.fps)), spec.fps
                )
            wav = None
            if audio and spec.audio_seconds and c.streams.audio:
                wav = decode.decode_audio(c, 0.0, manifest.stream_duration(c, c.streams.audio[0]), spec.audio_rate)
            return frames, wav
    except (av.FFmpegError, RuntimeError, IndexError) as err:
        return err, None
