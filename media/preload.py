"""Preloading a small dataset: every file decoded once, whole, into memory (data.AVDataset(preload=True)).

Frames at the clip's fps and audio at its rate, kept per (file, part, its settings) for the life of the
process, so training and then evaluation in one process decode once. With a cache folder
(`train.py --preload-cache DIR`), each decoded part is also written there, one small file per part,
and the other processes of a run read it instead of decoding: the warm-up's ranks share the work,
and the branches and their evaluations that follow decode nothing. A cached part is keyed by the
file's path, size and modification time, so a regenerated set is decoded afresh. Files are decoded
in threads: FFmpeg releases the GIL, and the tensors stay in this process. Tests: tests/test_data.py
"""

import hashlib
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import av
import torch
import torch.distributed as dist

from media import decode, manifest

if TYPE_CHECKING:  # for annotations only
    from augment import ClipSpec

_PRELOADED = {}  # (path, part, settings) -> the part: frames (T, H, W, 3) uint8, audio (samples,), or None


def _keys(path: str, spec: "ClipSpec", video: bool) -> dict[str, tuple]:
    """The parts a preload of `path` needs, each with the settings its decode depends on."""
    keys = {"frames": (str(path), "frames", spec.fps, spec.frames)} if video else {}
    if spec.audio_seconds:
        keys["audio"] = (str(path), "audio", spec.audio_rate)
    return keys


def _cache_file(cache: str, key: tuple) -> Path:
    st = os.stat(key[0])
    digest = hashlib.sha1(repr((os.path.abspath(key[0]), st.st_size, st.st_mtime_ns, *key[1:])).encode())
    return Path(cache) / f"{digest.hexdigest()}.pt"


def _decode_all(path: str, spec: "ClipSpec", video: bool = True, cache: str = "") -> tuple[Any, torch.Tensor | None]:
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


def hold(videos: list[str], sounds: list[str], spec: "ClipSpec", cache: str = "") -> dict[str, tuple[Any, Any]]:
    """{path: (frames, sound)} for every video, and {path: (None, sound)} for every other sound (an
    injected one; a sound lent by a training video is held with its frames); a file that does not decode
    holds (its error, None)."""
    held = set(videos)
    sounds = list(dict.fromkeys(p for p in sounds if p not in held))
    return dict(zip(videos + sounds, decode_many(videos, spec, True, cache) + decode_many(sounds, spec, False, cache)))


def decode_many(
    paths: list[str], spec: "ClipSpec", video: bool, cache: str = ""
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


def _decode_whole_file(path: str, spec: "ClipSpec", video: bool, audio: bool = True) -> tuple[Any, torch.Tensor | None]:
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
