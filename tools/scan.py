"""The scan of a dataset's files, run once before training or evaluation reads the dataset: which files work,
and why each of the others does not (Sec. 5.1's clips need a video stream, 2 s of audio and a readable end).
Its rows make ROOT/manifest.csv, which data.py reads (media/manifest.py); a folder of class folders without
split lists gets its seeded, stratified train.txt and test.txt here too.

    python -m tools.scan ROOT [--out ROOT/manifest.csv] [--video-only] [--jobs N]
    python -m tools.scan ROOT --split [--test-fraction 0.2 --seed 0]   # a folder of class folders without lists

`scan` opens every video once and keeps the usable ones (path, label, duration, fps, size, audio); each
unusable file gets one line with its path and the reason: empty, cannot be opened, no video stream, no audio
stream, shorter than one clip, truncated (--video-only keeps the silent ones: evaluation sets such as UCF101's).
It probes with every core, shows files/s and the time left, and writes each result to OUT.partial as it comes:
a stopped scan resumes without probing a file twice, and the manifest is written atomically at the end.
Tests: tests/test_scan.py, tests/test_data.py
"""

import argparse
import csv
import json
import mimetypes
import multiprocessing
import os
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any, TextIO

import av
import numpy as np
from tqdm import tqdm

from config import shown
from media.manifest import (
    AUDIO_EXTENSIONS,
    MANIFEST_FIELDS,
    MIN_AUDIO_SECONDS,
    MIN_VIDEO_SECONDS,
    VIDEO_EXTENSIONS,
    class_dirs,
    class_files,
    stream_duration,
)

_REPORTED = set()  # files already reported as not usable, so that each is named once per process


def report_unsupported(path: Path, out: TextIO = sys.stderr) -> None:
    """Name a media-looking file that is not read, once, with the reason."""
    mime = mimetypes.guess_type(path.name)[0] or ""
    if path in _REPORTED or not (mime.startswith(("video/", "audio/")) or path.suffix.lower() in AUDIO_EXTENSIONS):
        return
    _REPORTED.add(path)
    what = (
        "audio only, not a video"
        if mime.startswith("audio/") or path.suffix.lower() in AUDIO_EXTENSIONS
        else f"{path.suffix} is not a supported video container ({' '.join(VIDEO_EXTENSIONS)})"
    )
    print(f"data: ignored {path}: {what}; convert it to .mp4 to use it", file=out)


def probe(
    path: str | Path,
    need_audio: bool = True,
    min_video: float = MIN_VIDEO_SECONDS,
    min_audio: float = MIN_AUDIO_SECONDS,
) -> dict[str, Any]:
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
        vs.codec_context.thread_count = 1  # the scan runs a process per core: decoder threads would only compete
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
        return {
            "path": "",
            "label": path.parent.name,
            "duration": f"{duration:.3f}",
            "fps": f"{float(vs.average_rate or 0):.3f}",
            "width": vs.width,
            "height": vs.height,
            "has_audio": int(has_audio),
            "audio_rate": container.streams.audio[0].rate if has_audio else 0,
            "audio_duration": f"{audio_duration:.3f}",
        }


def partial(manifest_path: str | Path) -> Path:
    """Where a scan for MANIFEST_PATH keeps what it has probed so far: MANIFEST_PATH.partial."""
    return Path(f"{manifest_path}.partial")


def _probe_one(job: tuple[Path, str, list[int], bool]) -> tuple[str, list[int], dict | None, str | None]:
    """(relative path, file stamp, manifest row or None, why unusable or None), in a pool process."""
    path, rel, stamp, need_audio = job
    try:
        return rel, stamp, probe(path, need_audio) | {"path": rel}, None
    except (ValueError, OSError) as err:
        return rel, stamp, None, str(err)


def _stamp(path: str | Path) -> list[int]:
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns]


def _read_journal(journal: Path | None, need_audio: bool) -> dict[str, tuple]:
    """{relative path: (stamp, row, why)} from an earlier scan's journal made with the same need_audio;
    a line cut by a kill mid-write is the last one and is dropped."""
    if journal is None or not journal.exists():
        return {}
    done, lines = {}, journal.read_text().splitlines()
    try:
        head = json.loads(lines[0]) if lines else None
    except ValueError:
        head = None
    if not head or head.get("need_audio") != need_audio:
        return {}
    for line in lines[1:]:
        try:
            rel, stamp, row, why = json.loads(line)
        except ValueError:
            continue
        done[rel] = (stamp, row, why)
    return done


def scan(
    root: str | Path,
    files: list[Path] | None = None,
    need_audio: bool = True,
    out: TextIO | None = None,
    jobs: int | None = None,
    journal: Path | None = None,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Probe every video under root (or the given files) with `jobs` processes (default: every core);
    print one line per unusable file. With `journal` (a path), each result is appended there as it
    comes, and the results already there for an unchanged file (same size and mtime) are not probed
    again: a stopped scan resumes. Rows come back sorted by path, whatever the order of the probes."""
    root, out = Path(root), out or sys.stdout  # stdout as it is now (a test may have redirected it)
    if files is None:
        found = [p for p in root.rglob("*") if p.is_file() and not _hidden(p.relative_to(root))]
        for p in found:
            if p.suffix.lower() not in VIDEO_EXTENSIONS:
                report_unsupported(p, out)
        files = [p for p in found if p.suffix.lower() in VIDEO_EXTENSIONS]
    files = sorted(files)
    journal = Path(journal) if journal else None
    done = _read_journal(journal, need_audio)
    todo, results = [], {}
    for f in files:
        rel, stamp = str(Path(f).relative_to(root)), _stamp(f)
        if rel in done and done[rel][0] == stamp:
            results[rel] = done[rel][1:]
        else:
            todo.append((str(f), rel, stamp, need_audio))
    log = None
    if journal is not None:
        fresh = not done
        log = open(journal, "w" if fresh else "a")
        if fresh:
            log.write(json.dumps({"need_audio": need_audio}) + "\n")
        elif not journal.read_bytes().endswith(b"\n"):  # a line cut by a kill: end it, it is dropped when read
            log.write("\n")
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    bar = tqdm(
        total=len(files),
        initial=len(files) - len(todo),
        unit="file",
        desc=f"scan {root}",
        disable=not progress or not todo,
        file=sys.stderr,
        smoothing=0.05,
    )
    # fork where there is one: the probe needs only PyAV, and a forked worker starts in milliseconds
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    try:
        with context.Pool(jobs) if jobs > 1 else nullcontext() as pool:
            chunk = max(1, min(8, len(todo) // (4 * jobs)))  # small chunks for a small folder: every process busy
            probed = pool.imap_unordered(_probe_one, todo, chunksize=chunk) if pool else map(_probe_one, todo)
            for rel, stamp, row, why in probed:
                results[rel] = (row, why)
                if log is not None:
                    log.write(json.dumps([rel, stamp, row, why]) + "\n")
                    log.flush()  # a kill loses at most the line being written
                bar.update()
    finally:
        bar.close()
        if log is not None:
            log.close()
    rows = []
    for rel in sorted(results):
        row, why = results[rel]
        if row is None:
            print(f"unusable: {root / rel}: {why}", file=out)
        else:
            rows.append(row)
    return rows


def _hidden(rel: Path) -> bool:
    return any(part[0] in "_." for part in rel.parts[:-1])


def write_manifest(rows: list[dict[str, Any]], path: str | Path) -> None:
    """Atomically; a temporary name of this process's own, so that two processes scanning one set at once
    (the claims' fine-tunes side by side) each replace the file whole instead of racing for one .tmp."""
    tmp = Path(f"{path}.{os.getpid()}.tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, MANIFEST_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def folder_split(
    root: str | Path, items: list[tuple[str, int]], test_fraction: float = 0.2, seed: int = 0
) -> dict[str, Path]:
    """A seeded split, stratified by class, of a folder dataset that has no split lists: per class,
    round(test_fraction * n) files (at least one when there are two) go to test. Written to ROOT/train.txt
    and ROOT/test.txt; returns {split: path of its list}."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    lists = {"train": [], "test": []}
    for label in sorted({k for _, k in items}):
        paths = sorted(p for p, k in items if k == label)
        n_test = max(1 if len(paths) >= 2 else 0, int(round(test_fraction * len(paths))))
        order = rng.permutation(len(paths))
        lists["test"] += [paths[i] for i in sorted(order[:n_test])]
        lists["train"] += [paths[i] for i in sorted(order[n_test:])]
    out = {}
    for split, paths in lists.items():
        out[split] = root / f"{split}.txt"
        tmp = Path(f"{out[split]}.tmp")
        tmp.write_text("".join(p + "\n" for p in paths))
        os.replace(tmp, out[split])
    print(f"{root}: a seeded, stratified split, {len(lists['train'])} train / {len(lists['test'])} test videos")
    return out


def make_manifest(
    root: str | Path, out: str | Path | None = None, need_audio: bool = True, jobs: int | None = None
) -> list[dict[str, Any]]:
    """scan every video under root and write the manifest (default ROOT/manifest.csv), resumably."""
    out = Path(out or Path(root) / "manifest.csv")
    rows = scan(root, need_audio=need_audio, jobs=jobs, journal=partial(out))
    write_manifest(rows, out)  # atomic; the journal goes only once the manifest is in place
    partial(out).unlink(missing_ok=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="the dataset's folder")
    parser.add_argument("--out", help="manifest CSV to write (default ROOT/manifest.csv)")
    parser.add_argument("--video-only", action="store_true", help="files without audio are usable (evaluation sets)")
    parser.add_argument("--jobs", type=int, default=None, help="processes that probe files (default: every core)")
    parser.add_argument("--split", action="store_true", help="write ROOT/train.txt and test.txt instead of a manifest")
    parser.add_argument("--test-fraction", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    root = Path(args.root)
    if not root.is_dir():
        raise SystemExit(f"tools/scan.py: dataset folder not found: {shown(root)}")
    if args.split:
        if any((root / f"{s}.txt").exists() for s in ("train", "test")):
            raise SystemExit(f"{root} already has split lists; remove them first to make new ones")
        folder_split(root, class_files(root, class_dirs(root)), args.test_fraction, args.seed)
        return
    rows = make_manifest(root, args.out, need_audio=not args.video_only, jobs=args.jobs)
    print(f"{len(rows)} usable videos -> {args.out or root / 'manifest.csv'}")


if __name__ == "__main__":
    main()
