"""Which files make a dataset: layouts, split lists, the manifest of usable files (Sec. 5.1).

    python -m media.manifest scan ROOT --out ROOT/manifest.csv [--video-only] [--jobs N]
    python -m media.manifest split ROOT [--test-fraction 0.2 --seed 0]     # a folder without split lists

`scan` (media/scan.py) opens every video once and keeps the usable ones, naming each other file with
its reason; a missing manifest is made by a scan, one that exists is read (once per process while it
is unchanged: read_manifest). `load_split` joins a layout's split (UCF101, HMDB51, Kinetics-400, or a
plain folder of class folders) with the manifest and names the listed videos it lacks (an evaluation
refuses them: protocols/features.py); `load_records` leaves them out, so the number of memory-bank slots always
comes from the files that work.

Splits cannot leak: a `folder` dataset without train.txt/test.txt gets a seeded, stratified split
written to those files (readable, and the same on every run), never every file in both splits.
Files under a class folder that look like media but are not in VIDEO_EXTENSIONS are reported once,
with the reason. Tests: tests/test_data.py, tests/test_protocols.py
"""

import argparse
import csv
import os
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import av
import numpy as np

from media.scan import (
    AUDIO_EXTENSIONS,
    MIN_AUDIO_SECONDS,
    VIDEO_EXTENSIONS,
    partial,
    probe,
    report_unsupported,
    scan,
    stream_duration,
    write_manifest,
)


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
        raise FileNotFoundError(f"dataset folder not found: {root} (--data)")
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
            classes = _class_dirs(root / split)
            items = [(f"{split}/{p}", k) for p, k in _class_files(root / split, classes)]
    elif layout == "folder":
        classes = _class_dirs(root)
        items = _class_files(root, classes)
        lists = {s: root / f"{s}.txt" for s in ("train", "test")}
        if not items:  # nothing to split: no lists written into a folder that holds no videos
            return [], classes
        if not any(p.exists() for p in lists.values()):
            lists = folder_split(root, items)
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
        raise FileNotFoundError(f"split file not found: {path}")
    return [line.strip() for line in open(path) if line.strip()]


def _class_dirs(root: str | Path) -> list[str]:
    """Class folders; names starting with '_' or '.' are not classes (the synthetic audio pool)."""
    if not Path(root).is_dir():
        raise FileNotFoundError(f"dataset folder not found: {root}")
    return sorted(d.name for d in Path(root).iterdir() if d.is_dir() and d.name[0] not in "_.")


def _class_files(root: str | Path, classes: list[str]) -> list[tuple[str, int]]:
    items = []
    for k, c in enumerate(classes):
        for f in sorted((Path(root) / c).iterdir()):
            if f.suffix.lower() in VIDEO_EXTENSIONS:
                items.append((f"{c}/{f.name}", k))
            elif f.is_file():
                report_unsupported(f)
    return items


def folder_split(
    root: str | Path, items: list[tuple[str, int]], test_fraction: float = 0.2, seed: int = 0
) -> dict[str, Path]:
    """A seeded split, stratified by class, of a folder dataset that has no split lists: per class,
    round(test_fraction * n) files (at least one when there are two) go to test. Written to
    ROOT/train.txt and ROOT/test.txt when ROOT is writable, else kept in memory (with a warning).
    Returns {split: path of its list} (a temporary folder's when ROOT is read-only)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    lists = {"train": [], "test": []}
    for label in sorted({k for _, k in items}):
        paths = sorted(p for p, k in items if k == label)
        n_test = max(1 if len(paths) >= 2 else 0, int(round(test_fraction * len(paths))))
        order = rng.permutation(len(paths))
        lists["test"] += [paths[i] for i in sorted(order[:n_test])]
        lists["train"] += [paths[i] for i in sorted(order[n_test:])]
    where = root
    if not os.access(root, os.W_OK):
        import tempfile

        where = Path(tempfile.mkdtemp(prefix="split_"))
        print(
            f"data: {root} has no train.txt/test.txt and is read-only: using a seeded split kept in {where}",
            file=sys.stderr,
        )
    else:
        print(
            f"data: {root} had no train.txt/test.txt: wrote a seeded, stratified split "
            f"({len(lists['train'])} train / {len(lists['test'])} test videos)",
            file=sys.stderr,
        )
    out = {}
    for split, paths in lists.items():
        out[split] = where / f"{split}.txt"
        tmp = Path(f"{out[split]}.tmp")
        tmp.write_text("".join(p + "\n" for p in paths))
        os.replace(tmp, out[split])
    return out


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
    list that the manifest lacks (or, with need_audio, that have less than one clip's audio). A missing
    manifest is made by scanning (and saved as ROOT/manifest.csv when ROOT is writable); one that
    exists is read, never rebuilt."""
    root = Path(root)
    items, classes = list_split(layout, root, split, fold, annotations)
    if not items:  # before any scan: a folder that yields no videos gets no manifest written into it
        raise ValueError(no_usable_files(root, split, items, {}, need_audio))
    manifest = Path(manifest or root / "manifest.csv")
    if not manifest.exists():  # scan every file under root, so that one manifest serves every split
        writable = os.access(manifest.parent, os.W_OK)
        # every video, silent ones too: the manifest serves every later call, and an evaluation split
        # must stay whole (a caller that needs audio filters the rows below, as for a manifest read)
        rows = scan(root, need_audio=False, journal=partial(manifest) if writable else None)
        if writable:
            write_manifest(rows, manifest)
            partial(manifest).unlink(missing_ok=True)
    else:
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
        raise ValueError(no_usable_files(root, split, items, by_path, need_audio))
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


def no_usable_files(
    root: str | Path, split: str, items: list[tuple[str, int]], by_path: dict[str, dict], need_audio: bool = True
) -> str:
    """One line for a split with no usable video: how many files it lists, how many fail for each
    reason (probed again here, the failure path only), and the command that names each file."""
    root = Path(root)
    if not items:
        return (
            f"no {split} videos found under {root} (the folder layout is ROOT/CLASS/*.mp4; containers: "
            f"{' '.join(VIDEO_EXTENSIONS)})"
        )
    reasons = Counter()
    for path, _ in items:
        row = by_path.get(path)
        if row is not None:  # in the manifest, so only its audio is missing
            reasons["no audio stream"] += 1
            continue
        try:
            probe(root / path, need_audio)
            reasons["not in the manifest (rescan)"] += 1
        except (ValueError, OSError) as err:
            reasons[str(err).split(" (")[0].split(":")[0]] += 1
    counts = ", ".join(f"{n} {why}" for why, n in reasons.most_common())
    return (
        f"no usable {split} videos under {root}: {len(items)} found, {sum(reasons.values())} unusable ({counts}); "
        f"python -m media.manifest scan {root} names each file and its reason"
    )


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("scan", help="write a manifest of the usable videos under ROOT")
    p.add_argument("root")
    p.add_argument("--out", help="manifest CSV to write (default ROOT/manifest.csv)")
    p.add_argument("--video-only", action="store_true", help="files without audio are usable (evaluation sets)")
    p.add_argument("--jobs", type=int, default=None, help="processes that probe files (default: every core)")
    p = sub.add_parser("split", help="write a seeded, stratified train.txt/test.txt for a folder of class folders")
    p.add_argument("root")
    p.add_argument("--test-fraction", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.cmd == "scan":
        if not Path(args.root).is_dir():
            raise SystemExit(f"media/manifest.py scan: dataset folder not found: {args.root}")
        out = Path(args.out or Path(args.root) / "manifest.csv")
        rows = scan(args.root, need_audio=not args.video_only, jobs=args.jobs, journal=partial(out))
        write_manifest(rows, out)  # atomic; the journal goes only once the manifest is in place
        partial(out).unlink(missing_ok=True)
        print(f"{len(rows)} usable videos -> {out}")
    else:
        root = Path(args.root)
        if any((root / f"{s}.txt").exists() for s in ("train", "test")):
            raise SystemExit(f"{root} already has split lists; remove them first to make new ones")
        folder_split(root, _class_files(root, _class_dirs(root)), args.test_fraction, args.seed)


if __name__ == "__main__":
    main()
