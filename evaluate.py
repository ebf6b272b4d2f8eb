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
               finetune.py)
    analysis   the weights of eq. (6) against the known faulty positives (AUROC, histogram as in
               Fig. 5), soft-target mass on same-class candidates (analysis/weights.py), per-class
               R@1 (Fig. 10), and the retrieval figure (Fig. 11): query frames and their top-4 retrievals

This file holds the protocols' entry (`evaluate`, the command line) and the features the first three
tasks share; the datasets of a split are data.py's (eval_set, check_disjoint).

Deviations are named options, off by default: --standardise (few-shot), --select-on-val (fine-tune),
--accumulate (gradient accumulation when a batch of 192 does not fit). Every task prints the
protocol it ran and stores it beside its numbers in CKPT_DIR/eval.json. A query set that shares a
file with its gallery (or a test split that shares one with the train split) is refused.

    python evaluate.py all runs/demo/robust/ckpt.pt                      # on the data it was trained on
    python evaluate.py retrieval CKPT --data UCF101 --layout ucf101 --fold 1
"""

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
from torch import Tensor

import augment
import data
import finetune
from analysis import fewshot, weights
from config import POSITIVE, Check, Config, OneLineParser, at_least, between, one_of
from finetune import FINETUNE
from machinery.devices import DEVICES, DeviceError, default_device, resolve_device, start_line
from media import manifest
from media.loader_workers import loader, progress, workers_per_process
from persistence import runstate
from persistence.checkpoint import CheckpointError, load_pretrained

CLIPS = 10  # clips per video averaged for retrieval and few-shot (Sec. 5.1, Sec. 6)


def named(clips: int) -> dict[str, int]:
    """A protocol's clip count, stored only when it is not the paper's (the paper's records stay as they were)."""
    return {} if clips == CLIPS else {"clips": clips}


# ----------------------------------------------------------------------------- features


@torch.no_grad()
def extract_features(
    encoder: nn.Module, dataset: data.AVDataset, device: torch.device, batch_size: int = 8, workers: int = 2
) -> dict[str, Tensor]:
    """Per video, averaged over its clips: `fmap` the last conv feature map, flattened (retrieval),
    `pooled` the global max-pooled feature (few-shot); and the labels.

    The paper's map is 4x4x512, what R(2+1)D gives at its 112x112 input. At other sizes we keep the
    network's own map (3x3 at 80x80, 2x2 at 64x64) rather than resample it to 4x4: pooling a 3x3 map
    up to 4x4 would repeat the centre positions and weight them more in the distance."""
    encoder.eval().to(device)
    fmaps, pooled, labels = [], [], []
    for batch in progress(loader(dataset, batch_size, workers), f"features ({len(dataset)} videos)"):
        x = augment.normalise(batch["video"].to(device))  # (B, clips, 3, T, H, W)
        B, C = x.shape[:2]
        fm = encoder.feature_map(x.flatten(0, 1)).float().mean(2)  # (B*clips, 512, h, w): the 1-frame time axis
        fmaps.append(fm.flatten(1).view(B, C, -1).mean(1).cpu())  # (B, 512*h*w)
        pooled.append(torch.amax(fm, dim=(2, 3)).view(B, C, -1).mean(1).cpu())  # (B, 512)
        labels.append(batch["label"])
    return {"fmap": torch.cat(fmaps), "pooled": torch.cat(pooled), "labels": torch.cat(labels)}


def cached_features(
    ckpt: str | Path,
    cfg: Config,
    encoder: nn.Module,
    split: str,
    device: torch.device,
    workers: int = 2,
    clips: int = CLIPS,
) -> tuple[dict[str, Tensor], list[manifest.Record]]:
    """extract_features of a split, saved next to the checkpoint under a key of checkpoint, data
    settings and files; returns the features and the split's records (they name the files). The
    dataset is built, and decoded, only when the features are not cached."""
    records = data.split_records(cfg, split)[0]
    st = Path(ckpt).stat()
    key = json.dumps(
        [
            str(Path(ckpt).resolve()),
            st.st_mtime_ns,
            st.st_size,
            cfg.data,
            cfg.layout,
            cfg.fold,
            split,
            cfg.frames,
            cfg.fps,
            cfg.size,
            "native-map",
            *([clips] if clips != CLIPS else []),  # the paper's 10 keeps the key (and the caches) it had
            [r.path for r in records],
        ]
    )
    path = Path(ckpt).parent / f"features_{split}_{hashlib.sha1(key.encode()).hexdigest()[:10]}.pt"
    if path.exists():
        return torch.load(path, weights_only=True), records
    feats = extract_features(encoder, data.eval_set(cfg, split, num_clips=clips)[0], device, workers=workers)
    torch.save(feats, path)
    return feats, records


# ----------------------------------------------------------------------------- retrieval and few-shot


def recall_at_k(
    query: Tensor,
    query_labels: Tensor,
    gallery: Tensor,
    gallery_labels: Tensor,
    ks: Sequence[int] = (1, 5, 20),
    device: torch.device | None = None,
    chunk: int = 1024,
) -> tuple[dict[int, float], Tensor]:
    """R@k by Euclidean distance (Fig. 11): the share of queries with a same-label video among their
    k nearest. Returns ({k: R@k}, per-query indices of the nearest max(ks) gallery videos)."""
    device = device or default_device()
    g = gallery.float().to(device)  # (G, F)
    gl = gallery_labels.to(device)
    kmax = min(max(ks), g.shape[0])
    hits, nearest = [], []
    for q, ql in zip(query.split(chunk), query_labels.split(chunk)):
        dist = torch.cdist(q.float().to(device), g)  # (Q, G)
        top = dist.topk(kmax, dim=1, largest=False).indices  # (Q, kmax), nearest first
        hits.append((gl[top] == ql.to(device)[:, None]).cpu())  # (Q, kmax)
        nearest.append(top.cpu())
    hits = torch.cat(hits)
    return {k: float(hits[:, :k].any(1).float().mean()) for k in ks}, torch.cat(nearest)


# ----------------------------------------------------------------------------- command line


def protocol_of(task: str, **settings: Any) -> dict[str, Any]:
    """What a task ran, as printed and stored beside its numbers."""
    text = {
        "retrieval": "last conv map ({feature_dim} values; the paper's is 4x4x512 at 112x112) averaged over "
        "{clips_text}, Euclidean distance, test queries the train split",
        "fewshot": "max-pooled features averaged over {clips_text}, one-vs-all linear SVM C=1, {trials} trials{scaled}",
        "finetune": "{epochs} epochs, batch {batch_size} ({accumulate} micro-batches), Adam {lr:g}->{lr_min:g} "
        "cosine, backbone x0.1, wd 1e-3, dropout 0.5, {frames}-frame clips, {select}",
        "analysis": "bank scores and eq. (6) weights vs the known faulty positives; soft-target mass",
    }[task]
    fmt = {
        **settings,
        "scaled": ", standardised (not the paper's)" if settings.get("standardise") else ", raw",
        "clips_text": "10 clips"
        if settings.get("clips", CLIPS) == CLIPS
        else f"{settings['clips']} clips (the paper's: 10)",
        "select": "validation-selected epoch (not the paper's)"
        if settings.get("select_on_val")
        else "final epoch on the test split",
    }
    return {"text": text.format(**fmt), **settings}


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
) -> dict[str, Any]:
    """Run `tasks` on a checkpoint, with `clips` per video for the retrieval and few-shot features (the
    paper's 10; fewer is a named deviation, stored in the protocol); returns {task: results} with each
    task's protocol, and merges them into CKPT_DIR/eval.json. It writes into the run folder (feature
    caches, eval.json, plots), so it holds the folder as train.py does: a checkpoint whose run is still
    training is refused."""
    if not Path(ckpt).is_file():
        raise FileNotFoundError(f"checkpoint not found: {ckpt}")
    with runstate.hold_folder(Path(ckpt).parent, "evaluate.py"):
        return _evaluate(
            ckpt, tasks, overrides, workers, device, shots, trials, standardise, finetune_args, figures, jobs, clips
        )


def _evaluate(
    ckpt: str | Path,
    tasks: list[str],
    overrides: dict[str, Any] | None,
    workers: int,
    device: torch.device | None,
    shots: Sequence[int],
    trials: int,
    standardise: bool,
    finetune_args: dict[str, Any] | None,
    figures: bool,
    jobs: int | None,
    clips: int = CLIPS,
) -> dict[str, Any]:
    from analysis import figures as figs

    device = device or default_device()
    cfg, model, bank, instances = load_pretrained(ckpt)
    for k, v in (overrides or {}).items():
        setattr(cfg, k, v)
    results = {}
    if {"retrieval", "fewshot", "analysis"} & set(tasks):
        tr, tr_records = cached_features(ckpt, cfg, model.video, "train", device, workers, clips)
        te, te_records = cached_features(ckpt, cfg, model.video, "test", device, workers, clips)
        data.check_disjoint(te_records, tr_records, "the test queries and the train gallery")
        recall, nearest = recall_at_k(te["fmap"], te["labels"], tr["fmap"], tr["labels"], device=device)
        results["retrieval"] = {
            **{f"R@{k}": v for k, v in recall.items()},
            "protocol": protocol_of("retrieval", feature_dim=int(te["fmap"].shape[1]), **named(clips)),
        }
    if "fewshot" in tasks:
        fs = fewshot.few_shot(
            tr["pooled"],
            tr["labels"],
            te["pooled"],
            te["labels"],
            shots,
            trials,
            standardise=standardise,
            jobs=jobs or torch.get_num_threads(),
        )
        results["fewshot"] = {
            **{f"{n}-shot": v for n, v in fs.items()},
            "protocol": protocol_of("fewshot", trials=trials, standardise=standardise, **named(clips)),
        }
    if "analysis" in tasks:
        faulty, labels = instances["faulty"], instances["labels"]
        wa, scores, w, faulty_kept = weights.weight_analysis(bank, faulty, cfg)
        results["weights"] = wa
        results["soft_targets_same_class"] = weights.soft_target_analysis(bank, labels, cfg)
        classes = manifest.list_split(cfg.layout, cfg.data, "test", cfg.fold, cfg.annotations or None)[1]
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
                data.eval_set(cfg, "test", preload=False)[0],
                data.eval_set(cfg, "train", preload=False)[0],
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
        res = finetune.finetune(
            model.video,
            cfg,
            epochs=fa["epochs"],
            lr=fa["lr"],
            lr_min=fa["lr_min"],
            batch_size=fa["batch_size"],
            accumulate=fa["accumulate"],
            frames=fa["frames"],
            select_on_val=fa["select_on_val"],
            device=device,
            workers=workers,
            curve_every=fa["curve_every"],
        )
        keep = ("epochs", "batch_size", "accumulate", "lr", "lr_min", "frames", "select_on_val")
        results["finetune"] = {**res, "protocol": protocol_of("finetune", **{k: fa[k] for k in keep})}
    for task, res in results.items():
        if "protocol" in res:
            print(f"[evaluate] {task}: {res['protocol']['text']}")
    path = Path(ckpt).parent / "eval.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**previous, **results}, indent=1))
    return results


def main(argv: list[str] | None = None) -> None:
    p = OneLineParser(prog="evaluate.py", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "task",
        choices=["retrieval", "fewshot", "finetune", "analysis", "all"],
        help="retrieval uses the last conv map: the paper's is 4x4x512 at 112x112; at other input sizes "
        "the network's own map (3x3 at 80, 2x2 at 64), not resampled (a deviation)",
    )
    p.add_argument("ckpt", help="train.py checkpoint")
    p.add_argument("--data", help="evaluation dataset root (default: the pre-training data)")
    p.add_checked("--layout", one_of("ucf101", "hmdb51", "kinetics", "folder"), help="the evaluation set's layout")
    p.add_checked("--fold", between(1, 3), type=int, help="split 1-3 of UCF101 / HMDB51")
    p.add_argument("--annotations", help="split files, when not in the layout's default place")
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
        "--clips", at_least(1), type=int, default=CLIPS, help="clips per video for retrieval and few-shot (paper: 10)"
    )
    p.add_checked(
        "--workers",
        Check(lambda v: v >= -1, "-1 (the cores per process) or a count of at least 0"),
        type=int,
        default=-1,
        help="DataLoader workers; -1: the cores available, at most 16 (as train.py's --workers)",
    )
    p.add_checked("--device", one_of(*DEVICES), default="auto", help="auto | cuda (stop when no GPU is usable) | cpu")
    p.add_checked(
        "--jobs",
        at_least(1),
        type=int,
        help="processes for the few-shot trials (default: torch's thread count, "
        "the cores; the numbers do not depend on it)",
    )
    args = p.parse_args(argv)
    try:
        device = resolve_device(args.device)
    except DeviceError as err:
        raise SystemExit(f"evaluate.py: {err}") from None
    workers = workers_per_process(args.workers)
    print(start_line("evaluate.py", device, 1, "fp32", workers))
    if args.finetune_batch % args.accumulate:
        p.error(f"--accumulate {args.accumulate}: expected a divisor of --finetune-batch ({args.finetune_batch})")
    overrides = {k: v for k in ("data", "layout", "fold", "annotations") if (v := getattr(args, k)) is not None}
    if "data" in overrides:
        overrides["manifest"] = ""  # the evaluation set's own manifest
    tasks = ["retrieval", "fewshot", "analysis", "finetune"] if args.task == "all" else [args.task]
    if "analysis" in tasks and "data" in overrides:
        tasks.remove("analysis")  # the bank belongs to the pre-training data
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
    try:
        res = evaluate(
            args.ckpt,
            tasks,
            overrides,
            workers,
            device=device,
            trials=args.trials,
            standardise=args.standardise,
            finetune_args=finetune_args,
            jobs=args.jobs,
            clips=args.clips,
        )
    except (CheckpointError, FileNotFoundError, runstate.FolderHeld) as err:
        raise SystemExit(f"evaluate.py: {err}") from err
    except ValueError as err:  # a dataset that holds nothing usable, a split that does not fit: one line
        raise SystemExit(f"evaluate.py: {err}") from None
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
