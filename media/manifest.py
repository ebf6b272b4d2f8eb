"""Which files make a dataset: layouts, split lists and the manifest of usable files (Sec. 5.1), as training and
evaluation read them. The manifest (ROOT/manifest.csv) and a plain folder's split lists are made once,
beforehand, by the scan (tools/scan.py), which names every file it refuses and why:

    python -m tools.scan ROOT                 # ROOT/manifest.csv (--video-only for evaluation sets)
    python -m tools.scan ROOT --split         # train.txt/test.txt for a folder of class folders without lists

A missing manifest, or a folder dataset without lists, is refused in one line naming that command. `load_split`
joins a layout's split (UCF101, HMDB51, Kinetics-400, or a plain folder of class folders) with the manifest
and names the listed videos it lacks (an evaluation refuses them: evaluate.resolve); `load_records`
leaves them out, so the number of memory-bank slots always comes from the files that work. A manifest is read
once per process while it is unchanged (read_manifest). Tests: tests/test_data.py, tests/test_protocols.py
"""

import csv
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import av

from config import shown

# containers PyAV (FFmpeg) reads that real collections ship: Kinetics .mp4/.webm/.mkv, UCF101 and
# HMDB51 .avi, phones .mov/.m4v/.3gp, older archives .mpg/.mpeg/.flv, Wikimedia .ogv
VIDEO_EXTENSIONS = (".mp4", ".avi", ".mkv", ".webm", ".mov", ".m4v", ".mpg", ".mpeg", ".ogv", ".flv", ".3gp")
AUDIO_EXTENSIONS = (".m4a", ".wav", ".mp3", ".flac", ".ogg", ".aac")  # replacement audio (--faulty-pool)
MIN_VIDEO_SECONDS, MIN_AUDIO_SECONDS = 0.5, 2.0  # one clip: 8 frames at 16 fps, 2 s of audio
MANIFEST_FIELDS = ["path", "label", "duration", "fps", "width", "height", "has_audio", "audio_rate", "audio_duration"]


def stream_duration(container: av.container.InputContainer, stream: av.stream.Stream) -> float:
    if stream.duration is not None:
        return float(stream.duration * stream.time_base)
    return container.duration / 1e6 if container.duration else 0.0


@dataclass
class Record:
    path: str  # absolute path of the video file
    label: int
    duration: float  # seconds of video
    audio_duration: float = 0.0
    faulty: bool = False  # ground truth: the audio is unrelated to the picture (synthetic data)


LISTS = {"ucf101": "ucfTrainTestlist", "hmdb51": "testTrainMulti_7030_splits"}  # the official lists' folders


def split_lists(layout: str, root: str | Path, annotations: str | Path | None = None) -> list[Path]:
    """The files that define every fold of an official-split layout (UCF101's classInd.txt and its train
    and test lists, HMDB51's per-class lists); [] for the layouts without folds."""
    if layout not in LISTS:
        return []
    ann = Path(annotations or Path(root) / LISTS[layout])
    return sorted(ann.glob("*.txt")) if layout == "ucf101" else sorted(ann.glob("*_test_split[0-9].txt"))


def list_split(
    layout: str, root: str | Path, split: str, fold: int = 1, annotations: str | Path | None = None
) -> tuple[list[tuple[str, int]], list[str]]:
    """Videos of one split as ([(relative path, label)], class names). Paths are relative to root."""
    root = Path(root)
    if not root.is_dir():  # named as the folder it is, not as the first list file missing in it
        raise FileNotFoundError(f"dataset folder not found: {shown(root)} (--data)")
    if layout == "ucf101":
        ann = Path(annotations or root / LISTS["ucf101"])
        classes = [line.split()[1] for line in _lines(ann / "classInd.txt")]
        name = f"{'train' if split == 'train' else 'test'}list0{fold}.txt"
        items = [(line.split()[0], classes.index(line.split("/")[0])) for line in _lines(ann / name)]
    elif layout == "hmdb51":
        ann = Path(annotations or root / LISTS["hmdb51"])
        files = sorted(ann.glob(f"*_test_split{fold}.txt"))
        if not files:  # a folder of another layout, or the lists elsewhere: name what is missing
            raise FileNotFoundError(
                f"split lists not found: no {ann}/*_test_split{fold}.txt (HMDB51's official lists; "
                f"--annotations names the folder that holds them)"
            )
        classes = [f.name[: -len(f"_test_split{fold}.txt")] for f in files]
        want = "1" if split == "train" else "2"
        items = [
            (f"{c}/{line.split()[0]}", k)
            for k, (c, f) in enumerate(zip(classes, files))
            for line in _lines(f)
            if line.split()[1] == want
        ]
    elif layout == "kinetics":
        split = "val" if split in ("val", "test", "validate") else split
        if annotations:  # the official CSV: label,youtube_id,time_start,time_end,split
            rows = [r for r in csv.DictReader(open(annotations)) if r["split"].replace("validate", "val") == split]
            classes = sorted({r["label"] for r in rows})
            items = [
                (
                    f"{split}/{r['label']}/{r['youtube_id']}_{int(float(r['time_start'])):06d}_"
                    f"{int(float(r['time_end'])):06d}.mp4",
                    classes.index(r["label"]),
                )
                for r in rows
            ]
            items = [it for it in items if (root / it[0]).exists()]
        else:
            classes = class_dirs(root / split)
            items = [(f"{split}/{p}", k) for p, k in class_files(root / split, classes)]
    elif layout == "folder":
        classes = class_dirs(root)
        items = class_files(root, classes)
        lists = {s: root / f"{s}.txt" for s in ("train", "test")}
        if not items:
            return [], classes
        if not any(p.exists() for p in lists.values()):
            raise FileNotFoundError(
                f"{root} has no train.txt or test.txt: python -m tools.scan {root} --split writes a seeded, "
                f"stratified split of its class folders"
            )
        other = "test" if split == "train" else "train"
        if split in lists and lists[split].exists():
            keep = set(_lines(lists[split]))
            items = [it for it in items if it[0] in keep]
        elif lists[other].exists():  # one list given: the split is the rest of the files
            drop = set(_lines(lists[other]))
            items = [it for it in items if it[0] not in drop]
        else:
            raise FileNotFoundError(f"split {split!r}: no {split}.txt under {root}")
    else:
        raise ValueError(f"unknown layout {layout!r}: expected ucf101, hmdb51, kinetics or folder")
    return items, classes


def _lines(path: str | Path) -> list[str]:
    if not Path(path).exists():
        raise FileNotFoundError(f"split file not found: {shown(path)}")
    return [line.strip() for line in open(path) if line.strip()]


def class_dirs(root: str | Path) -> list[str]:
    """Class folders; names starting with '_' or '.' are not classes (the synthetic audio pool)."""
    if not Path(root).is_dir():
        raise FileNotFoundError(f"dataset folder not found: {shown(root)}")
    return sorted(d.name for d in Path(root).iterdir() if d.is_dir() and d.name[0] not in "_.")


def class_files(root: str | Path, classes: list[str]) -> list[tuple[str, int]]:
    """(CLASS/name, label) of the videos in each class folder (the scan names the other files it meets)."""
    return [
        (f"{c}/{f.name}", k)
        for k, c in enumerate(classes)
        for f in sorted((Path(root) / c).iterdir())
        if f.suffix.lower() in VIDEO_EXTENSIONS
    ]


_READ = {}  # manifest path -> ((mtime, size), rows): each manifest is parsed once per process while unchanged


def read_manifest(path: str | Path) -> list[dict[str, str]]:
    """The rows of a manifest CSV, parsed once while the file stays as it is: an evaluation reads its
    train and test splits, and every fold, from one parse (Kinetics-400's manifest has 240,000 rows)."""
    path = Path(path).resolve()
    st = path.stat()
    stamp = (st.st_mtime_ns, st.st_size)
    if _READ.get(path, (None,))[0] != stamp:
        _READ[path] = (stamp, _parse(path))
    return _READ[path][1]


def _parse(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class Split(NamedTuple):
    """One split of a dataset as the manifest has it: the usable records, the class names, and the
    listed videos that are not usable, as (path relative to the root, why)."""

    records: list[Record]
    classes: list[str]
    missing: list[tuple[str, str]]
    manifest: Path


def load_split(
    layout: str,
    root: str | Path,
    split: str,
    fold: int = 1,
    annotations: str | Path | None = None,
    manifest: str | Path | None = None,
    need_audio: bool = True,
) -> Split:
    """Records of a split joined with the manifest (durations, audio), and the videos of the split's
    list that the manifest lacks (or, with need_audio, that have less than one clip's audio). The manifest is
    the scan's (tools/scan.py): a missing one is refused naming the command that makes it."""
    root = Path(root)
    items, classes = list_split(layout, root, split, fold, annotations)
    if not items:
        raise ValueError(
            f"no {split} videos found under {root} (the folder layout is ROOT/CLASS/*.mp4; containers: "
            f"{' '.join(VIDEO_EXTENSIONS)})"
        )
    manifest = Path(manifest or root / "manifest.csv")
    if not manifest.exists():
        only = "" if need_audio else " --video-only"
        out = "" if manifest == root / "manifest.csv" else f" --out {manifest}"
        raise FileNotFoundError(
            f"no manifest {manifest}: python -m tools.scan {root}{only}{out} makes it (it probes every file once)"
        )
    rows = read_manifest(manifest)
    by_path = {r["path"]: r for r in rows}
    truth = {}
    if (root / "ground_truth.csv").exists():
        truth = {r["path"]: r["faulty_audio"] == "1" for r in csv.DictReader(open(root / "ground_truth.csv"))}
    records, missing = [], []
    for path, label in items:
        r = by_path.get(path)
        # a manifest scanned without requiring audio (tools/prepare.py's) lists silent videos too
        silent = r is not None and (str(r["has_audio"]) != "1" or float(r["audio_duration"] or 0) < MIN_AUDIO_SECONDS)
        if r is None or (need_audio and silent):
            missing.append((path, f"not in {manifest}" if r is None else "less than one clip of audio"))
            continue
        records.append(
            Record(
                str(root / path), label, float(r["duration"]), float(r["audio_duration"] or 0), truth.get(path, False)
            )
        )
    if not records:
        raise ValueError(
            f"no usable {split} videos under {root}: {len(items)} listed, none in {manifest}"
            + (" with a clip's audio" if need_audio else "")
            + f"; python -m tools.scan {root} names each file and its reason"
        )
    return Split(records, classes, missing, manifest)


def load_records(
    layout: str,
    root: str | Path,
    split: str,
    fold: int = 1,
    annotations: str | Path | None = None,
    manifest: str | Path | None = None,
    need_audio: bool = True,
) -> tuple[list[Record], list[str]]:
    """load_split's records and classes; the unusable videos are dropped with a note, so the number of
    memory-bank slots always comes from the files that work (training)."""
    got = load_split(layout, root, split, fold, annotations, manifest, need_audio)
    if got.missing:
        print(
            f"data: {len(got.missing)} of {len(got.missing) + len(got.records)} {split} videos under {root} are "
            f"not usable (not in {got.manifest.name}{' or without audio' if need_audio else ''})",
            file=sys.stderr,
        )
    return got.records, got.classes


def audio_pool(folder: str | Path) -> list[tuple[str, float]]:
    """(path, seconds) of every file in `folder` that has an audio stream: replacement audio."""
    pool = []
    for f in sorted(Path(folder).iterdir()):
        if f.suffix.lower() in VIDEO_EXTENSIONS + AUDIO_EXTENSIONS:
            with av.open(str(f)) as c:
                if c.streams.audio:
                    pool.append((str(f), stream_duration(c, c.streams.audio[0])))
    if not pool:
        raise ValueError(f"no audio files in the faulty-positive pool {folder}")
    return pool
