"""Evaluation records: what evaluate.py measured on a checkpoint, kept beside it in CKPT_DIR/eval.json,
one record per (checkpoint file, its epoch and content digest, task, dataset, layout, fold, split lists,
protocol options), so that HMDB51 after UCF101, fold 2 after fold 1, a later epoch saved as the same
ckpt.pt, or a split of one's own (--annotations) adds a record instead of replacing one (the rows of the
paper's Tables 1-5, Sec. 5.1 and Sec. 6, are read from them: analysis/report.py).

    record   one measurement: the task, the checkpoint file, its epoch and digest, the dataset's path,
             layout and fold, the split lists (where from, and a digest of what they list), the protocol
             it ran (its text and options), the numbers, and the videos of each split used and missing
    key      what identifies a record; a new measurement under the same key replaces the old one
    load     the records of an eval.json; a file written before records were keyed (one entry per task)
             is read as legacy records, whose dataset and fold are not known; a file that is not a records
             file raises RecordsError naming it, one of a format this version does not know UnknownFormat
    add      merge records into eval.json: under a lock of its own (evaluations of the same folder wait
             for each other, never for a run training there), written atomically; an unreadable eval.json
             is named in one line and set aside as eval.json.corrupt-TIME, never read or lost; one of an
             unknown format is refused in one line and left as it is

    .venv/bin/python evaluate.py report CKPT      # prints a checkpoint's records as the paper's table rows

Tests: tests/test_eval_records.py
"""

import fcntl
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import checkpoint

FORMAT = 2  # 1: {task: results with their protocol}, as evaluate.py wrote before records were keyed
NAME = "eval.json"
ANALYSIS_PARTS = ("weights", "soft_targets_same_class", "per_class_R@1")  # the analysis task's results
DERIVED = ("text", "feature_dim", "capped")  # words, what the network and the data give: not options
LEGACY = "written before records were keyed: the dataset, layout and fold it ran on were not recorded"


def record(
    task: str,
    ckpt: str | Path,
    epoch: int | None,
    data: str | Path,
    layout: str,
    fold: int | None,
    protocol: dict[str, Any],
    results: dict[str, Any],
    videos: dict[str, Any] | None,
    digest: str | None = None,
    splits: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One measurement. `fold` is None for layouts without folds; `videos` maps each split to
    {"used": n, "missing": n} and the test split also to "missing_files"; `digest` names the checkpoint's
    content (protocols/features.read_pretrained), `splits` the split lists ({"annotations": path or None, "lists":
    digest of what they list}: protocols/splits.py, identity)."""
    return {
        "task": task,
        "checkpoint": Path(ckpt).name,
        "checkpoint_epoch": epoch,
        "checkpoint_digest": digest,
        "dataset": str(Path(data).resolve()),
        "layout": layout,
        "fold": fold,
        "splits": splits,
        "protocol": protocol,
        "results": results,
        "videos": videos,
        "written": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def options(rec: dict[str, Any]) -> dict[str, Any]:
    """The protocol's settings, without its words and what the network gives."""
    return {k: v for k, v in rec["protocol"].items() if k not in DERIVED}


def key(rec: dict[str, Any]) -> str:
    fields = [rec.get(k) for k in ("checkpoint", "checkpoint_epoch", "checkpoint_digest", "task", "dataset")]
    return json.dumps([*fields, rec["layout"], rec["fold"], rec.get("splits"), options(rec)], sort_keys=True)


def version(rec: dict[str, Any]) -> tuple[int, str]:
    """Which version of its checkpoint file a record measured: (epoch, digest), -1 and '' where unknown."""
    epoch, digest = rec.get("checkpoint_epoch"), rec.get("checkpoint_digest")
    return (-1 if epoch is None else epoch, digest or "")


def legacy(old: dict[str, Any]) -> list[dict[str, Any]]:
    """Records from a format-1 eval.json, {task: results with "protocol"}; the analysis task's results
    lay beside it at the top."""
    out = []
    for task, res in old.items():
        if task in ANALYSIS_PARTS or not isinstance(res, dict):
            continue
        res = dict(res)
        protocol = res.pop("protocol", {"text": "not recorded"})
        if task == "analysis":
            res.update({k: old[k] for k in ANALYSIS_PARTS if k in old})
        out.append(
            {
                "task": task,
                **dict.fromkeys(
                    ("checkpoint", "checkpoint_epoch", "checkpoint_digest", "dataset", "layout", "fold", "splits")
                ),
                "protocol": protocol,
                "results": res,
                "videos": None,
                "written": None,
                "legacy": LEGACY,
            }
        )
    return out


class RecordsError(ValueError):
    """An eval.json that is not a records file (truncated, edited, another program's); names it."""


class UnknownFormat(RecordsError):
    """An eval.json of a format this version does not read (a newer evaluate.py's): refused, not set aside."""


def load(path: str | Path) -> list[dict[str, Any]]:
    """The records of an eval.json (none if there is no file), legacy ones first. A file that does not
    read as records raises RecordsError naming it; one of an unknown format, UnknownFormat."""
    path = Path(path)
    if not path.exists():
        return []
    try:
        text = json.loads(path.read_text())
        # format 1 had no "format" key; any other value is a format this version does not know
        found = text.get("format", FORMAT) if isinstance(text, dict) else FORMAT
        recs = [] if found != FORMAT else text["records"] if "format" in text else legacy(text)
        if not all(isinstance(r, dict) and {"task", "protocol", "results"} <= set(r) for r in recs):
            raise ValueError("a record without its task, protocol or results")
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as err:
        raise RecordsError(f"{path} is not an evaluation records file ({type(err).__name__}: {err})") from None
    if found != FORMAT:  # read as legacy, it would be emptied by the next add
        raise UnknownFormat(
            f"{path}: records of format {found!r}, not {FORMAT} (a newer evaluate.py's?); refusing to read or "
            "replace it: evaluate with that version, or move the file aside"
        )
    return recs


def set_aside(path: Path, err: RecordsError) -> None:
    """Move an unreadable eval.json out of the way, naming it and where it went in one line."""
    aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    os.replace(path, aside)
    print(f"evaluate.py: {err}; set it aside as {aside.name}, unread, and started a new one", file=sys.stderr)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """The eval.json of a folder for one writer at a time: a POSIX lock on EVAL.lock, waited for (an
    evaluation holds it only to merge and write), gone with the process however it ends. Not the
    run's lock (checkpoint.py): evaluation does not write what training writes."""
    fd = os.open(Path(f"{path}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def add(path: str | Path, new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge `new` into the eval.json at `path`: a record under a key already there replaces it, the rest
    are kept (an older file's legacy records too, in the new format). Returns every record."""
    path = Path(path)
    with _locked(path):
        try:
            old = load(path)
        except UnknownFormat:
            raise
        except RecordsError as err:
            set_aside(path, err)
            old = []
        merged = {key(r): r for r in old}
        merged.update({key(r): r for r in new})
        records = list(merged.values())
        text = json.dumps({"format": FORMAT, "records": records}, indent=1)
        write_atomically(path, lambda f: f.write(text.encode()))
    return records


def of_checkpoint(records: list[dict[str, Any]], ckpt: str | Path) -> list[dict[str, Any]]:
    """The records of one checkpoint file, with the legacy ones of its folder (whose checkpoint is unknown)."""
    return [r for r in records if r["checkpoint"] in (Path(ckpt).name, None)]


def write_atomically(path: str | Path, write: Callable[[BinaryIO], None]) -> None:
    """PATH whole or not at all: `write` fills a temporary file of this process's, synced and renamed onto PATH
    (evaluation's caches and records, which another process may be reading)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def held_by(out: str | Path) -> str | None:
    """Who else holds OUT now (checkpoint.hold_folder), or None: evaluate.py says so and reads the checkpoint as it is.
    This process's own hold is not tested (closing a second descriptor would release it)."""
    path = (Path(out) / checkpoint.LOCK_NAME).resolve()
    if path in checkpoint._HELD or not path.exists():
        return None
    fd = os.open(path, os.O_RDWR)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return checkpoint._holder(os.read(fd, 4096).decode(errors="replace"))
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
