"""Downstream evaluation of a pre-trained video encoder, by the paper's protocols (Sec. 5.1, Sec. 6).

    retrieval  the last conv feature map (4x4x512 at 112x112) averaged over 10 clips per video; test
               videos query the train split by Euclidean distance (Fig. 11); R@1/5/20: a hit if one
               of the k nearest shares the query's class (Sec. 5.1, Table 4)
    fewshot    global max-pooled features averaged over 10 clips; a one-vs-all linear SVM (C=1) on the
               raw features of n train videos per class; top-1 on the test split, mean +- std over 50
               seeded trials (Sec. 6, Table 5; analysis/fewshot.py)
    finetune   encoder + dropout after the max pooling + linear layer; Adam, batch 192, 200 epochs,
               cosine 1e-4 -> 1e-5, backbone lr x0.1, weight decay 1e-3; trained on the whole train
               split, the final epoch's top-1 of video-level predictions (softmax averaged over 10
               clips) on the test split (Sec. 5.1; Sec. 6 also on 32-frame clips: --frames 32;
               protocols/finetune.py)
    analysis   the weights of eq. (6) against the known faulty positives (AUROC, histogram as in
               Fig. 5), soft-target mass on same-class candidates (analysis/weights.py), per-class
               R@1 (Fig. 10), and the retrieval figure (Fig. 11): query frames and their top-4 retrievals
    features   per video, the pooled video and audio features, label and path, as .npz (protocols/features.py)
    report     the checkpoint's records as the paper's table rows (analysis/report.py)

This file holds the protocols' entry (`evaluate`, the command line); the features they read are
protocols/features.py's, R@k protocols/retrieval.py's, each task's protocol text protocols/described.py's,
the splits, resolved once and handed to each, protocols/splits.py's. `--modality audio` runs
retrieval and few-shot on the audio encoder's features; `--fold 1 2 3` runs each fold and prints every
task's numbers per fold and their mean and standard deviation. More shots than the fewest training videos
of a class are capped there, and the record says so.

Deviations are named options, off by default: --standardise (few-shot), --select-on-val (fine-tune),
--accumulate (gradient accumulation when a batch of 192 does not fit), --clips below 10. Every task
prints the protocol it ran and stores it with its numbers as a record of CKPT_DIR/eval.json, keyed by the
checkpoint's epoch and digest, dataset, layout, fold, split lists and protocol (persistence/records.py); a
fine-tune keeps its state and result in files of its own first (protocols/finetune.py), so that a rerun
resumes it. Feature caches of other versions of the checkpoint file are removed (--keep-cache keeps them).
A query set that shares a file with its gallery (or a test split that shares one with the train split) is
refused; so is a split that lost a video of its official list, unless --allow-missing. A checkpoint whose
run is still training there is evaluated as it is (the record names its epoch and digest): evaluation
writes only files of its own.

    .venv/bin/python evaluate.py all runs/demo/robust/ckpt.pt                 # on the data it was trained on
    .venv/bin/python evaluate.py retrieval CKPT --data UCF101 --layout ucf101 --fold 1 2 3
"""

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

import data
from analysis import fewshot, report, weights
from checkpoint import CheckpointError
from config import (
    DEVICE,
    POSITIVE,
    Check,
    DeviceError,
    OneLineParser,
    at_least,
    between,
    one_of,
    resolve_device,
    start_line,
)
from media.loader_workers import workers_per_process
from persistence import records
from protocols import features, finetune
from protocols.described import named, protocol_of
from protocols.features import CLIPS, MODALITIES, Pretrained, cached_features, export, read_pretrained
from protocols.finetune import FINETUNE
from protocols.retrieval import recall_at_k
from protocols.splits import EvalSplits, fold_of, resolve


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
    figures: bool = True,
    jobs: int | None = None,
    clips: int = CLIPS,
    modality: str = "video",
    allow_missing: bool = False,
    keep_cache: bool = False,
    pre: Pretrained | None = None,
    preload: str = "auto",
) -> dict[str, Any]:
    """Run `tasks` on a checkpoint, with `clips` per video for the retrieval and few-shot features (the
    paper's 10; fewer is a named deviation, stored in the protocol) of the `modality` encoder; returns
    {task: results} with each task's protocol, and adds each task's record to CKPT_DIR/eval.json
    (persistence/records.py). A split that lost a video of its list stops it (MissingVideos) unless
    allow_missing. It writes only files of its own beside the checkpoint (feature caches, eval.json
    under its own lock, plots, a fine-tune's state and result), so a run still training in that folder does
    not stop it; then it removes the feature caches of other versions of the checkpoint file, unless keep_cache.
    `pre`: the checkpoint as read already (every fold of one command: one version of a file still written).
    `preload`: --preload for the evaluated splits (auto: each split held decoded where it fits in memory now)."""
    if not Path(ckpt).is_file():
        raise FileNotFoundError(f"checkpoint not found: {ckpt}")
    if modality == "audio" and {"finetune", "analysis"} & set(tasks):
        raise ValueError("--modality audio: retrieval and fewshot only (the paper fine-tunes the video encoder)")
    from analysis import figures as figs

    device = device or resolve_device(say=False)
    pre = pre._replace(cfg=copy.copy(pre.cfg)) if pre is not None else read_pretrained(ckpt)  # cfg: overridden
    holder = records.held_by(Path(ckpt).parent)
    if holder:
        print(
            f"evaluate.py: {Path(ckpt).parent} is in use by {holder}; evaluating {Path(ckpt).name} as it is, "
            f"after epoch {pre.epoch}"
        )
    cfg, model, bank, instances = pre[:4]
    for k, v in (overrides or {}).items():
        setattr(cfg, k, v)
    # the checkpoint's preload is the training set's path (train.py saves it resolved): these splits decide their own
    cfg.preload = preload
    splits = resolve(cfg, need_audio=modality == "audio", allow_missing=allow_missing)  # the lists, read once
    results = {}
    if {"retrieval", "fewshot", "analysis"} & set(tasks):
        encoder = model.audio if modality == "audio" else model.video
        tr, te = (
            cached_features(ckpt, pre, cfg, encoder, s, splits[s].records, device, workers, clips, modality)
            for s in ("train", "test")
        )
        recall, nearest = recall_at_k(te["fmap"], te["labels"], tr["fmap"], tr["labels"], device=device)
        results["retrieval"] = {
            **{f"R@{k}": v for k, v in recall.items()},
            "protocol": protocol_of("retrieval", feature_dim=int(te["fmap"].shape[1]), **named(clips, modality)),
        }
    if "fewshot" in tasks:
        used, capped = fewshot.cap_shots(tr["labels"].numpy(), shots)
        jobs = jobs or torch.get_num_threads()
        fs = fewshot.few_shot(
            tr["pooled"], tr["labels"], te["pooled"], te["labels"], used, trials, standardise=standardise, jobs=jobs
        )
        settings = {"trials": trials, "standardise": standardise, **named(clips, modality)}
        results["fewshot"] = {
            **{f"{n}-shot": v for n, v in fs.items()},
            "protocol": protocol_of("fewshot", **settings, **({"capped": capped} if capped else {})),
        }
    if "analysis" in tasks:
        faulty, labels = instances["faulty"], instances["labels"]
        wa, scores, w, faulty_kept = weights.weight_analysis(bank, faulty, cfg)
        results["weights"] = wa
        results["soft_targets_same_class"] = weights.soft_target_analysis(bank, labels, cfg)
        classes = splits.test.classes
        per_class = [
            float((tr["labels"][nearest[:, 0]] == te["labels"])[te["labels"] == c].float().mean())
            for c in range(len(classes))
        ]
        results["per_class_R@1"] = dict(zip(classes, per_class))
        results["analysis"] = {"protocol": protocol_of("analysis")}
        if figures:
            out = Path(ckpt).parent
            figs.scores_and_weights(scores, w, faulty_kept, cfg, out / "scores_weights.png")
            figs.per_class(per_class, classes, out / "per_class_r1.png")
            figs.retrievals(
                data.eval_set(cfg, splits.test.records, preload=False),
                data.eval_set(cfg, splits.train.records, preload=False),
                nearest,
                classes,
                out / "retrievals.png",
            )  # decodes only the frames it shows
    if "finetune" in tasks:
        fa = {
            **FINETUNE,
            "accumulate": 1,
            "frames": cfg.frames,
            "select_on_val": False,
            "curve_every": 0,
            **(finetune_args or {}),
        }
        about = [pre.digest, str(Path(cfg.data).resolve()), cfg.layout, fold_of(cfg), splits.identity["lists"]]
        about += [cfg.size, cfg.fps, sorted(fa.items()), splits.used]  # what makes the fine-tune: its files' key
        args = ("epochs", "lr", "lr_min", "batch_size", "accumulate", "frames", "select_on_val", "curve_every")
        resume = features.version_file("finetune", ckpt, pre.digest, json.dumps(about, default=str))
        res = finetune.finetune(
            model.video, cfg, splits, **{k: fa[k] for k in args}, device=device, workers=workers, resume=resume
        )
        in_protocol = ("epochs", "batch_size", "accumulate", "lr", "lr_min", "frames", "select_on_val")
        results["finetune"] = {**res, "protocol": protocol_of("finetune", **{k: fa[k] for k in in_protocol})}
    for task, res in results.items():
        if "protocol" in res:
            print(f"[evaluate] {task}: {res['protocol']['text']}")
    keep_record(ckpt, pre, cfg, results, splits)
    gone = [] if keep_cache else features.prune_caches(ckpt, pre.digest)
    if gone:
        print(f"evaluate.py: removed {len(gone)} feature caches of other versions of {ckpt} (--keep-cache keeps them)")
    return results


def keep_record(ckpt: str | Path, pre: Any, cfg: Any, results: dict[str, Any], splits: EvalSplits) -> None:
    """Each task's results as a record of CKPT_DIR/eval.json, keyed by the checkpoint version `pre` read and
    the split lists; the analysis task's are the three parts evaluate returns beside it."""
    new = []
    for task, res in results.items():
        if "protocol" not in res:
            continue
        numbers = {k: v for k, v in res.items() if k != "protocol"}
        if task == "analysis":
            numbers = {k: results[k] for k in records.ANALYSIS_PARTS}
        where, lists = (cfg.data, cfg.layout, fold_of(cfg)), (splits.videos(), pre.digest, splits.identity)
        new.append(records.record(task, ckpt, pre.epoch, *where, res["protocol"], numbers, *lists))
    try:
        records.add(Path(ckpt).parent / records.NAME, new)
    except OSError as err:  # a full disk, no permission: one line; a fine-tune's result is in its own file
        raise SystemExit(
            f"evaluate.py: could not write {Path(ckpt).parent / records.NAME} ({err}); rerunning the command "
            "records it (a fine-tune's result is kept in finetune_*.json beside it, and not trained again)"
        ) from None


def main(argv: list[str] | None = None) -> None:
    p = OneLineParser(prog="evaluate.py", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "task",
        choices=["retrieval", "fewshot", "finetune", "analysis", "all", "features", "report"],
        help="retrieval uses the last conv map: the paper's is 4x4x512 at 112x112; at other input sizes "
        "the network's own map (3x3 at 80, 2x2 at 64), not resampled (a deviation); features writes --out; "
        "report prints the checkpoint's records as the paper's table rows",
    )
    p.add_argument("ckpt", help="train.py checkpoint (OUT/ckpt.pt), or its run folder OUT")
    p.add_argument("--data", help="evaluation dataset root (default: the pre-training data)")
    p.add_checked("--layout", one_of("ucf101", "hmdb51", "kinetics", "folder"), help="the evaluation set's layout")
    p.add_checked(
        "--fold",
        between(1, 3),
        type=int,
        nargs="+",
        help="split(s) 1-3 of UCF101 / HMDB51; several: each, then the mean",
    )
    p.add_argument("--annotations", help="split files, when not in the layout's default place")
    p.add_argument(
        "--manifest", help="usable-file list of --data (default DATA/manifest.csv, made by a scan when missing)"
    )
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="evaluate a split that lost videos of its official list (the record keeps the count)",
    )
    p.add_checked(
        "--modality",
        one_of(*MODALITIES),
        default="video",
        help="whose features retrieval and few-shot read (paper: video)",
    )
    p.add_argument("--out", help="features: the .npz to write (a new file, or one features wrote)")
    p.add_argument("--keep-cache", action="store_true", help="keep the feature caches of other checkpoint versions")
    p.add_checked(
        "--preload",
        one_of("auto", "on", "off"),
        default="auto",
        help="hold each evaluated split decoded in memory: auto where it fits in half the free memory now "
        "(never the training run's choice), on, or off (clips read from the files)",
    )
    p.add_checked("--trials", at_least(1), type=int, default=50, help="few-shot trials (paper: 50)")
    p.add_argument("--standardise", action="store_true", help="few-shot on standardised features (paper: raw)")
    p.add_checked("--finetune-epochs", at_least(1), type=int, default=FINETUNE["epochs"], help="paper: 200")
    p.add_checked("--finetune-batch", at_least(2), type=int, default=FINETUNE["batch_size"], help="paper: 192")
    p.add_checked("--finetune-lr", POSITIVE, type=float, default=FINETUNE["lr"], help="paper: 1e-4 -> 1e-5 cosine")
    p.add_checked(
        "--accumulate", at_least(1), type=int, default=1, help="micro-batches per step when a batch does not fit"
    )
    p.add_checked(
        "--frames", at_least(1), type=int, help="fine-tune on clips of this many frames (paper: 8; Sec. 6 also 32)"
    )
    p.add_argument(
        "--select-on-val",
        action="store_true",
        help="keep the best epoch on 10%% of the train split (paper: the final epoch)",
    )
    p.add_checked(
        "--curve-every",
        at_least(0),
        type=int,
        default=0,
        help="also record the fine-tune's test accuracy every N epochs (a diagnostic, never used to select)",
    )
    p.add_checked(
        "--clips",
        at_least(1),
        type=int,
        default=CLIPS,
        help="clips per video for retrieval, few-shot and features (paper: 10)",
    )
    p.add_checked(
        "--workers",
        Check(lambda v: v >= -1, "-1 (the cores per process) or a count of at least 0"),
        type=int,
        default=-1,
        help="DataLoader workers; -1: the cores available, at most 16 (as train.py's --workers)",
    )
    p.add_checked("--device", DEVICE, default="auto", help="auto | cuda | cuda:N (stop when it is not usable) | cpu")
    p.add_checked(
        "--jobs",
        at_least(1),
        type=int,
        help="processes for the few-shot trials (default: torch's thread count, "
        "the cores; the numbers do not depend on it)",
    )
    args = p.parse_args(argv)
    if Path(args.ckpt).is_dir():  # a run folder stands for its checkpoint
        if not (Path(args.ckpt) / "ckpt.pt").is_file():
            p.error(f"{args.ckpt}: a folder without a ckpt.pt; expected a train.py checkpoint or its run folder")
        args.ckpt = str(Path(args.ckpt) / "ckpt.pt")
    if args.task == "report":
        try:
            print(report.report(args.ckpt))
        except (FileNotFoundError, records.RecordsError) as err:  # a corrupt eval.json: nothing of it read
            corrupt = isinstance(err, records.RecordsError) and not isinstance(err, records.UnknownFormat)
            aside = "; the next evaluation sets it aside" if corrupt else ""
            raise SystemExit(f"evaluate.py: {err}{aside}") from None
        return
    if args.finetune_batch % args.accumulate:
        p.error(f"--accumulate {args.accumulate}: expected a divisor of --finetune-batch ({args.finetune_batch})")
    if args.task == "features" and not args.out:
        p.error("features: --out FILE.npz names the file to write")
    if args.task == "features":
        try:
            features.check_out(args.out)  # before the checkpoint is read: a folder, or a file of another kind, stays
        except ValueError as err:
            p.error(str(err))
    folds = args.fold or [None]
    if args.task == "features" and len(folds) > 1:  # one --out file: a second fold would overwrite the first
        p.error(f"features: one --fold per file (given {' '.join(map(str, folds))}); run it once per fold")
    if len(folds) > 1 and args.layout not in ("ucf101", "hmdb51"):
        p.error(f"--fold {' '.join(map(str, folds))}: several folds need --layout ucf101 or hmdb51")
    try:
        device = resolve_device(args.device)
    except DeviceError as err:
        raise SystemExit(f"evaluate.py: {err}") from None
    workers = workers_per_process(args.workers)
    print(start_line("evaluate.py", device, 1, "fp32", workers))
    overrides = {k: v for k in ("data", "layout", "annotations", "manifest") if (v := getattr(args, k)) is not None}
    overrides |= {k: str(Path(overrides[k]).resolve()) for k in ("data", "annotations", "manifest") if k in overrides}
    if "data" in overrides:
        overrides.setdefault("manifest", "")  # the evaluation set's own manifest
    tasks = ["retrieval", "fewshot", "analysis", "finetune"] if args.task == "all" else [args.task]
    if "analysis" in tasks and "data" in overrides:
        tasks.remove("analysis")  # the bank belongs to the pre-training data
    if args.modality == "audio" and args.task == "all":
        tasks = ["retrieval", "fewshot"]
    finetune_args = {
        "epochs": args.finetune_epochs,
        "batch_size": args.finetune_batch,
        "lr": args.finetune_lr,
        "lr_min": args.finetune_lr / 10,
        "accumulate": args.accumulate,
        "select_on_val": args.select_on_val,
        "curve_every": args.curve_every,
    }
    if args.frames:
        finetune_args["frames"] = args.frames
    by_fold = {}
    try:
        pre = read_pretrained(args.ckpt)  # once: a run still training may replace the file between folds
        for fold in folds:
            fold_overrides = {**overrides, **({"fold": fold} if fold else {})}
            if args.task == "features":
                for k, v in {**fold_overrides, "preload": args.preload}.items():
                    setattr(pre.cfg, k, v)
                splits = resolve(pre.cfg, allow_missing=args.allow_missing)
                n = export(args.ckpt, pre, pre.cfg, splits, args.out, device, workers, args.clips)
                print(f"evaluate.py: {n} videos' pooled video and audio features -> {args.out}")
                continue
            by_fold[fold] = evaluate(
                args.ckpt,
                tasks,
                fold_overrides,
                workers,
                device=device,
                trials=args.trials,
                standardise=args.standardise,
                finetune_args=finetune_args,
                jobs=args.jobs,
                clips=args.clips,
                modality=args.modality,
                allow_missing=args.allow_missing,
                keep_cache=args.keep_cache,
                pre=pre,
                preload=args.preload,
            )
    except (CheckpointError, FileNotFoundError) as err:
        raise SystemExit(f"evaluate.py: {err}") from err
    except ValueError as err:  # a dataset that holds nothing usable, a split that lost videos: one line
        raise SystemExit(f"evaluate.py: {err}") from None
    if by_fold:  # in %, as the tables; the fractions and protocols are in the records
        print(report.fold_table(by_fold))
        print(f"in %; every number with its protocol: {Path(args.ckpt).parent / 'eval.json'}, `evaluate.py report`")


if __name__ == "__main__":
    main()
