"""Re-encode a dataset once for training, so that cutting a clip is cheap.

A clip starts anywhere in a video, so every training item seeks: the decoder jumps to the keyframe
before the start and decodes forward from there. Videos as they come (Kinetics from YouTube, x264's
default keyframe interval of 250 frames) make that up to 10 s of decoding for 0.5 s of clip. This
writes a copy of the dataset where the decoder has little to do:

  video  short side scaled down to `short_side` (128 by default, enough for 80x80 and 112x112 crops
         after a multi-scale crop), at the training frame rate (16 fps), H.264 with a keyframe every
         `gop` frames (16: a seek decodes at most 15 extra frames), no B-frames, and CAVLC entropy
         coding instead of CABAC (`--entropy cavlc`: a clip decodes about 15% faster, about as large
         on the synthetic set; `--entropy fastdecode` also drops the deblocking filter for a little
         more; BENCHMARKS.md, "Data loading");
  audio  mono at the training sample rate (11025 Hz), 16-bit PCM by default: no decoding and no
         resampling at training time, at ~22 kB per second (`--audio-codec aac` is ~4x smaller).
         With PCM, each video also gets VIDEO.RATE.pcm16, the same samples as raw 16-bit PCM: a
         clip's audio is then a seek and a read (media/decode.py, read_sidecar), not a demuxer seek
         and a decode. A copy made before sidecars existed is read as before (from its container),
         and rerunning this command on it adds them.
  index  VIDEO.index: each video packet's time, place in the file and size, and the decoder's
         parameters, so that a clip is read without opening the container, by a decoder kept open
         between clips (media/decode.py, decode_indexed; the same frames). Rerunning adds it to a copy
         made before it existed, which is read through its container until then.

Sample j of the audio and frame k of the video keep the source's clock (times j/rate and k/fps from
the source's zero), so audio-visual alignment is unchanged. Relative paths, file names and every
non-video file (split lists, CSVs, ground truth) are kept, so the same --layout reads the copy; a new
manifest is scanned at the end, without requiring audio (UCF101's and HMDB51's silent videos stay in
their official splits; training leaves them out), so no `python -m tools.scan` is needed after it.
Files are written atomically and existing ones skipped: rerunning resumes, and re-prepares nothing that is
up to date. Files that do not decode are reported and left out, as the scan would. A destination inside the
source (or the reverse) is refused: a later scan of the outer folder would find every video twice.

Every file keeps its name, extension included, so split lists still match. MP4, MOV, MKV and AVI
hold H.264 with PCM as they are; the other containers (WebM, MPEG-PS, Ogg, FLV, 3GP, M4V) cannot, so
those files get a Matroska container under their old name: FFmpeg, and so PyAV, detects the container
from the content, not the extension.

    python -m tools.prepare data/raw data/prepared [--short-side 128 --fps 16 --gop 16 --audio-rate 11025]
"""

import json
import os
import shutil
import sys
import time
from fractions import Fraction
from multiprocessing import Pool
from pathlib import Path

import av
import numpy as np
from tqdm import tqdm

from config import POSITIVE, OneLineParser, at_least, between
from media import decode
from media.manifest import VIDEO_EXTENSIONS, stream_duration
from tools import scan

X264_DECODE = {"cabac": {}, "cavlc": {"x264-params": "cabac=0"}, "fastdecode": {"tune": "fastdecode"}}
NATIVE_CONTAINERS = (".mp4", ".mov", ".mkv", ".avi")  # hold H.264 + PCM; the rest get Matroska


def add_arguments(p):
    p.add_argument("src", help="dataset root as it comes")
    p.add_argument("dst", help="root of the prepared copy (same layout)")
    p.add_checked(
        "--short-side", at_least(32), type=int, default=128, help="scale the shorter side down to this (never up)"
    )
    p.add_checked("--fps", POSITIVE, type=float, default=16.0, help="the training frame rate (paper: 16)")
    p.add_checked("--gop", at_least(1), type=int, default=16, help="keyframe every GOP frames")
    p.add_checked(
        "--audio-rate",
        at_least(1000),
        type=int,
        default=11025,
        help="the training sample rate (11025; 24000 for sota)",
    )
    p.add_argument("--audio-codec", default="pcm_s16le", choices=["pcm_s16le", "aac"])
    p.add_checked("--crf", between(0, 51), type=int, default=23, help="x264 quality (lower is better and larger)")
    p.add_argument(
        "--entropy",
        default="cavlc",
        choices=sorted(X264_DECODE),
        help="x264's entropy coding: cavlc decodes faster than cabac (x264's default); fastdecode also drops "
        "the deblocking filter",
    )
    p.add_checked("--workers", at_least(1), type=int, default=None, help="processes (default: all cores)")


def prepare(
    src,
    dst,
    short_side=128,
    fps=16.0,
    gop=16,
    audio_rate=11025,
    audio_codec="pcm_s16le",
    crf=23,
    workers=None,
    entropy="cavlc",
):
    """Re-encode every video under src into dst, copy the other files, scan the copy."""
    src, dst, t0 = Path(src), Path(dst), time.time()
    settings = (short_side, fps, gop, audio_rate, audio_codec, crf, entropy)
    if not src.is_dir():
        raise FileNotFoundError(f"prepare: source folder not found: {src}")
    if src.resolve() == dst.resolve():
        raise ValueError(f"prepare: the destination must differ from the source ({src})")
    for inner, outer in ((dst, src), (src, dst)):
        if inner.resolve().is_relative_to(outer.resolve()):
            raise ValueError(
                f"prepare: {inner} is inside {outer}, so a scan of {outer} would find every video twice; "
                "expected a destination outside the source, and the source outside it"
            )
    if not any(p.suffix.lower() in VIDEO_EXTENSIONS for p in src.rglob("*")):
        raise ValueError(f"prepare: no videos under {src} (containers: {' '.join(VIDEO_EXTENSIONS)})")
    for leftover in dst.rglob(".*.tmp.*") if dst.exists() else ():  # from a killed run: not videos
        leftover.unlink()
    jobs, copied = [], 0
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_dir() or rel.name == "manifest.csv":
            continue
        out = dst / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix.lower() in VIDEO_EXTENSIONS:
            # a copy made before the audio sidecar or the frame index existed gets them on a rerun; a silent
            # video has no sidecar to get, and is up to date without one
            stale = not decode.frame_index(out).exists() or (
                audio_codec == "pcm_s16le" and not decode.sidecar(out, audio_rate).exists() and heard(out)
            )
            if not out.exists() or stale:
                jobs.append((path, out, settings))
        elif not out.exists():
            shutil.copy2(path, out)
            copied += 1
    before = done_before(dst)
    with (
        Pool(max(1, workers or os.cpu_count())) as pool,
        tqdm(
            total=len(jobs) + before,
            initial=before,
            unit="video",
            desc=f"prepare {dst}",
            file=sys.stderr,
            disable=not jobs,
            smoothing=0.05,
        ) as bar,
    ):  # videos/s, time left
        failed = []
        for r in pool.imap_unordered(_prepare_one, jobs, chunksize=4):
            bar.update()
            if r:
                failed.append(r)
    for path, err in failed:
        print(f"prepare: left out {path}: {err}", file=sys.stderr)
    # the scan of the copy uses every core too, and resumes from dst/manifest.csv.partial if stopped. It
    # keeps silent videos: UCF101's and HMDB51's splits hold them, and training skips them (has_audio)
    rows = scan.make_manifest(dst, need_audio=False, jobs=workers)
    print(
        f"prepared {len(jobs) - len(failed)} videos ({len(failed)} failed, {copied} other files copied) "
        f"-> {dst}, {len(rows)} usable in its manifest ({time.time() - t0:.1f}s)"
    )


def heard(video):
    """Whether a prepared copy has an audio stream (a file that does not open is re-prepared)."""
    try:
        with av.open(str(video)) as c:
            return bool(c.streams.audio)
    except (av.FFmpegError, OSError):
        return True


def done_before(dst):
    """Videos an earlier, stopped run already wrote (for the progress bar's start)."""
    return (
        sum(1 for p in dst.rglob("*") if p.suffix.lower() in VIDEO_EXTENSIONS and not p.name.startswith("."))
        if dst.exists()
        else 0
    )


def _prepare_one(job):
    src, out, settings = job
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")  # the suffix picks the container
    try:
        if not out.exists():
            reencode(src, tmp, *settings)
            os.replace(tmp, out)
        _, _, _, audio_rate, audio_codec, _, _ = settings
        if audio_codec == "pcm_s16le":
            write_sidecar(out, audio_rate)
        write_frame_index(out)
        return None
    except (av.FFmpegError, RuntimeError, ValueError, IndexError) as err:
        tmp.unlink(missing_ok=True)
        return src, err


def write_frame_index(path: Path) -> None:
    """VIDEO.index (media/decode.py reads it) for a video without B-frames (this command makes none), written
    atomically. A file without a video stream (an injection pool's sound) gets an empty one: nothing to index,
    and a rerun sees it done. The size of the video it was made for refuses it beside a replaced video."""
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
    out = decode.frame_index(path)
    tmp = out.with_name(f".{out.name}.tmp")
    rows = np.asarray(rows, "<i8").reshape(-1, 4)  # (packets, 4)
    tmp.write_bytes(decode.INDEX_MAGIC + json.dumps(head).encode() + b"\n" + rows.tobytes())
    os.replace(tmp, out)


def write_sidecar(video: Path, rate: int) -> None:
    """VIDEO.RATE.pcm16: the prepared file's own PCM track, raw 16-bit little-endian, sample j at time
    j/rate. Reading a window from it is a seek and a read (media/decode.py, read_sidecar), where the
    container needs a demuxer seek and a decode; the samples are the same (tests/test_prepare.py)."""
    with av.open(str(video)) as c:
        if not c.streams.audio:
            return
        s = c.streams.audio[0]
        wav = decode.decode_audio(c, 0.0, stream_duration(c, s), rate)  # (n,) float32, exact s16 / 32768
    side = decode.sidecar(video, rate)
    tmp = side.with_name(f".{side.name}.tmp")
    (wav.numpy() * 32768).round().astype("<i2").tofile(tmp)
    os.replace(tmp, side)


def reencode(
    src, dst, short_side=128, fps=16.0, gop=16, audio_rate=11025, audio_codec="pcm_s16le", crf=23, entropy="cavlc"
):
    """One file, as the module docstring says. A file without a video stream (the synthetic audio
    pool) keeps only its audio; one without audio only its video."""
    wav = _read_audio(src, audio_rate)  # (n,) float32 on the source clock, or None
    container = None if Path(dst).suffix.lower() in NATIVE_CONTAINERS else "matroska"
    with av.open(str(src)) as inp, av.open(str(dst), "w", format=container) as out:
        vin = inp.streams.video[0] if inp.streams.video else None
        if vin is None and wav is None:
            raise ValueError("neither video nor audio")
        vs = aus = None
        if vin is not None:
            vin.thread_type = "AUTO"
            w, h = vin.codec_context.width, vin.codec_context.height
            scale = min(1.0, short_side / min(w, h))
            vs = out.add_stream(
                "libx264",
                rate=int(fps),
                options={
                    "preset": "veryfast",
                    "crf": str(crf),
                    "g": str(gop),
                    "keyint_min": str(gop),
                    "bf": "0",
                    **X264_DECODE[entropy],
                },
            )
            vs.width, vs.height = 2 * round(w * scale / 2), 2 * round(h * scale / 2)  # yuv420p needs even sides
            vs.pix_fmt = "yuv420p"
        if wav is not None:
            aus = out.add_stream(audio_codec, rate=audio_rate)
            aus.layout = "mono"
        sent = 0  # audio samples muxed so far; audio is interleaved with the video by time

        def emit(frame, k):
            """Encode frame k; every `gop` frames, the audio up to the same time: packets of about a
            second, so a 2 s window is a few packets to decode, not one per video frame."""
            nonlocal sent
            img = frame.reformat(width=vs.width, height=vs.height, format="yuv420p")
            img.pts, img.time_base = k, Fraction(1, int(fps))
            out.mux(vs.encode(img))
            if aus is not None and (k + 1) % gop == 0:
                sent = _mux_audio(out, aus, wav, sent, min(len(wav), int(round((k + 1) / fps * audio_rate))))

        if vin is not None:
            k, prev = 0, None
            for frame in inp.decode(vin):
                t = frame.time if frame.time is not None else 0.0
                fill = frame if prev is None else prev  # a source that starts late: its first frame fills in
                while k / fps < t - 1e-6:  # frame k shows what was on screen at k/fps
                    emit(fill, k)
                    k += 1
                prev = frame
            if prev is None:
                raise RuntimeError("no video frame decoded")
            if k == 0:  # a single-frame source still gives one frame
                emit(prev, 0)
            out.mux(vs.encode())
        if aus is not None:
            _mux_audio(out, aus, wav, sent, len(wav))
            out.mux(aus.encode())


def _mux_audio(out, aus, wav, sent, upto):
    if upto <= sent:
        return sent
    pcm = (np.clip(wav[sent:upto], -1, 1) * 32767).astype(np.int16)[None]  # (1, n)
    frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
    frame.sample_rate, frame.pts = aus.rate, sent
    out.mux(aus.encode(frame))
    return upto


def _read_audio(src, rate):
    """The whole audio track, mono at `rate`, with sample j at time j/rate of the source's clock
    (leading silence added or a pre-roll dropped to get there); None without an audio stream."""
    with av.open(str(src)) as c:
        if not c.streams.audio:
            return None
        resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
        chunks, t0 = [], None
        for frame in c.decode(c.streams.audio[0]):
            if t0 is None:
                t0 = frame.time if frame.time is not None else 0.0
            chunks += [f.to_ndarray()[0] for f in resampler.resample(frame)]
        chunks += [f.to_ndarray()[0] for f in resampler.resample(None)]
    if t0 is None:
        return None
    wav = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    shift = int(round(t0 * rate))
    return np.concatenate([np.zeros(shift, np.float32), wav]) if shift > 0 else wav[-shift:]


def main(argv=None):
    p = OneLineParser(prog="tools/prepare.py", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    try:
        prepare(**vars(p.parse_args(argv)))
    except (FileNotFoundError, ValueError) as err:  # a missing or empty folder, the source as destination
        raise SystemExit(f"tools/prepare.py: {str(err).removeprefix('prepare: ')}") from None


if __name__ == "__main__":
    main()
