"""Which files make a dataset: layouts, the scan of usable files, and the manifest (paper Sec. 5.1).

    python data.py scan ROOT --out ROOT/manifest.csv [--video-only]

`scan` opens every video once and keeps the usable ones (path, label, duration, fps, size, audio);
each unusable file gets one line with its path and the reason: empty, cannot be opened, no video
stream, no audio stream, shorter than one clip, truncated. `load_records` joins a layout's split
(UCF101, HMDB51, Kinetics-400, or a plain folder of class folders) with the manifest, so the number
of memory-bank slots always comes from the files that work. Tests: tests/test_data.py
"""
import csv
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import av

VIDEO_EXTENSIONS = (".mp4", ".avi", ".mkv", ".webm")
MIN_VIDEO_SECONDS, MIN_AUDIO_SECONDS = 0.5, 2.0  # one clip: 8 frames at 16 fps, 2 s of audio


@dataclass
class Record:
    path: str            # absolute path of the video file
    label: int
    duration: float      # seconds of video
    audio_duration: float = 0.0
    faulty: bool = False  # ground truth: the audio is unrelated to the picture (synthetic data)


def list_split(layout, root, split, fold=1, annotations=None):
    """Videos of one split as ([(relative path, label)], class names). Paths are relative to root."""
    root = Path(root)
    if layout == "ucf101":
        ann = Path(annotations or root / "ucfTrainTestlist")
        classes = [line.split()[1] for line in _lines(ann / "classInd.txt")]
        name = f"{'train' if split == 'train' else 'test'}list0{fold}.txt"
        items = [(line.split()[0], classes.index(line.split("/")[0])) for line in _lines(ann / name)]
    elif layout == "hmdb51":
        ann = Path(annotations or root / "testTrainMulti_7030_splits")
        files = sorted(ann.glob(f"*_test_split{fold}.txt"))
        classes = [f.name[:-len(f"_test_split{fold}.txt")] for f in files]
        want = "1" if split == "train" else "2"
        items = [(f"{c}/{line.split()[0]}", k) for k, (c, f) in enumerate(zip(classes, files))
                 for line in _lines(f) if line.split()[1] == want]
    elif layout == "kinetics":
        split = "val" if split in ("val", "test", "validate") else split
        if annotations:  # the official CSV: label,youtube_id,time_start,time_end,split
            rows = [r for r in csv.DictReader(open(annotations)) if r["split"].replace("validate", "val") == split]
            classes = sorted({r["label"] for r in rows})
            items = [(f"{split}/{r['label']}/{r['youtube_id']}_{int(float(r['time_start'])):06d}_"
                      f"{int(float(r['time_end'])):06d}.mp4", classes.index(r["label"])) for r in rows]
            items = [it for it in items if (root / it[0]).exists()]
        else:
            classes = _class_dirs(root / split)
            items = [(f"{split}/{p}", k) for p, k in _class_files(root / split, classes)]
    elif layout == "folder":
        classes = _class_dirs(root)
        items = _class_files(root, classes)
        if (root / f"{split}.txt").exists():
            keep = set(_lines(root / f"{split}.txt"))
            items = [it for it in items if it[0] in keep]
    else:
        raise ValueError(f"unknown layout {layout!r}: expected ucf101, hmdb51, kinetics or folder")
    return items, classes


def _lines(path):
    if not Path(path).exists():
        raise FileNotFoundError(f"split file not found: {path}")
    return [line.strip() for line in open(path) if line.strip()]


def _class_dirs(root):
    """Class folders; names starting with '_' or '.' are not classes (the synthetic audio pool)."""
    if not Path(root).is_dir():
        raise FileNotFoundError(f"dataset folder not found: {root}")
    return sorted(d.name for d in Path(root).iterdir() if d.is_dir() and d.name[0] not in "_.")


def _class_files(root, classes):
    return [(f"{c}/{f.name}", k) for k, c in enumerate(classes)
            for f in sorted((Path(root) / c).iterdir()) if f.suffix.lower() in VIDEO_EXTENSIONS]


def load_records(layout, root, split, fold=1, annotations=None, manifest=None, need_audio=True):
    """Records of a split joined with the manifest (durations, audio); files the manifest lacks are
    dropped, so the number of memory-bank slots always comes from the files that work. A missing
    manifest is made by scanning (and saved as ROOT/manifest.csv when ROOT is writable)."""
    root = Path(root)
    items, classes = list_split(layout, root, split, fold, annotations)
    manifest = Path(manifest or root / "manifest.csv")
    if not manifest.exists():  # scan every file under root, so that one manifest serves every split
        rows = scan(root, need_audio=need_audio)
        if os.access(root, os.W_OK):
            write_manifest(rows, manifest)
    else:
        rows = list(csv.DictReader(open(manifest)))
    by_path = {r["path"]: r for r in rows}
    truth = {}
    if (root / "ground_truth.csv").exists():
        truth = {r["path"]: r["faulty_audio"] == "1" for r in csv.DictReader(open(root / "ground_truth.csv"))}
    records = []
    for path, label in items:
        r = by_path.get(path)
        if r is None or (need_audio and str(r["has_audio"]) != "1"):
            continue
        records.append(Record(str(root / path), label, float(r["duration"]), float(r["audio_duration"] or 0),
                              truth.get(path, False)))
    if len(records) < len(items):
        print(f"data: {len(items) - len(records)} of {len(items)} {split} videos under {root} are not usable "
              f"(not in {manifest.name}{' or without audio' if need_audio else ''})", file=sys.stderr)
    return records, classes


def audio_pool(folder):
    """(path, seconds) of every file in `folder` that has an audio stream: replacement audio."""
    pool = []
    for f in sorted(Path(folder).iterdir()):
        if f.suffix.lower() in VIDEO_EXTENSIONS + (".m4a", ".wav", ".mp3"):
            with av.open(str(f)) as c:
                if c.streams.audio:
                    pool.append((str(f), stream_duration(c, c.streams.audio[0])))
    if not pool:
        raise ValueError(f"no audio files in the faulty-positive pool {folder}")
    return pool


# ----------------------------------------------------------------------------- scan

MANIFEST_FIELDS = ["path", "label", "duration", "fps", "width", "height", "has_audio", "audio_rate", "audio_duration"]


def stream_duration(container, stream):
    if stream.duration is not None:
        return float(stream.duration * stream.time_base)
    return container.duration / 1e6 if container.duration else 0.0


def probe(path, need_audio=True, min_video=MIN_VIDEO_SECONDS, min_audio=MIN_AUDIO_SECONDS):
    """Manifest row for one file, or raise ValueError naming why it is unusable."""
    path = Path(path)
    if path.stat().st_size == 0:
        raise ValueError("empty file")
    try:
        container = av.open(str(path))
    except av.FFmpegError as err:
        raise ValueError(f"cannot be opened ({err.strerror or err})") from None
    with container:
        if not container.streams.video:
            raise ValueError("no video stream")
        vs = container.streams.video[0]
        has_audio = bool(container.streams.audio)
        if need_audio and not has_audio:
            raise ValueError("no audio stream")
        duration = stream_duration(container, vs)
        audio_duration = stream_duration(container, container.streams.audio[0]) if has_audio else 0.0
        if duration < min_video or (need_audio and audio_duration < min_audio):
            raise ValueError(f"shorter than one clip ({duration:.2f}s video, {audio_duration:.2f}s audio)")
        try:  # decode the last second: a cut-off file claims more than it holds
            container.seek(max(0, int((duration - 1.0) / vs.time_base)), stream=vs, backward=True)
            last = max((f.time or 0.0 for f in container.decode(vs)), default=-1.0)
        except av.FFmpegError as err:
            raise ValueError(f"truncated (decoding fails near the end: {err})") from None
        if last < duration - 1.0:
            raise ValueError(f"truncated (claims {duration:.2f}s, frames stop at {max(last, 0):.2f}s)")
        return {"path": "", "label": path.parent.name, "duration": f"{duration:.3f}",
                "fps": f"{float(vs.average_rate or 0):.3f}", "width": vs.width, "height": vs.height,
                "has_audio": int(has_audio), "audio_rate": container.streams.audio[0].rate if has_audio else 0,
                "audio_duration": f"{audio_duration:.3f}"}


def scan(root, files=None, need_audio=True, out=sys.stdout):
    """Probe every video under root (or the given files); print one line per unusable file."""
    root = Path(root)
    files = sorted(files) if files is not None else sorted(
        p for p in root.rglob("*") if p.suffix.lower() in VIDEO_EXTENSIONS and not _hidden(p.relative_to(root)))
    rows = []
    for f in files:
        try:
            row = probe(f, need_audio)
        except (ValueError, OSError) as err:
            print(f"unusable: {f}: {err}", file=out)
            continue
        row["path"] = str(Path(f).relative_to(root))
        rows.append(row)
    return rows


def _hidden(rel):
    return any(part[0] in "_." for part in rel.parts[:-1])


def write_manifest(rows, path):
    tmp = Path(f"{path}.tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, MANIFEST_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)
