"""Preloading a small dataset: every file decoded once, whole, into memory (data.AVDataset(preload=True)).

Frames at the clip's fps and audio at its rate, kept per (file, fps, rate) for the life of the
process, so the branches of one demo.py process decode once. Files are decoded in threads: FFmpeg
releases the GIL, and the tensors stay in this process. Tests: tests/test_data.py
"""

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import av
import torch

from media import decode, manifest

if TYPE_CHECKING:  # for annotations only: data.py imports this module
    from data import ClipSpec

_PRELOADED = {}  # (path, fps, frames, audio rate, video) -> (frames or the decoding error, audio)


def _decode_all(path: str, spec: "ClipSpec", video: bool = True) -> tuple[Any, torch.Tensor | None]:
    """(frames at spec.fps for the whole video or None, whole audio at spec.audio_rate or None);
    the exception instead of the frames when the file does not decode."""
    key = (str(path), spec.fps, spec.frames, spec.audio_rate if spec.audio_seconds else 0, video)
    if key not in _PRELOADED:
        _PRELOADED[key] = _decode_whole_file(path, spec, video)
    return _PRELOADED[key]


def decode_many(paths: list[str], spec: "ClipSpec", video: bool) -> list[tuple[Any, torch.Tensor | None]]:
    """_decode_all for many files, in threads over the cores torch may use: FFmpeg decodes with the
    GIL released (the same CPU time, less wall time), and the results stay in this
    process, so no tensors are pickled back as they would be from a process pool."""
    threads = max(1, min(torch.get_num_threads(), len(paths)))
    if threads == 1:
        return [_decode_all(p, spec, video) for p in paths]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda p: _decode_all(p, spec, video), paths))


def _decode_whole_file(path: str, spec: "ClipSpec", video: bool) -> tuple[Any, torch.Tensor | None]:
    try:
        with decode.open_media(path) as c:
            frames = None
            if video:
                vs = c.streams.video[0]
                frames = decode.decode_frames(
                    c, 0.0, max(spec.frames, int(manifest.stream_duration(c, vs) * spec.fps)), spec.fps
                )
            wav = None
            if spec.audio_seconds and c.streams.audio:
                wav = decode.decode_audio(c, 0.0, manifest.stream_duration(c, c.streams.audio[0]), spec.audio_rate)
            return frames, wav
    except (av.FFmpegError, RuntimeError, IndexError) as err:
        return err, None
