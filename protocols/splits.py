"""An evaluation set's train and test splits, resolved once and handed to every protocol (paper Sec. 5.1:
retrieval, few-shot and fine-tuning on UCF101 / HMDB51 folds, or any set of the same layouts).

    resolve        both splits as the manifest has them (media/manifest.load_split), in one value: the
                   usable records and classes, the listed videos that are not usable, which lists they
                   came from (`identity`) and a digest of the videos used (`used`). A split that lost a
                   listed video stops the evaluation in one line naming the count, the first file and
                   the scan command (MissingVideos), unless allowed; a test split that shares a file with
                   the train split is refused (check_disjoint)
    check_disjoint two sets (record lists or datasets) that share a video file are refused: retrieval would
                   find every query itself, a fine-tune would test on what it trained on

The feature cache, retrieval, few-shot, analysis, fine-tune and export read the records they are given;
none goes back to the manifest, so one evaluation sees one version of the lists and of the usable files.

    used by evaluate.py and protocols/; tests: python -m pytest tests/test_evaluate.py tests/test_eval_records.py
"""

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import data
from config import Config
from media import manifest

FOLDED = ("ucf101", "hmdb51")  # the layouts with official folds 1-3


class MissingVideos(ValueError):
    """An evaluation split lost videos its official list holds; the message names them and the fix."""


def fold_of(cfg: Config) -> int | None:
    return cfg.fold if cfg.layout in FOLDED else None


class EvalSplits(NamedTuple):
    """The train and test splits one evaluation runs on. identity: {"annotations": the --annotations folder
    (None: the layout's own place), "lists": a digest of what the lists say}; used: a digest of the videos
    each split uses (what a fine-tune's result depends on, where files went missing or came back)."""

    train: manifest.Split
    test: manifest.Split
    identity: dict[str, Any]
    used: str

    def __getitem__(self, name: str | int) -> Any:  # splits["train"], as the records read them
        return getattr(self, name) if isinstance(name, str) else tuple.__getitem__(self, name)

    def items(self) -> list[tuple[str, manifest.Split]]:
        return [("train", self.train), ("test", self.test)]

    def videos(self) -> dict[str, Any]:
        """What a record keeps of the splits: videos used and missing, the missing test videos by name."""
        out = {s: {"used": len(g.records), "missing": len(g.missing)} for s, g in self.items()}
        out["test"]["missing_files"] = [path for path, _ in self.test.missing]
        return out

    def heard(self, name: str) -> list[manifest.Record]:
        """The records of split `name` with at least one clip of audio (what --modality audio reads)."""
        return [r for r in self[name].records if r.audio_duration >= manifest.MIN_AUDIO_SECONDS]


def resolve(cfg: Config, need_audio: bool = False, allow_missing: bool = False) -> EvalSplits:
    """The train and test splits of cfg's evaluation set, checked. need_audio (--modality audio) counts the
    videos without a clip of audio as missing too."""
    splits = {s: data.split_records(cfg, s, need_audio) for s in ("train", "test")}
    lost = {s: got for s, got in splits.items() if got.missing}
    if lost and not allow_missing:
        counts = " and ".join(f"{len(g.missing)} of {len(g.missing) + len(g.records)} {s}" for s, g in lost.items())
        split, got = next(iter(lost.items()))
        path, why = got.missing[0]
        where = f"{cfg.layout}{f' fold {cfg.fold}' if fold_of(cfg) else ''} under {cfg.data}"
        silent = all(why.startswith("less than") for g in lost.values() for _, why in g.missing)
        fix = (
            "--modality audio needs a clip of audio"
            if silent
            else f".venv/bin/python -m tools.scan {cfg.data} --video-only --out {got.manifest} rescans, "
            f"keeping silent videos and naming each unusable file and its reason"
        )
        raise MissingVideos(
            f"{counts} videos of {where} are not usable (first, of the {split} split: {path}: {why}), so this "
            f"is not the official split: {fix}; --allow-missing evaluates without them and records the count"
        )
    check_disjoint(splits["test"].records, splits["train"].records, "the test and train splits")
    used = json.dumps([[r.path for r in splits[s].records] for s in ("train", "test")])
    return EvalSplits(
        splits["train"], splits["test"], identity(cfg, splits), hashlib.sha1(used.encode()).hexdigest()[:12]
    )


def identity(cfg: Config, splits: dict[str, manifest.Split]) -> dict[str, Any]:
    """The split lists an evaluation ran on: where from (--annotations, resolved; None for the layout's own
    place) and a digest of what they say, the same for every fold of one definition: of the list files of
    all folds (UCF101, HMDB51), else of the class names and each split's videos and labels (relative
    paths; the listed ones missing too), whichever manifest made them usable."""
    files = manifest.split_lists(cfg.layout, cfg.data, cfg.annotations or None)
    if files:
        text = json.dumps([[f.name, f.read_text()] for f in files])
    else:
        root = Path(cfg.data)
        listed = {
            s: sorted([str(Path(r.path).relative_to(root)), r.label] for r in g.records)
            + sorted(p for p, _ in g.missing)
            for s, g in splits.items()
        }
        text = json.dumps([splits["test"].classes, listed], sort_keys=True)
    ann = str(Path(cfg.annotations).resolve()) if cfg.annotations else None
    return {"annotations": ann, "lists": hashlib.sha1(text.encode()).hexdigest()[:12]}


def check_disjoint(query: Iterable[Any], gallery: Iterable[Any], what: str = "query and gallery") -> None:
    """Refuse an evaluation whose two sets (datasets or record lists) share a video file: it would
    find every query itself."""
    paths = [{r.path for r in getattr(s, "records", s)} for s in (query, gallery)]
    shared = sorted(paths[0] & paths[1])
    if shared:
        raise ValueError(
            f"{what} share {len(shared)} video file(s), e.g. {shared[0]}: the split leaks. Give the "
            f"dataset disjoint train.txt/test.txt lists (python -m tools.scan ROOT --split makes them)"
        )
