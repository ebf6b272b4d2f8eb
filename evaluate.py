"""Downstream evaluation of a pre-trained encoder by the paper's protocols (Sec. 5.1, Sec. 6).

    retrieval  the last conv map (4x4x512 at 112x112) averaged over 10 clips per video; test videos query the
               train split by Euclidean distance (Fig. 11); R@k: one of the k nearest shares the class
    fewshot    max-pooled features averaged over 10 clips; a one-vs-all linear SVM (C=1) on the raw features of
               n train videos per class, top-1 on the test split, mean +- SD over 50 seeded trials
    finetune   the video encoder, dropout and a linear layer trained on the whole train split (finetune.py)

Deviations are named options, off by default. Each task's numbers and protocol are a record of CKPT_DIR/eval.json
keyed by the checkpoint's epoch and digest, dataset, layout, fold, split lists and protocol; evaluation writes only
its own files, so a run training there goes on. tools/analyse.py: the weights' analysis, features, the tables.

    .venv/bin/python evaluate.py all runs/demo/robust/ckpt.pt         # on the data it was trained on
    .venv/bin/python evaluate.py retrieval CKPT --data UCF101 --layout ucf101 --fold 1 2 3
"""

import copy
import fcntl
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import numpy as np
import torch
from torch import Tensor

import augment
import checkpoint
import config
import data
import finetune
from config import Config, OneLineParser, at_least, one_of, shown
from data import loader, workers_per_process
from finetune import progress
from media import manifest
from model import AVModel

CLIPS = 10  # clips per video averaged for retrieval and few-shot (Sec. 5.1, Sec. 6)
FOLDED = ("ucf101", "hmdb51")  # the layouts with official folds 1-3
SPLITS = ("train", "test")
NAME, FORMAT = "eval.json", 2  # the records beside a checkpoint, and their format
DERIVED = ("text", "feature_dim", "capped")  # a protocol's words and what the data gives: not its options


class Pretrained(NamedTuple):
    """A checkpoint as read; `bank` is its memory bank's state, `digest` names the bytes read (12 hex digits)."""

    path: str
    cfg: Config
    model: torch.nn.Module
    bank: dict[str, Tensor]
    instances: dict[str, Any] | None
    epoch: int
    digest: str


def read_pretrained(path: str | Path) -> Pretrained:
    """The checkpoint, read once into memory: a run that renames a new one onto it leaves this read whole."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"checkpoint not found: {shown(path)}")
    raw = Path(path).read_bytes()
    state = checkpoint.load_checkpoint(path, raw)
    cfg = checkpoint.config_from_dict(state["config"], source=str(path))
    model = AVModel(**{k: v for k, v in state["model_args"].items() if (k, v) != ("head", "mlp")})  # retired
    model.load_state_dict(state["model"])
    return Pretrained(
        str(path), cfg, model, state["bank"], state["instances"], state["epoch"], hashlib.sha1(raw).hexdigest()[:12]
    )


class EvalSplits(NamedTuple):
    """The splits one evaluation runs on (none goes back to the manifest); a digest of their lists, of their videos."""

    train: manifest.Split
    test: manifest.Split
    identity: dict[str, Any]
    used: str


def fold_of(cfg: Config) -> int | None:
    return cfg.fold if cfg.layout in FOLDED else None


def resolve(cfg: Config, need_audio: bool = False, allow_missing: bool = False) -> EvalSplits:
    """Both splits of cfg's evaluation set, checked; need_audio (--modality audio) counts a silent video missing."""
    splits = {s: data.split_records(cfg, s, need_audio) for s in ("train", "test")}
    lost = {s: got for s, got in splits.items() if got.missing}
    if lost and not allow_missing:
        counts = " and ".join(f"{len(g.missing)} of {len(g.missing) + len(g.records)} {s}" for s, g in lost.items())
        (split, got), where = next(iter(lost.items())), f"{cfg.layout}{f' fold {cfg.fold}' if fold_of(cfg) else ''}"
        fix = f".venv/bin/python -m tools.scan {cfg.data} --video-only --out {got.manifest} rescans, "
        fix += "keeping silent videos and naming each unusable file and its reason"
        if all(why.startswith("less than") for g in lost.values() for _, why in g.missing):
            fix = "--modality audio needs a clip of audio"
        raise ValueError(
            f"{counts} videos of {where} under {cfg.data} are not usable (first, of the {split} split: "
            f"{': '.join(got.missing[0])}), so this is not the official split: {fix}; --allow-missing evaluates "
            "without them and records the count"
        )
    if shared := sorted({r.path for r in splits["test"].records} & {r.path for r in splits["train"].records}):
        raise ValueError(  # a query would find itself
            f"the test and train splits share {len(shared)} video file(s), e.g. {shared[0]}: the split leaks. Give "
            "the dataset disjoint train.txt/test.txt lists (python -m tools.scan ROOT --split makes them)"
        )
    files = manifest.split_lists(cfg.layout, cfg.data, cfg.annotations or None)
    if files:  # one definition's digest, the same for each of its folds: its files, else the videos it lists
        lists = [[f.name, f.read_text()] for f in files]
    else:
        rel = {
            s: sorted([str(Path(r.path).relative_to(cfg.data)), r.label] for r in g.records) for s, g in splits.items()
        }
        listed = {s: rel[s] + sorted(p for p, _ in g.missing) for s, g in splits.items()}
        lists = [splits["test"].classes, listed]
    ann = str(Path(cfg.annotations).resolve()) if cfg.annotations else None
    used = [[r.path for r in splits[s].records] for s in SPLITS]
    lists, used = (hashlib.sha1(json.dumps(x, sort_keys=True).encode()).hexdigest()[:12] for x in (lists, used))
    return EvalSplits(splits["train"], splits["test"], {"annotations": ann, "lists": lists}, used)


@torch.no_grad()
def extract_features(
    encoder: torch.nn.Module, dataset: data.AVDataset, device: torch.device, workers: int = 2, modality: str = "video"
) -> dict[str, Tensor]:
    """Per video, 8 at a time, averaged over its clips: `fmap` the last conv map (retrieval), `pooled` its max, and
    `labels`. Away from 112x112 the map is the network's own: resampled to 4x4 it would weight the centre more."""
    encoder.eval().to(device)
    logmel = augment.LogMel(dataset.spec).to(device) if modality == "audio" else None
    fmaps, pooled, labels = [], [], []
    for batch in progress(loader(dataset, 8, workers), f"{modality} features ({len(dataset)} videos)"):
        x = augment.normalise(batch["video"].to(device)) if logmel is None else logmel(batch["audio"].to(device))
        fm = encoder.feature_map(x.flatten(0, 1)).float()  # x: (B, clips, 3, T, H, W) or (B, clips, 1, mels, time)
        fm = fm.mean(2) if logmel is None else fm  # (B*clips, 512, h, w): the video map's time axis is 1 frame
        fmaps.append(fm.flatten(1).view(*x.shape[:2], -1).mean(1).cpu())  # (B, 512*h*w)
        pooled.append(torch.amax(fm, dim=(2, 3)).view(*x.shape[:2], -1).mean(1).cpu())  # (B, 512)
        labels.append(batch["label"])
    return {"fmap": torch.cat(fmaps), "pooled": torch.cat(pooled), "labels": torch.cat(labels)}


def version_file(kind: str, ckpt: str | Path, version: str, key: str, tail: str = "") -> Path:
    """KIND_CKPTSTEM_VERSION_KEY + TAIL beside CKPT (appended: with_suffix would cut a dotted stem's key away)."""
    name = f"{kind}_{Path(ckpt).stem}_{version[:8]}_{hashlib.sha1(key.encode()).hexdigest()[:10]}{tail}"
    return Path(ckpt).parent / name


def prune_caches(ckpt: str | Path, version: str) -> list[Path]:
    """Remove the feature caches and unfinished fine-tunes of other versions of CKPT's file (not another file's)."""
    tail = r"_([0-9a-f]{8})_[0-9a-f]{10}(\.train|\.test)?\.pt(\.prev)?"
    mine = re.compile(rf"(features|finetune)_{re.escape(Path(ckpt).stem)}{tail}")
    gone = [p for p in sorted(Path(ckpt).parent.glob("*.pt*")) if (m := mine.fullmatch(p.name)) and m[2] != version[:8]]
    for path in gone:
        path.unlink(missing_ok=True)
    return gone


def cached_features(
    pre: Pretrained, split: str, records: list, device: torch.device, workers: int, clips: int, modality: str
) -> dict[str, Tensor]:
    """extract_features of `records`, kept beside the checkpoint under a key of its version, settings and files."""
    cfg, audio = pre.cfg, modality == "audio"
    key = [str(Path(pre.path).resolve()), pre.digest, cfg.data, cfg.layout, cfg.fold, split, cfg.frames, cfg.fps]
    key += [cfg.size, "native-map", *([clips] if clips != CLIPS else [])]  # the paper's 10 keep their caches' key
    key += [*(["audio", cfg.audio_rate, cfg.n_mels, cfg.n_time] if audio else []), [r.path for r in records]]
    path = version_file("features", pre.path, pre.digest, json.dumps(key), f".{split}.pt")
    if path.exists():
        return torch.load(path, weights_only=True)
    dataset = data.eval_set(cfg, records, num_clips=clips, audio=audio)
    feats = extract_features(pre.model.audio if audio else pre.model.video, dataset, device, workers, modality)
    write_atomically(path, lambda f: torch.save(feats, f))
    return feats


def recall_at_k(
    query: Tensor, labels: Tensor, gallery: Tensor, g_labels: Tensor, device: torch.device, ks: tuple = (1, 5, 20)
) -> tuple[dict[int, float], Tensor]:
    """R@k by Euclidean distance (Fig. 11), 1024 queries at a time; and each query's nearest max(ks), nearest first."""
    g, gl = gallery.float().to(device), g_labels.to(device)  # (G, F), (G,)
    hits, nearest = [], []
    for q, ql in zip(query.split(1024), labels.split(1024)):
        top = torch.cdist(q.float().to(device), g).topk(min(max(ks), len(g)), dim=1, largest=False).indices
        hits.append((gl[top] == ql.to(device)[:, None]).cpu())  # (Q, k)
        nearest.append(top.cpu())
    return {k: float(torch.cat(hits)[:, :k].any(1).float().mean()) for k in ks}, torch.cat(nearest)


def few_shot(
    x: Any, y: Any, test_x: Any, test_y: Any, shots: Sequence, trials: int, standardise: bool = False, jobs: int = 1
) -> dict[int, tuple[float, float]]:
    """{n: (mean, SD) top-1} over trials that each draw n train videos per class by their own seed, which seeds
    the SVM too: a trial fits the same in any process and order. jobs > 1: processes, since liblinear's one global
    generator would race in threads; they are sent the estimator and its sample, not this file (torch, PyAV)."""
    from joblib import Parallel, delayed
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    x, y, test_x, test_y = (np.asarray(t) for t in (x, y, test_x, test_y))
    by_class, out = [np.flatnonzero(y == c) for c in np.unique(y)], {}
    for n in shots:
        fits = []
        for trial in range(trials):
            rng = np.random.default_rng(trial)
            pick = np.concatenate([rng.choice(i, min(n, len(i)), replace=False) for i in by_class])  # (n * classes,)
            svm = LinearSVC(C=1.0, multi_class="ovr", max_iter=10000, random_state=trial)
            svm = make_pipeline(StandardScaler(), svm) if standardise else svm  # the sample's statistics
            fits.append(delayed(svm.fit)(x[pick], y[pick]))
        fitted = Parallel(n_jobs=min(jobs, trials))(fits) if min(jobs, trials) > 1 else [f(*a) for f, a, _ in fits]
        accs = [float((svm.predict(test_x) == test_y).mean()) for svm in fitted]  # (trials,)
        out[n] = (float(np.mean(accs)), float(np.std(accs)))
    return out


def protocol(task: str, clips: int, modality: str, **settings: Any) -> dict[str, Any]:
    """Retrieval's or few-shot's protocol in words and settings; clips and modality kept only when not the paper's."""
    audio, over = modality == "audio", "10 clips" if clips == CLIPS else f"{clips} clips (the paper's: 10)"
    words = "the audio encoder's 2-s log-mel clips (not the paper's): " if audio else ""
    if task == "retrieval":
        paper = "" if audio else "; the paper's is 4x4x512 at 112x112"
        words += f"last conv map ({settings['feature_dim']} values{paper}) averaged over {over}, "
        words += "Euclidean distance, test queries the train split"
    else:
        words += f"max-pooled features averaged over {over}, one-vs-all linear SVM C=1, {settings['trials']} trials"
        words += ", standardised (not the paper's)" if settings["standardise"] else ", raw"
        for n, c in settings.get("capped", {}).items():
            words += f"; {n}-shot capped at {c}, the fewest train videos of a class"
    named = ({} if clips == CLIPS else {"clips": clips}) | ({"modality": modality} if audio else {})
    return {"text": words, **settings, **named}


def record(task: str, pre: Pretrained, splits: EvalSplits, results: dict[str, Any]) -> dict[str, Any]:
    """One task's results and protocol, with the checkpoint version, evaluation set and videos they come from."""
    videos = {s: {"used": len(g.records), "missing": len(g.missing)} for s, g in zip(SPLITS, splits)}
    videos["test"]["missing_files"] = [path for path, _ in splits.test.missing]
    rec = {
        "task": task,
        "checkpoint": Path(pre.path).name,
        "checkpoint_epoch": pre.epoch,
        "checkpoint_digest": pre.digest,
    }
    rec |= {"dataset": str(Path(pre.cfg.data).resolve()), "layout": pre.cfg.layout, "fold": fold_of(pre.cfg)}
    rec |= {"splits": splits.identity, "protocol": results["protocol"]}
    rec["results"] = {k: v for k, v in results.items() if k != "protocol"}
    return rec | {"videos": videos, "written": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def key(rec: dict[str, Any]) -> str:
    """What identifies a record: a new measurement under the same key replaces the old one."""
    fields = ("checkpoint", "checkpoint_epoch", "checkpoint_digest", "task", "dataset", "layout", "fold", "splits")
    options = {k: v for k, v in rec["protocol"].items() if k not in DERIVED}  # its settings, not its words
    return json.dumps([*(rec[k] for k in fields), options], sort_keys=True)


def load(path: str | Path) -> list[dict[str, Any]]:
    """The records of an eval.json, none if there is none; a ValueError names a file that is not one of FORMAT's."""
    if not Path(path).exists():
        return []
    try:
        text = json.loads(Path(path).read_text())
        if text["format"] != FORMAT or not all({"task", "protocol", "results"} <= set(r) for r in text["records"]):
            raise ValueError(f"format {text['format']!r}, not {FORMAT}, or a record without its task or results")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not an evaluation records file ({type(err).__name__}: {err})") from None
    return text["records"]


def add(path: str | Path, new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge `new` into the eval.json at `path`, replacing records of the same key, under a POSIX lock of its own
    (never the run's: evaluation does not wait for training). One that does not read is set aside, never lost."""
    path = Path(path)
    try:
        with open(f"{path}.lock", "a") as lock:
            fcntl.lockf(lock, fcntl.LOCK_EX)  # waited for; released with the file, however the process ends
            try:
                old = load(path)
            except ValueError as err:
                aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
                os.replace(path, aside)
                print(f"evaluate.py: {err}; set it aside as {aside.name}, unread, and started anew", file=sys.stderr)
                old = []
            records = list(({key(r): r for r in old} | {key(r): r for r in new}).values())
            text = json.dumps({"format": FORMAT, "records": records}, indent=1).encode()
            write_atomically(path, lambda f: f.write(text))
    except OSError as err:  # a full disk, no permission; a fine-tune's result stays in its own file, not retrained
        raise SystemExit(f"evaluate.py: could not write {path} ({err}); rerunning the command records it") from None
    return records


def write_atomically(path: str | Path, write: Callable[[BinaryIO], Any]) -> None:
    """PATH whole or not at all (another evaluation may read it): `write` fills a file of ours, renamed onto PATH."""
    tmp = Path(path).with_name(f".{Path(path).name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def evaluate(
    ckpt: str | Path,
    tasks: list[str],
    overrides: dict[str, Any] | None = None,
    workers: int = 2,
    device: torch.device | None = None,
    shots: Sequence[int] = (1, 5, 20),
    trials: int = 50,
    standardise: bool = False,
    finetune_args: dict[str, Any] | None = None,
    jobs: int | None = None,
    clips: int = CLIPS,
    modality: str = "video",
    allow_missing: bool = False,
    keep_cache: bool = False,
    pre: Pretrained | None = None,
) -> dict[str, Any]:
    """{task: results with their protocol} of a checkpoint (`pre`: read once for a command's folds), each kept in
    eval.json; `overrides` set config fields (preload: auto unless given); other versions' caches go, unless kept."""
    if modality == "audio" and "finetune" in tasks:
        raise ValueError("--modality audio: retrieval and fewshot only (the paper fine-tunes the video encoder)")
    device = device or config.resolve_device(say=False)
    pre = pre or read_pretrained(ckpt)
    pre = pre._replace(cfg=copy.copy(pre.cfg))  # the checkpoint's preload was its training set's: these splits decide
    for k, v in ({"preload": "auto"} | (overrides or {})).items():
        setattr(pre.cfg, k, v)
    cfg, splits, results = pre.cfg, resolve(pre.cfg, modality == "audio", allow_missing), {}
    if {"retrieval", "fewshot"} & set(tasks):  # few-shot's features give retrieval too
        tr, te = (cached_features(pre, s, g.records, device, workers, clips, modality) for s, g in zip(SPLITS, splits))
        recall, _ = recall_at_k(te["fmap"], te["labels"], tr["fmap"], tr["labels"], device)
        results["retrieval"] = {f"R@{k}": v for k, v in recall.items()}
        results["retrieval"]["protocol"] = protocol("retrieval", clips, modality, feature_dim=te["fmap"].shape[1])
    if "fewshot" in tasks:
        counts = np.bincount(tr["labels"].numpy())  # more shots than a class has would give an SD of 0: capped
        fewest, jobs = int(counts[counts > 0].min()), jobs or torch.get_num_threads()
        capped, used = {str(n): fewest for n in shots if n > fewest}, sorted({min(n, fewest) for n in shots})
        fs = few_shot(tr["pooled"], tr["labels"], te["pooled"], te["labels"], used, trials, standardise, jobs)
        settings = {"trials": trials, "standardise": standardise} | ({"capped": capped} if capped else {})
        results["fewshot"] = {f"{n}-shot": v for n, v in fs.items()}
        results["fewshot"]["protocol"] = protocol("fewshot", clips, modality, **settings)
    if "finetune" in tasks:
        fa = {**finetune.FINETUNE, "frames": cfg.frames} | (finetune_args or {})
        about = [pre.digest, str(Path(cfg.data).resolve()), cfg.layout, fold_of(cfg), splits.identity["lists"]]
        about += [cfg.size, cfg.fps, sorted(fa.items()), splits.used]  # what makes the fine-tune: its files' key
        resume = version_file("finetune", ckpt, pre.digest, json.dumps(about, default=str))
        res = finetune.finetune(pre.model.video, cfg, splits, **fa, device=device, workers=workers, resume=resume)
        results["finetune"] = {**res, "protocol": finetune.protocol(fa)}
    for task, res in results.items():
        print(f"[evaluate] {task}: {res['protocol']['text']}")
    add(Path(ckpt).parent / NAME, [record(task, pre, splits, res) for task, res in results.items()])
    if gone := [] if keep_cache else prune_caches(ckpt, pre.digest):
        print(f"evaluate.py: removed {len(gone)} feature caches of other versions of {ckpt} (--keep-cache keeps them)")
    return results


def headline(results: dict[str, Any]) -> dict[str, float]:
    """{task: results}'s numbers by their names in the tables: R@k, n-shot (the trials' mean), the fine-tune's top-1."""
    named = {("finetune top-1" if k == "test_acc" else k): v for res in results.values() for k, v in res.items()}
    named = {k: v for k, v in named.items() if k.startswith("R@") or k.endswith(("-shot", "top-1"))}
    return {k: v[0] if isinstance(v, list | tuple) else v for k, v in named.items()}


def percent(values: list[float]) -> str:  # the mean in %, and the SD when there are several
    mean = 100 * float(np.mean(values))
    return f"{mean:.1f}" if len(values) == 1 else f"{mean:.1f} ± {100 * float(np.std(values, ddof=1)):.1f}"


def fold_table(by_fold: dict[int | None, dict[str, Any]]) -> str:
    """Each fold's numbers in % ({fold: evaluate's results}; None: no folds), then their mean ± SD."""
    rows = {fold or "-": headline(res) for fold, res in by_fold.items()}
    names = list(dict.fromkeys(k for row in rows.values() for k in row))
    lines = ["| fold | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for fold, row in rows.items():
        lines.append(f"| {fold} | " + " | ".join(f"{100 * row[k]:.1f}" if k in row else "-" for k in names) + " |")
    if len(rows) > 1:
        means = [percent([r[k] for r in rows.values() if k in r]) for k in names]
        lines.append("| mean ± SD | " + " | ".join(means) + " |")
    return "\n".join(lines)


def data_options(p: OneLineParser) -> None:
    """The checkpoint and the options that say which data and how to read it (tools/analyse.py's too)."""
    p.add_argument("ckpt", help="train.py checkpoint (OUT/ckpt.pt), or its run folder OUT")
    p.add_argument("--data", help="evaluation dataset root (default: the pre-training data)")
    p.add_argument("--annotations", help="split files, when not in the layout's default place")
    p.add_argument("--manifest", help="usable-file list of --data (default DATA/manifest.csv; a scan makes it)")
    p.add_argument("--allow-missing", action="store_true", help="evaluate a split that lost videos of its list")
    p.add_checked("--layout", one_of(*config.LAYOUTS), help="the evaluation set's layout")
    p.add_checked("--fold", config.between(1, 3), type=int, nargs="+", help="1-3; several: each, then the mean")
    preload = "hold a split decoded in memory (auto: where it fits in half the free memory now, not as trained)"
    p.add_checked("--preload", one_of("auto", "on", "off"), default="auto", help=preload)
    p.add_checked("--clips", at_least(1), type=int, default=CLIPS, help="clips per video (paper: 10)")
    p.add_checked("--workers", config.WORKERS, type=int, default=-1, help="DataLoader workers (-1: as train.py's)")
    p.add_checked("--device", config.DEVICE, default="auto", help="auto | cuda | cuda:N (stops if unusable) | cpu")


def started(args: Any, p: OneLineParser) -> tuple[torch.device, int, dict[str, Any]]:
    """After parsing: a run folder stands for its ckpt.pt; the device, loader workers and the data overrides."""
    if Path(args.ckpt).is_dir():
        if not (Path(args.ckpt) / "ckpt.pt").is_file():
            p.error(f"{args.ckpt}: a folder without a ckpt.pt; expected a train.py checkpoint or its run folder")
        args.ckpt = str(Path(args.ckpt) / "ckpt.pt")
    if len(args.fold or []) > 1 and args.layout not in FOLDED:
        p.error(f"--fold {' '.join(map(str, args.fold))}: several folds need --layout ucf101 or hmdb51")
    try:
        device = config.resolve_device(args.device)
    except config.DeviceError as err:
        raise SystemExit(f"{p.prog}: {err}") from None
    print(config.start_line(p.prog, device, 1, "fp32", workers := workers_per_process(args.workers)))
    paths = {k: str(Path(v).resolve()) for k, v in vars(args).items() if k in checkpoint.PATHS and v is not None}
    overrides = ({"manifest": ""} if "data" in paths else {}) | paths  # --data: that set's own manifest by default
    return device, workers, overrides | ({"layout": args.layout} if args.layout else {})


def main(argv: list[str] | None = None) -> None:
    argv = [str(a) for a in (sys.argv[1:] if argv is None else argv)]
    if argv[:1] in (["analysis"], ["features"], ["report"]):
        raise SystemExit(f"evaluate.py {argv[0]}: not a protocol; it is `python -m tools.analyse {' '.join(argv)}`")
    p = OneLineParser(prog="evaluate.py", description=__doc__.split("\n\n")[0])
    p.add_argument("task", choices=["retrieval", "fewshot", "finetune", "all"], help="all: the three")
    data_options(p)
    p.add_checked("--modality", one_of("video", "audio"), default="video", help="retrieval's and few-shot's")
    p.add_checked("--trials", at_least(1), type=int, default=50, help="few-shot trials (paper: 50)")
    p.add_checked("--jobs", at_least(1), type=int, help="processes for the trials (default: torch's threads)")
    p.add_argument("--standardise", action="store_true", help="few-shot on standardised features (paper: raw)")
    p.add_argument("--keep-cache", action="store_true", help="keep the feature caches of other checkpoint versions")
    finetune.add_options(p)
    args = p.parse_args(argv)
    settings = {k: getattr(args, k) for k in ("trials", "standardise", "jobs", "clips", "modality", "allow_missing")}
    settings |= {"keep_cache": args.keep_cache, "finetune_args": finetune.settings(args, p)}
    device, workers, overrides = started(args, p)
    tasks = ["retrieval", "fewshot"] + ["finetune"] * (args.modality == "video") if args.task == "all" else [args.task]
    try:
        pre, by_fold = read_pretrained(args.ckpt), {}  # once: a run still training may replace it between folds
        for fold in args.fold or [None]:
            folded = overrides | {"preload": args.preload} | ({"fold": fold} if fold else {})
            by_fold[fold] = evaluate(args.ckpt, tasks, folded, workers, device, pre=pre, **settings)
    except (checkpoint.CheckpointError, FileNotFoundError) as err:
        raise SystemExit(f"evaluate.py: {err}") from err
    except ValueError as err:  # a dataset that holds nothing usable, a split that lost videos: one line
        raise SystemExit(f"evaluate.py: {err}") from None
    print(fold_table(by_fold))  # in %, as the tables; the fractions and protocols are in the records
    print(f"in %; every number with its protocol: {Path(args.ckpt).parent / NAME}, `python -m tools.analyse report`")


if __name__ == "__main__":
    main()
