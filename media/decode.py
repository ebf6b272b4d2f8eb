"""Reading frames and audio out of video files with PyAV (paper Sec. 5.1's clips), one thread each.

    read_clip       T frames at fps from a start time, and the audio window around them (or another
                    file's audio, for an injected faulty positive)
    decode_frames   frames shown at start + k/fps: seek to the keyframe before, decode forward
    decode_indexed  the same frames of a prepared video through its frame index (VIDEO.index), without
                    opening the container, in a decoder kept open between clips
    decode_audio    mono audio resampled to the training rate, zero-padded only past the stream's end

Used by data.py (items) and media/in_memory.py (whole files). Tests: tests/test_data.py
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

DECODER_THREADS = 1  # per opened stream; FFmpeg's 0 means one per core of the affinity mask
# The root cause of slow loader workers on a many-core box: PyAV's frame conversion (to_ndarray ->
# swscale) defaults to threads=0, a pool of one thread per core of the affinity mask, built and torn
# down for every frame (measured in BENCHMARKS.md, "Data loading"); a worker held to one core was
# fast only because its mask sized that pool to 1.
SWSCALE_THREADS = 1


# The demuxer a file's suffix names, so that opening skips FFmpeg's probe of every demuxer (a quarter
# of an open: BENCHMARKS.md, "Data loading"); a file whose suffix lies is opened again with the probe.
DEMUXER_OF_SUFFIX = {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov", ".mkv": "matroska", ".webm": "matroska"}


def open_media(path: str | Path) -> av.container.InputContainer:
    """av.open with DECODER_THREADS decoder threads per stream. FFmpeg's default, 0, sizes a slice
    thread pool from the process's affinity mask (16 threads on a 16-core box), started and joined
    again for every file a clip read opens: for a clip of 8 small frames that is pure overhead."""
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
    """Frames shown at times start + k/fps, k < num_frames: (T, H, W, 3) uint8.

    Seeks to the keyframe before `start` and decodes forward. Each target time takes the last frame
    whose timestamp is at or before it, so a source slower than `fps` repeats frames and a faster
    one skips them. Past the end of the stream the last frame repeats."""
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
    # One converter for the clip: VideoFrame.to_ndarray builds a swscale context for every frame, which
    # costs three times the conversion at these sizes; the output is the same, bit for bit (tested).
    rgb = VideoReformatter()
    cache = {}  # repeated frames are converted once
    for f in picked:
        if id(f) not in cache:
            cache[id(f)] = rgb.reformat(f, format="rgb24", threads=SWSCALE_THREADS).to_ndarray()  # (H, W, 3)
    return torch.from_numpy(np.stack([cache[id(f)] for f in picked]))  # (T, H, W, 3)


# ----------------------------------------------------------------------------- the frame index
# A prepared video (tools/prepare.py) comes with VIDEO.index: where each of its video packets lies in the
# file, and what the decoder needs to start. A clip is then read without opening the container (FFmpeg's
# open probes and parses the file: a quarter of a prepared clip's time) and with a decoder kept open
# between clips (starting one costs as much as decoding several frames): BENCHMARKS.md, "Data loading".
# The frames are the container path's, bit for bit (tests/test_prepare.py).
INDEX_MAGIC = b"robust-xid frame index 1\n"


class FrameIndex(NamedTuple):
    codec: str
    extradata: bytes
    time_base: Fraction
    video_bytes: int  # the size of the video it was made for: a replaced video does not use a stale index
    rows: np.ndarray  # (packets, 4) int64: pts, byte offset, size, keyframe


def frame_index(path: str | Path) -> Path:
    """Where a prepared video keeps its frame index."""
    return Path(f"{path}.index")


def write_frame_index(path: str | Path) -> None:
    """VIDEO.index for a video without B-frames (tools/prepare.py writes none), written atomically. A
    file without a video stream (an injection pool's sound) gets an empty one: nothing to index, and a
    rerun of prepare sees it done."""
    with av.open(str(path)) as c:
        head = {"codec": "", "extradata": "", "time_base": [1, 1], "video_bytes": os.path.getsize(path)}
        rows = []
        if c.streams.video:
            s = c.streams.video[0]
            rows = [(p.pts, p.pos, p.size, p.is_keyframe) for p in c.demux(s) if p.size and p.pts is not None]
            head |= {
                "codec": s.codec_context.name,
                "extradata": (s.codec_context.extradata or b"").hex(),
                "time_base": [s.time_base.numerator, s.time_base.denominator],
            }
    if any(b[0] <= a[0] for a, b in zip(rows, rows[1:])):
        raise ValueError(f"{path}: packets out of presentation order (B-frames?): no frame index")
    out = frame_index(path)
    tmp = out.with_name(f".{out.name}.tmp")
    rows = np.asarray(rows, "<i8").reshape(-1, 4)  # (packets, 4)
    tmp.write_bytes(INDEX_MAGIC + json.dumps(head).encode() + b"\n" + rows.tobytes())
    os.replace(tmp, out)


def read_frame_index(path: str | Path) -> FrameIndex | None:
    """The video's frame index, or None where it has none (a file as it came, or prepared before
    indexes existed: read through its container) or it is empty (no video stream). One that does not
    fit the video is refused by name."""
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
    extradata, time_base = bytes.fromhex(head["extradata"]), Fraction(*head["time_base"])
    return FrameIndex(head["codec"], extradata, time_base, head["video_bytes"], rows)


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
    """decode_frames' frames through the frame index: from the keyframe the container's seek would
    land on, packets read straight from the file into a decoder kept open."""
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
