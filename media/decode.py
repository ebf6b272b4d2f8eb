"""Reading a clip's frames and audio out of a video file with PyAV (paper Sec. 5.1's clips), one thread each.

read_clip gives T frames at fps from a start time and the audio window around them (or another file's, for an
injected faulty positive, Sec. 5.2). A copy made by `python -m tools.prepare SRC DST` is read through its frame
index and PCM sidecar, without opening the container; any other file through the container. Both give the same
frames and samples (tests/test_prepare.py; speeds: lab/BENCHMARKS.md, "Data loading"). Tests: tests/test_data.py
"""

import json
import os
import threading
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import av
import numpy as np
import torch
from av.video.reformatter import VideoReformatter

if TYPE_CHECKING:  # for annotations only
    from augment import ClipSpec

# One decoder and one swscale thread per stream: FFmpeg's and PyAV's default, 0, starts a pool of one thread per
# core of the affinity mask for every file (decoding) or every frame (swscale), which is what made loader
# workers slow on a many-core box (lab/BENCHMARKS.md, "Data loading").
DECODER_THREADS = 1
SWSCALE_THREADS = 1
# The demuxer a suffix names: opening then skips FFmpeg's probe (a quarter of an open); a lying suffix is probed.
DEMUXER_OF_SUFFIX = {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov", ".mkv": "matroska", ".webm": "matroska"}


def open_media(path: str | Path) -> av.container.InputContainer:
    """av.open with DECODER_THREADS decoder threads per stream."""
    demuxer = DEMUXER_OF_SUFFIX.get(Path(path).suffix.lower())
    try:
        container = av.open(str(path), format=demuxer)
    except av.error.InvalidDataError:
        if demuxer is None:
            raise
        container = av.open(str(path))  # another container under a common suffix: let FFmpeg probe it
    for stream in container.streams:
        if stream.type in ("video", "audio"):
            stream.codec_context.thread_count = DECODER_THREADS
    return container


def decode_frames(container: av.container.InputContainer, start: float, num_frames: int, fps: float) -> torch.Tensor:
    """Frames shown at times start + k/fps, k < num_frames: (T, H, W, 3) uint8. Seeks to the keyframe before
    `start` and decodes forward; each time takes the last frame at or before it (a slower source repeats
    frames, a faster one skips them), and past the end of the stream the last frame repeats."""
    stream = container.streams.video[0]
    container.seek(max(0, int(start / stream.time_base)), stream=stream, backward=True)
    timed = ((f.time if f.time is not None else 0.0, f) for f in container.decode(stream))
    return _pick(timed, start, num_frames, fps)


def _pick(timed: Iterator[tuple[float, av.VideoFrame]], start: float, num_frames: int, fps: float) -> torch.Tensor:
    """decode_frames' choice of frames from decoded (time, frame)s in order, converted to RGB."""
    targets = start + np.arange(num_frames) / fps
    picked, prev, k = [], None, 0
    for t, frame in timed:
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
    # One converter for the clip (to_ndarray builds a swscale context per frame, three times the conversion's
    # cost at these sizes; the same pixels, tested); a repeated frame is converted once.
    rgb, cache = VideoReformatter(), {}
    for f in picked:
        if id(f) not in cache:
            cache[id(f)] = rgb.reformat(f, format="rgb24", threads=SWSCALE_THREADS).to_ndarray()  # (H, W, 3)
    return torch.from_numpy(np.stack([cache[id(f)] for f in picked]))  # (T, H, W, 3)


# ----------------------------------------------------------------------------- a prepared copy's frame index
# VIDEO.index (written by tools/prepare.py): each video packet's pts, place and size in the file and whether it
# is a keyframe, and what the decoder needs to start. A clip is then read without opening the container (a
# quarter of a prepared clip's time) by a decoder kept open between clips (starting one costs several frames).
INDEX_MAGIC = b"robust-xid frame index 1\n"


class FrameIndex(NamedTuple):
    codec: str
    extradata: bytes
    time_base: Fraction
    rows: np.ndarray  # (packets, 4) int64: pts, byte offset, size, keyframe


def frame_index(path: str | Path) -> Path:
    return Path(f"{path}.index")


def read_frame_index(path: str | Path) -> FrameIndex | None:
    """The video's frame index, or None where it has none (a file as it came) or it is empty (no video
    stream). One made for another version of the video (its size differs) is refused by name."""
    try:
        blob = frame_index(path).read_bytes()
    except FileNotFoundError:
        return None
    body = blob[len(INDEX_MAGIC) :]
    end = body.find(b"\n")  # of the JSON head; the packets' rows follow it
    head = json.loads(body[:end]) if blob.startswith(INDEX_MAGIC) and end >= 0 else None
    if head is None or head["video_bytes"] != os.path.getsize(path):
        raise ValueError(
            f"{frame_index(path)} does not belong to {path} (another version of the video, or not an index): "
            "delete it, or remake the copy with python -m tools.prepare SRC DST"
        )
    rows = np.frombuffer(body, "<i8", offset=end + 1).reshape(-1, 4)  # (packets, 4)
    if not len(rows):
        return None
    return FrameIndex(head["codec"], bytes.fromhex(head["extradata"]), Fraction(*head["time_base"]), rows)


_LOCAL = threading.local()  # open decoders, per thread (loader workers are processes: one each)


def _decoder(codec: str, extradata: bytes) -> av.CodecContext:
    """A decoder kept open for every video of the same stream parameters (a prepared set has a few)."""
    decoders = _LOCAL.__dict__.setdefault("decoders", {})
    ctx = decoders.get((codec, extradata))
    if ctx is None:
        if len(decoders) >= 8:  # a set of many shapes: keep the most recent few
            decoders.pop(next(iter(decoders)))
        ctx = av.CodecContext.create(codec, "r")
        ctx.extradata, ctx.thread_count = extradata, DECODER_THREADS
        decoders[(codec, extradata)] = ctx
    return ctx


def decode_indexed(path: str | Path, index: FrameIndex, start: float, num_frames: int, fps: float) -> torch.Tensor:
    """decode_frames' frames through the frame index: packets read straight from the file, from the keyframe
    the container's seek would land on, into a decoder kept open."""
    pts, pos, size, key = index.rows.T  # (packets,) each
    keys = np.flatnonzero(key & (pts <= max(0, int(start / index.time_base))))  # the seek's keyframe
    first = keys[-1] if len(keys) else np.flatnonzero(key)[0]
    ctx = _decoder(index.codec, index.extradata)
    ctx.flush_buffers()  # nothing of the previous clip, nor its end of stream, stays in the decoder
    num, den = index.time_base.numerator, index.time_base.denominator  # int / int rounds as frame.time does

    def timed() -> Iterator[tuple[float, av.VideoFrame]]:
        with open(path, "rb") as f:
            for k in range(first, len(pts)):
                f.seek(int(pos[k]))
                packet = av.Packet(f.read(int(size[k])))
                packet.pts = packet.dts = int(pts[k])
                yield from ((fr.pts * num / den, fr) for fr in ctx.decode(packet))
            yield from ((fr.pts * num / den, fr) for fr in ctx.decode(None))  # drain: what the decoder still holds

    return _pick(timed(), start, num_frames, fps)


# ----------------------------------------------------------------------------- audio
def decode_audio(container: av.container.InputContainer, start: float, seconds: float, rate: int) -> torch.Tensor:
    """Mono audio resampled to `rate` from `start` for `seconds`: (round(seconds*rate),) float32, zero-padded
    only where the window runs past the end of the stream."""
    stream = container.streams.audio[0]
    container.seek(max(0, int(start / stream.time_base)), stream=stream, backward=True)
    resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
    # a prepared copy holds 16-bit mono PCM at `rate`: no resampling
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
    """Where a prepared video keeps its audio at `rate` as raw 16-bit PCM, sample j at j/rate (tools/prepare.py)."""
    return Path(f"{path}.{rate}.pcm16")


def read_sidecar(path: str | Path, start: float, seconds: float, rate: int) -> torch.Tensor | None:
    """decode_audio's window (the same samples) from the file's sidecar, a seek and a read; None without one."""
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
    path: str | Path, start: float, spec: "ClipSpec", audio_path: str | None = None, audio_start: float | None = None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One clip: frames (T, H, W, 3) uint8 from `path` at `start`, and the audio window (n,) from `audio_path`
    (the video's own when None) at `audio_start`, or None if spec.audio_seconds == 0."""
    index = read_frame_index(path)
    source = path if audio_path is None else audio_path
    wav = None
    if spec.audio_seconds:
        wav = read_sidecar(source, audio_start, spec.audio_seconds, spec.audio_rate)
    if index is not None and (wav is not None or not spec.audio_seconds):  # a prepared file: no container
        return decode_indexed(path, index, start, spec.frames, spec.fps), wav
    with open_media(path) as container:
        frames = decode_frames(container, start, spec.frames, spec.fps)
        if not spec.audio_seconds or wav is not None:
            return frames, wav
        if audio_path is None:
            return frames, decode_audio(container, audio_start, spec.audio_seconds, spec.audio_rate)
    with open_media(audio_path) as container:
        return frames, decode_audio(container, audio_start, spec.audio_seconds, spec.audio_rate)
