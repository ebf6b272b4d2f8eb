"""Fine-tuning, the paper's third downstream protocol (Sec. 5.1, "Downstream"; Sec. 6, Table 5): the pre-trained
video encoder, dropout after its global max pooling and a linear layer, trained on the whole train split; the final
epoch's top-1 of video-level predictions (softmax averaged over 10 clips) on the test split. FINETUNE holds the
paper's settings; the deviations are named options, off by default: select_on_val (the best epoch on a held-out
tenth of the train split), accumulate (micro-batches when 192 do not fit), curve_every (a diagnostic).

A fine-tune lasts hours on a GPU, so it prints a line per epoch on stdout (a terminal or a batch scheduler's log)
and, given `resume` (evaluate.py's CKPT_DIR/finetune_CKPTSTEM_DIGEST_KEY), keeps its state after every epoch in
RESUME.pt as train.py keeps its checkpoints: rerun, the same command goes on from the last epoch and ends at the
numbers of a run never stopped, since every epoch's shuffle, augmentations and dropout are seeded by (seed, epoch).
Its result goes to RESUME.json before the state is removed and before eval.json is touched: a rerun reads it there.

    python evaluate.py finetune CKPT --finetune-epochs 20     # evaluate.py runs it, with the options below

Tests: tests/test_evaluate.py, tests/test_finetune_records.py
"""

import copy
import json
import math
import os
import pickle
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from tqdm import tqdm

import augment
import checkpoint
import data
from config import POSITIVE, Config, OneLineParser, at_least, resolve_device
from data import loader

FINETUNE = dict(epochs=200, batch_size=192, lr=1e-4, lr_min=1e-5, backbone_lr_scale=0.1, weight_decay=1e-3, dropout=0.5)
FINETUNE |= dict(accumulate=1, select_on_val=False, curve_every=0)  # Sec. 5.1; these three: no deviation


def say(text: str) -> None:
    """A progress line on stdout, flushed: shown on a terminal and in a log file alike."""
    print(text, flush=True)


def progress(batches: Iterable[Any], desc: str) -> Iterable[Any]:
    """A tqdm bar over a loader on a terminal, nothing in a log file or a test."""
    return tqdm(batches, desc=desc, disable=not sys.stderr.isatty(), leave=False)


class Shuffle(torch.utils.data.Sampler):
    """The training indices `keep` in an order drawn from (seed, epoch) alone (data.SeededSampler wraps
    it and sets the epoch), so that a resumed fine-tune sees the same batches as one never stopped."""

    def __init__(self, keep: np.ndarray, seed: int) -> None:
        self.keep, self.seed, self.epoch = keep, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        order = torch.randperm(len(self.keep), generator=torch.Generator().manual_seed(self.seed * 7919 + self.epoch))
        return iter(self.keep[order.numpy()].tolist())

    def __len__(self) -> int:
        return len(self.keep)


def restore(path: Path) -> dict[str, Any] | None:
    """The state a stopped fine-tune left in PATH (or, where PATH cannot be read, PATH.prev), else None."""
    for where in (path, checkpoint.previous(path)):
        if where.is_file():
            try:
                return torch.load(where, map_location="cpu", weights_only=True)
            except (RuntimeError, OSError, EOFError, ValueError, pickle.UnpicklingError) as err:  # truncated, corrupt
                print(f"fine-tune: {where} cannot be read ({type(err).__name__}); not resuming from it")
    return None


def finished(path: Path) -> dict[str, Any] | None:
    """The result a finished fine-tune wrote to PATH (RESUME.json), or None."""
    try:
        out = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if "curve" in out:
        out["curve"] = {int(k): v for k, v in out["curve"].items()}
    return out


class Classifier(nn.Module):
    """The pre-trained video encoder, dropout after its global max pooling, and a linear layer."""

    def __init__(self, encoder: nn.Module, num_classes: int, dropout: float = 0.5) -> None:
        super().__init__()
        self.encoder, self.dropout = encoder, nn.Dropout(dropout)
        self.fc = nn.Linear(encoder.out_dim, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.dropout(self.encoder(x)))  # (B, classes)


def finetune_optimizer(
    clf: Classifier, lr: float, backbone_lr_scale: float, weight_decay: float
) -> torch.optim.Optimizer:
    groups = [
        {"params": clf.fc.parameters(), "lr": lr},
        {"params": clf.encoder.parameters(), "lr": lr * backbone_lr_scale},
    ]
    for g in groups:
        g["initial_lr"] = g["lr"]  # the schedule scales each group from its own start
    return torch.optim.Adam(groups, weight_decay=weight_decay)


def finetune_step(
    clf: Classifier, optimizer: torch.optim.Optimizer, video: Tensor, label: Tensor, accumulate: int = 1
) -> tuple[float, int]:
    """One optimiser step over `accumulate` equal micro-batches of (video, label): the gradient of the mean loss of
    the whole batch; BatchNorm sees the micro-batches (the only difference). Returns the batch's mean loss and how
    many of its clips were classified right."""
    clf.train()
    optimizer.zero_grad(set_to_none=True)
    total, correct = 0.0, 0
    for v, y in zip(video.chunk(accumulate), label.chunk(accumulate)):
        logits = clf(v)  # (b, classes)
        loss = F.cross_entropy(logits, y) * len(y) / len(label)
        loss.backward()
        total += loss.item()
        correct += int((logits.argmax(1) == y).sum())
    optimizer.step()
    return total, correct


@torch.no_grad()
def video_accuracy(clf: Classifier, dataset: data.AVDataset, device: torch.device, workers: int = 2) -> float:
    """Top-1 of video-level predictions: softmax averaged over each video's clips."""
    clf.eval()
    correct = total = 0
    for batch in progress(loader(dataset, 8, workers), f"accuracy ({len(dataset)} videos)"):
        x = augment.normalise(batch["video"].to(device))  # (B, clips, 3, T, H, W)
        probs = clf(x.flatten(0, 1)).softmax(1).view(x.shape[0], x.shape[1], -1).mean(1)  # (B, classes)
        correct += int((probs.argmax(1).cpu() == batch["label"]).sum())
        total += x.shape[0]
    return correct / total


def finetune(
    encoder: nn.Module,
    cfg: Config,
    splits: Any,
    epochs: int = FINETUNE["epochs"],
    lr: float = FINETUNE["lr"],
    lr_min: float = FINETUNE["lr_min"],
    batch_size: int = FINETUNE["batch_size"],
    backbone_lr_scale: float = FINETUNE["backbone_lr_scale"],
    weight_decay: float = FINETUNE["weight_decay"],
    dropout: float = FINETUNE["dropout"],
    accumulate: int = 1,
    frames: int | None = None,
    select_on_val: bool = False,
    val_fraction: float = 0.1,
    device: torch.device | None = None,
    workers: int = 2,
    seed: int = 0,
    curve_every: int = 0,
    resume: str | Path | None = None,
) -> dict[str, Any]:
    """Sec. 5.1's fine-tuning on `splits` (evaluate.resolve's, checked there): the final epoch's test accuracy.
    select_on_val (not the paper's) holds out val_fraction of the train split and keeps the epoch that does best
    there; `frames` fine-tunes and tests on clips of that length (Sec. 6: 32); curve_every N > 0 also records the
    test accuracy every Nth epoch (out["curve"], never used to pick one); `resume`: the stem of the files that keep
    its state and result. The caller's encoder and random number generators are left as they were."""
    device = device or resolve_device(say=False)
    # RESUME + ".pt", not with_suffix: a checkpoint stem with a dot (ckpt.pt.prev) would lose the key
    kept, result = (Path(f"{resume}{tail}") for tail in (".pt", ".json")) if resume is not None else (None, None)
    if result is not None:
        done = finished(result)
        if done is not None:
            say(f"fine-tune: finished before; its result is {result}")
            return done
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):  # the caller's RNG kept
        if frames:
            cfg = copy.copy(cfg)
            cfg.frames = frames
        if batch_size % accumulate:
            raise ValueError(f"batch_size {batch_size} must divide into accumulate={accumulate} micro-batches")
        train_set = data.eval_set(cfg, splits.train.records, train_mode=True)
        test_set, classes = data.eval_set(cfg, splits.test.records), splits.train.classes
        fit_idx, val_set = np.arange(len(train_set)), None
        if select_on_val:
            rng = np.random.default_rng(seed)
            labels = train_set.labels.numpy()
            val_idx = np.concatenate(
                [
                    rng.permutation(np.flatnonzero(labels == c))[: max(1, int(val_fraction * (labels == c).sum()))]
                    for c in np.unique(labels)
                ]
            )
            fit_idx = np.setdiff1d(fit_idx, val_idx)
            val_set = data.eval_set(cfg, [splits.train.records[i] for i in val_idx])
        batch_size = min(batch_size, len(fit_idx))  # a small dataset: one full batch per step
        torch.manual_seed(seed)  # the linear layer's initial weights
        clf = Classifier(copy.deepcopy(encoder), len(classes), dropout).to(device)
        opt = finetune_optimizer(clf, lr, backbone_lr_scale, weight_decay)
        aug = augment.ClipAugment(train_set.spec, train=True).to(device)  # the pre-training augmentations
        order = data.SeededSampler(Shuffle(fit_idx, seed), seed)  # each item's draws: (seed, epoch, index)
        fit = loader(train_set, batch_size, workers, sampler=order, drop_last=True)
        steps, best, curve, start = epochs * len(fit), (-1.0, None), {}, 0
        state = restore(kept) if kept else None
        if state is not None:
            clf.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            start, best, curve = state["epoch"], (state["best_val"], state["best"]), state["curve"]
            say(f"fine-tune: resuming from {kept} after epoch {start}/{epochs}")
        for epoch in range(start, epochs):
            torch.manual_seed(seed * 1_000_003 + epoch)  # dropout and the batch augmentations: (seed, epoch)
            order.set_epoch(epoch)
            loss_sum = correct = seen = 0
            t0 = time.time()
            for i, batch in enumerate(progress(fit, f"fine-tune epoch {epoch + 1}/{epochs}")):
                # cosine from lr to lr_min, the backbone's group scaled by the same factor
                done = (epoch * len(fit) + i) / steps
                scale = lr_min / lr + 0.5 * (1.0 - lr_min / lr) * (1 + math.cos(math.pi * done))
                for g in opt.param_groups:
                    g["lr"] = g["initial_lr"] * scale
                video, _ = aug(batch["video"].to(device))  # (B, 3, T, H, W)
                loss, right = finetune_step(clf, opt, video, batch["label"].to(device), accumulate)
                loss_sum, correct, seen = loss_sum + loss * len(video), correct + right, seen + len(video)
            if select_on_val:
                val = video_accuracy(clf, val_set, device, workers)
                if val > best[0]:
                    best = (val, {k: v.detach().clone() for k, v in clf.state_dict().items()})
            if curve_every and (epoch + 1) % curve_every == 0 and epoch + 1 < epochs:
                curve[epoch + 1] = video_accuracy(clf, test_set, device, workers)
            if kept is not None:  # the state first: a line on the screen means the epoch is kept
                now = {"model": clf.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch + 1, "curve": curve}
                checkpoint.save_checkpoint(kept, **now, best_val=best[0], best=best[1])
            say(
                f"fine-tune epoch {epoch + 1}/{epochs}: loss {loss_sum / max(1, seen):.4f}, train accuracy "
                f"{correct / max(1, seen):.3f}, {time.time() - t0:.0f} s"
                + (f", validation accuracy {val:.3f}" if select_on_val else "")
                + (f", test accuracy {curve[epoch + 1]:.3f} (diagnostic)" if epoch + 1 in curve else "")
            )
        out = {}
        if select_on_val:
            clf.load_state_dict(best[1])
            out["val_acc"] = best[0]
        out["test_acc"] = video_accuracy(clf, test_set, device, workers)
        out["steps"] = steps
        if curve_every:
            out["curve"] = {**curve, epochs: out["test_acc"]}
        if result is not None:  # the result in a file of its own, whole (renamed into place), then the state goes
            Path(f"{result}.tmp").write_text(json.dumps(out))
            os.replace(f"{result}.tmp", result)
            for path in (kept, checkpoint.previous(kept)):
                path.unlink(missing_ok=True)
        return out


def protocol(fa: dict[str, Any]) -> dict[str, Any]:
    """The fine-tune's protocol (`fa`: finetune()'s settings), in words and settings, as evaluate.py keeps it."""
    chosen = "validation-selected epoch (not the paper's)" if fa["select_on_val"] else "final epoch on the test split"
    text = f"{fa['epochs']} epochs, batch {fa['batch_size']} ({fa['accumulate']} micro-batches), Adam "
    text += f"{fa['lr']:g}->{fa['lr_min']:g} cosine, backbone x0.1, wd 1e-3, dropout 0.5, {fa['frames']}-frame clips, "
    names = ("epochs", "batch_size", "accumulate", "lr", "lr_min", "frames", "select_on_val")
    return {"text": text + chosen, **{k: fa[k] for k in names}}


def add_options(p: OneLineParser) -> None:
    """evaluate.py's fine-tune options: the paper's values by default, the deviations named."""
    for flag, check, kind, default, text in (
        ("--finetune-epochs", at_least(1), int, FINETUNE["epochs"], "paper: 200"),
        ("--finetune-batch", at_least(2), int, FINETUNE["batch_size"], "paper: 192"),
        ("--finetune-lr", POSITIVE, float, FINETUNE["lr"], "paper: 1e-4 -> 1e-5 cosine"),
        ("--accumulate", at_least(1), int, 1, "micro-batches per step when a batch does not fit"),
        ("--frames", at_least(1), int, None, "fine-tune on clips of this many frames (paper: 8; Sec. 6 also 32)"),
        ("--curve-every", at_least(0), int, 0, "also record the test accuracy every N epochs (a diagnostic)"),
    ):
        p.add_checked(flag, check, type=kind, default=default, help=text)
    p.add_argument("--select-on-val", action="store_true", help="keep the best epoch on 10%% of the train split")


def settings(args: Any, p: OneLineParser) -> dict[str, Any]:
    """finetune()'s settings from evaluate.py's options; a batch that does not split into --accumulate is refused."""
    if args.finetune_batch % args.accumulate:
        p.error(f"--accumulate {args.accumulate}: expected a divisor of --finetune-batch ({args.finetune_batch})")
    out = {"epochs": args.finetune_epochs, "batch_size": args.finetune_batch, "lr": args.finetune_lr}
    out |= {"lr_min": args.finetune_lr / 10, "accumulate": args.accumulate, "select_on_val": args.select_on_val}
    return out | {"curve_every": args.curve_every} | ({"frames": args.frames} if args.frames else {})
