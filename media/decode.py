"""Reading frames and audio out of video files with PyAV (paper Sec. 5.1's clips), one thread each.

    read_clip       T frames at fps from a start time, and the audio window around them (or another
                    file's audio, for an injected faulty positive)
    decode_frames   frames shown at start + k/fps: seek to the keyframe before, decode forward
    decode_audio    mono audio resampled to the training rate, zero-padded only past the stream's end

Used by data.py (items) and media/preload.py (whole files). Tests: tests/test_data.py
"""

from pathlib import Path
from typing import TYPE_CHECKING

import av
import numpy as np
import torch

if TYPE_CHECKING:  # for annotations only: data.py imports this module
    from data import ClipSpec

DECODER_THREADS = 1  # per opened stream; FFmpeg's 0 means one per core of the affinity mask
# The root cause of slow loader workers on a many-core box: PyAV's frame conversion (to_ndarray ->
# swscale) defaults to threads=0, a pool of one thread per core of the affinity mask, built and torn
# down for every frame (measured in BENCHMARKS.md, "Data loading"); a worker held to one core was
# fast only because its mask sized that pool to 1.
SWSCALE_THREADS = 1


def open_media(path: str | Path) -> av.container.InputContainer:
    """av.open with DECODER_THREADS decoder threads per stream. FFmpeg's default, 0, sizes a slice
    thread pool from the process's affinity mask (16 threads on a 16-core box), started and joined
    again for every file a clip read opens: for a clip of 8 small frames that is pure overhead."""
    container = av.open(str(path))
    for stream in container.streams:
        if stream.type in ("video", "audio"):
            stream.codec_context.thread_count = DECODER_THREADS
    return container


def decode_frames(container: av.container.InputContainer, start: float, num_frames: int, fps: float) -> torch.Tensor:
    """Frames shown at times start + k/fps, k < num_frames: (T, H, W, 3) uint8.

    Seeks to the keyframe before `start` and decodes forward. Each target time takes the last frame
    whose timestamp is at or before it, so a source slower than `fps` repeats frames and a faster
    one skips them. Past the end of the stream the last frame repeats."""
    stream = container.streams.video[0]
    container.seek(max(0, int(start / stream.time_base)), stream=stream, backward=True)
    targets = start + np.arange(num_frames) / fps
    picked, prev, k = [], None, 0
    for frame in container.decode(stream):
        t = frame.time if frame.time is not None else 0.0
        if prev is None and t > targets[0]:
            prev = frame  # the stream starts after `start` (e.g. start=0 with a small pts offset)
        while k < num_frames and t > targets[k] + 1e-6:
            picked.append(prev)
            k += 1
        if k == num_frames:
            break
        prev = frame
    if prev is None:
        raise RuntimeError(f"no video frame decoded at or after {start:.2f}s")
    picked += [prev] * (num_frames - k)
    cache = {}  # repeated frames are converted once
    arrays = [cache.setdefault(id(f), f.to_ndarray(format="rgb24", threads=SWSCALE_THREADS)) for f in picked]
    return torch.from_numpy(np.stack(arrays))  # (T, H, W, 3)


def decode_audio(container: av.container.InputContainer, start: float, seconds: float, rate: int) -> torch.Tensor:
    """Mono audio resampled to `rate` from `start` for `seconds`: (round(seconds*rate),) float32.
    Zero-padded only where the window runs past the end of the stream."""
    stream = container.streams.audio[0]
    container.seek(max(0, int(start / stream.time_base)), stream=stream, backward=True)
    resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
    # prepared files (prepare.py) hold exactly this: 16-bit mono at `rate`, no resampling needed
    direct = stream.codec_context.name == "pcm_s16le" and stream.rate == rate and stream.channels == 1
    n = int(round(seconds * rate))
    chunks, t0, have = [], None, 0
    for frame in container.decode(stream):
        if t0 is None:
            t0 = frame.time if frame.time is not None else 0.0
        if direct:
            new = [frame.to_ndarray()[0].astype(np.float32) / 32768]
        else:
            new = [f.to_ndarray()[0] for f in resampler.resample(frame)]
        chunks += new
        have += sum(len(c) for c in new)
        if t0 + have / rate >= start + seconds:
            break
    if t0 is None:
        raise RuntimeError(f"no audio decoded at or after {start:.2f}s")
    wav = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    offset = max(0, int(round((start - t0) * rate)))
    wav = wav[offset : offset + n]
    return torch.from_numpy(np.pad(wav, (0, n - len(wav))))  # (n,)


def sidecar(path: str | Path, rate: int) -> Path:
    """Where a prepared video keeps its audio at `rate` as raw 16-bit PCM (tools/prepare.py)."""
    return Path(f"{path}.{rate}.pcm16")


def read_sidecar(path: str | Path, start: float, seconds: float, rate: int) -> torch.Tensor | None:
    """decode_audio's window from the file's sidecar, or None where it has none (a file as it came, or
    prepared before sidecars existed): a seek and a read instead of a demuxer seek and a decode. The
    same samples as decode_audio on the prepared file's PCM track."""
    try:
        f = open(sidecar(path, rate), "rb")  # closed below; a missing sidecar is the common case, not an error
    except FileNotFoundError:
        return None
    n = int(round(seconds * rate))
    with f:
        f.seek(2 * max(0, int(round(start * rate))))
        pcm = np.frombuffer(f.read(2 * n), dtype="<i2")
    wav = pcm.astype(np.float32) / 32768  # as decode_audio converts s16
    return torch.from_numpy(np.pad(wav, (0, n - len(wav))))  # (n,)


def read_clip(
    path: str | Path,
    start: float,
    spec: "ClipSpec",
    audio_path: str | None = None,
    audio_start: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One clip: frames (T, H, W, 3) uint8 from `path` at `start`, and the audio window centred on
    the clip (from `audio_path` at `audio_start` when the audio is replaced), or None if
    spec.audio_seconds == 0. The container is always closed."""
    with open_media(path) as container:
        frames = decode_frames(container, start, spec.frames, spec.fps)
        if not spec.audio_seconds:
            return frames, None
        source = path if audio_path is None else audio_path
        wav = read_sidecar(source, audio_start, spec.audio_seconds, spec.audio_rate)
        if wav is not None:
            return frames, wav
        if audio_path is None:
            return frames, decode_audio(container, audio_start, spec.audio_seconds, spec.audio_rate)
    with open_media(audio_path) as container:
        return frames, decode_audio(container, audio_start, spec.audio_seconds, spec.audio_rate)
