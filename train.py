"""Pre-training: xID warm-up, then Robust-xID (paper Sec. 4.3, Sec. 5.1 "Pretraining", Sec. 6).

Each step: augment the clips -> encode them -> eq. (17) against 1+K candidates of the memory bank, with
soft targets (eqs. (8)-(14)) and sample weights (eq. (6)) as the variant asks -> backward -> EMA update of
the bank. The first `warmup_epochs` minimise plain xID, eq. (1), at a constant learning rate; the next
`epochs` minimise --loss (losses.VARIANTS: xid, weighted, oracle, soft, robust) under a cosine one.
`--init` starts that second stage from a warm-up's model and bank, as Table 2's methods are compared.

    python train.py --preset demo                                   # synthetic data, CPU, minutes
    python train.py --preset ablation --data K400 --layout kinetics  # the paper's Sec. 5 setting
    .venv/bin/torchrun --nproc_per_node=8 train.py --preset sota --data K400 --layout kinetics
    python train.py --preset demo --init runs/demo/ckpt.pt --warmup-epochs 0 --loss weighted --out runs/w

Read top to bottom: the schedule, the objective, the step, what a step touches, one epoch, the recipe.
The training set and its injected faults are data.py's; resuming, checkpoints and the log are
checkpoint.py's Run, around the loop. Rerunning a command resumes from OUT/ckpt.pt, and stops
if a setting that changes the result differs (--allow-config-change overrides). Logs: a tqdm bar,
OUT/log.jsonl, a line per epoch, and a warning when a soft-target stage loses the bank's cross-modal
agreement (analysis/drift.py). Options and their paper values: python train.py --help (config.py).
"""

import math
import random
import sys
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

import checkpoint
import data
from analysis.diagnostics import bank_report
from analysis.drift import DriftWatch, guarded
from config import Config, parse_config
from losses import VARIANTS, robust_xid_loss, sample_weights, soft_targets
from machinery.devices import (
    DeviceError,
    any_rank,
    leave_group,
    precision_on,
    setup_distributed,
    start_line,
)
from machinery.schedule import cosine
from machinery.tally import Tally
from media.augment import ClipAugment
from media.loader_workers import workers_per_process
from memory_bank import MemoryBank, set_aside_failed
from model import AVModel

# ----------------------------------------------------------------------------- the schedule (Sec. 4.3, 5.1)


def stage_at(epoch: int, cfg: Config, history: list[dict[str, Any]] = ()) -> str:
    """xID during the warm-up, then the variant --loss names (with --soft-guard, once the drift rule fired on
    the run's log records, `history`, that variant without soft targets: analysis/drift.py)."""
    return "xid" if epoch < cfg.warmup_epochs else guarded(cfg.loss, history, cfg.soft_guard)


def lr_at(step: int, cfg: Config, steps_per_epoch: int) -> float:
    """Constant during the xID warm-up, then cosine from lr to lr_min over the second stage."""
    warm = cfg.warmup_epochs * steps_per_epoch
    if step < warm:
        return cfg.lr
    return cosine((step - warm) / max(1, cfg.epochs * steps_per_epoch), cfg.lr, cfg.lr_min)


# ----------------------------------------------------------------------------- the objective and the step


def objective(
    v: Tensor, a: Tensor, idx: Tensor, bank: MemoryBank, cfg: Config, stage: str, truth: dict[str, Tensor]
) -> tuple[Tensor, dict[str, Tensor]]:
    """eq. (17) for one batch with the switches of VARIANTS[stage]: candidates and their bank
    targets, soft targets T (eqs. (8)-(14)) if the variant is soft, weights w_i from the bank scores
    (eq. (6)) or the oracle's 0/1 if it is weighted. Returns the loss and statistics for the log."""
    variant = VARIANTS[stage]
    v, a = v.float(), a.float()  # (B, D) each: AMP's bf16/fp16 would lose the softmax at tau 0.07 (losses.py)
    cand = bank.sample(idx, cfg.num_negatives)  # (B, 1+K)
    vbar, abar = bank.targets(cand)  # (B, 1+K, D) each
    targets = None
    if variant.soft:
        labels = truth["labels"][cand] if cfg.soft_targets == "oracle" else None  # (B, 1+K)
        targets = soft_targets(vbar, abar, cfg.soft_targets, cfg.lam, cfg.tau_s, cfg.tau_t, labels=labels)
    scores = bank.scores()  # (N,): vbar_i . abar_i before this step's update
    mu, sigma = bank.score_stats(scores)  # over the valid slots
    weights = None
    if variant.weights == "scores":
        weights = sample_weights(scores[idx], mu, sigma, cfg.delta, cfg.kappa, cfg.w_min)  # (B,)
    elif variant.weights == "oracle":  # Sec. 5.2: w_i = 0 on the injected faulty positives, 1 elsewhere
        weights = (~truth["injected"][idx]).float()  # (B,)
    loss, _ = robust_xid_loss(v, a, vbar, abar, weights, targets, cfg.tau)
    soft_mass = 1 - 0.5 * (targets[0][:, 0] + targets[1][:, 0]).mean() if targets else loss.new_zeros(())
    weight = weights.mean() if weights is not None else loss.new_ones(())
    return loss, {"weight": weight, "mu": mu, "sigma": sigma, "soft_mass": soft_mass}


def train_step(
    parts: "Parts", batch: dict[str, Tensor], cfg: Config, stage: str, lr: float
) -> tuple[Tensor, dict[str, Tensor]]:
    """One step of the recipe on a loader batch (uint8 crops, waveforms, bank indices): augment on the
    device -> encode -> eq. (17) -> backward -> EMA update of the bank. Returns the loss and the
    statistics, on the device (no host sync here)."""
    bank, device = parts.bank, parts.bank.video.device
    for group in parts.optimizer.param_groups:
        group["lr"] = lr
    keep, skipped = set_aside_failed(bank, batch)  # before the objective draws negatives
    video, audio = device_inputs(parts, batch, device)  # (B, 3, T, H, W), (B, 1, F, T')
    idx = batch["index"].to(device, non_blocking=True)  # (B,)
    with parts.autocast:
        v, a = parts.model(video, audio)  # (B, 128) each
    loss, stats = objective(v, a, idx, bank, cfg, stage, parts.truth)
    parts.optimizer.zero_grad(set_to_none=True)
    parts.scaler.scale(loss).backward()
    parts.scaler.step(parts.optimizer)
    parts.scaler.update()
    bank.update(idx, v, a, keep=keep)  # after the loss: this step's targets came from the old memory
    stats["loss"] = loss
    stats["skipped"] = torch.tensor(float(skipped), device=device)  # items, over all ranks
    return loss.detach(), {k: val.detach().float() for k, val in stats.items()}


def device_inputs(parts: "Parts", batch: dict[str, Tensor], device: torch.device) -> tuple[Tensor, Tensor]:
    """The loader's uint8 crops and waveforms (the in-memory set's mel power), augmented on the device:
    colour, blur and log-mel, batched. -> video (B, 3, T, H, W) in the model's format, audio (B, 1, F, T')."""
    wav, mel = (batch[k].to(device, non_blocking=True) if k in batch else None for k in ("audio", "mel"))
    video = batch["video"].to(device, non_blocking=True)  # (B, 3, T, H, W) uint8
    video, audio = parts.augment(video, wav, mel)  # (B, 3, T, H, W), (B, 1, F, T')
    return video.to(memory_format=parts.video_format), audio


# ----------------------------------------------------------------------------- what a step touches


@dataclass
class Parts:
    """Everything a training step touches."""

    model: torch.nn.Module  # AVModel, wrapped in DDP under torchrun
    augment: ClipAugment  # the device half of the input (media/augment.py)
    bank: MemoryBank
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    autocast: object  # torch.autocast context, or nullcontext() in fp32
    video_format: torch.memory_format
    truth: dict  # ground truth on the device, for the oracles only: labels, injected

    def unwrapped(self) -> torch.nn.Module:
        """The model without its DDP wrapper: what is saved (the wrapper only synchronises gradients)."""
        return self.model.module if isinstance(self.model, DDP) else self.model

    def buffers(self) -> Iterator[Tensor]:
        return self.unwrapped().buffers()

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.unwrapped().state_dict(),
            "bank": self.bank.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A resumed run's whole state, or a branch's model and bank alone (--init: a fresh optimizer)."""
        self.unwrapped().load_state_dict(state["model"])
        self.bank.load_state_dict(state["bank"])
        if "optimizer" in state:
            self.optimizer.load_state_dict(state["optimizer"])
        if state.get("scaler") and self.scaler.is_enabled():  # empty when saved without fp16 (bf16 or fp32)
            self.scaler.load_state_dict(state["scaler"])


def build_parts(cfg: Config, dataset: data.AVDataset, device: torch.device) -> Parts:
    model = AVModel(**checkpoint.model_args(cfg)).to(device)
    amp = precision_on(cfg.amp, device)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
    video_format = torch.channels_last_3d if cfg.channels_last and device.type == "cuda" else torch.contiguous_format
    model.video.to(memory_format=video_format)
    return Parts(
        model=model,
        augment=ClipAugment(dataset.spec, train=True).to(device),
        bank=MemoryBank(len(dataset), momentum=cfg.momentum, seed=cfg.seed).to(device),
        optimizer=torch.optim.Adam(model.parameters(), lr=cfg.lr),
        scaler=torch.amp.GradScaler(device.type, enabled=amp == "fp16"),  # fp16 only
        autocast=torch.autocast(device.type, dtype=amp_dtype) if amp_dtype else nullcontext(),
        video_format=video_format,
        truth={"labels": dataset.labels.to(device), "injected": dataset.injected.to(device)},
    )


# ----------------------------------------------------------------------------- one epoch


def train_epoch(
    parts: Parts,
    loader: torch.utils.data.DataLoader,
    cfg: Config,
    epoch: int,
    world: int,
    show_bar: bool,
    history: list[dict[str, Any]] = (),
) -> dict[str, Any]:
    """One pass over the loader. Returns the epoch's log record: the means of the step statistics, and
    data_wait, the share of the epoch's time the loop waited for the loader."""
    stage, steps = stage_at(epoch, cfg, history), len(loader)
    parts.model.train()
    tally = Tally(parts.bank.video.device)
    shown = {"disable": not show_bar, "leave": False, "file": sys.stdout}
    bar = tqdm(loader, f"epoch {epoch} {stage}", total=steps, **shown)
    for i, batch in enumerate(tally.waiting(bar)):
        step = epoch * steps + i
        loss, stats = train_step(parts, batch, cfg, stage, lr_at(step, cfg, steps))
        tally.add(stats, batch["video"].shape[0] * world)
        if i % 10 == 0 or i == steps - 1:  # the only host syncs: every 10th step
            if any_rank(not math.isfinite(loss.item()), parts.bank.video.device):  # every rank stops here
                raise SystemExit(
                    f"non-finite loss ({loss.item()}) at or before step {step} (epoch {epoch}): "
                    f"lower --lr, raise --tau, --tau-s or --tau-t if one is near 0, or try --amp off"
                )
            bar.set_postfix(loss=f"{loss.item():.3f}", clips_s=f"{tally.clips_per_s():.0f}")
    lr = lr_at(epoch * steps, cfg, steps)
    excluded = parts.bank.num_items - parts.bank.num_valid
    return {"epoch": epoch, "stage": stage, "lr": lr, **tally.means(steps, world), "excluded": excluded}


# ----------------------------------------------------------------------------- the recipe


def main(cfg: Config, on_epoch: Callable[[int], None] | None = None) -> tuple[AVModel, MemoryBank]:
    """Train as cfg says. on_epoch(epoch) is called after each epoch that ran and was logged (rank 0):
    how experiments/demo.py shows its progress."""
    try:
        ddp, rank, world, device = setup_distributed(cfg.device)
    except DeviceError as err:  # --device cuda without a usable GPU: one line, no traceback
        raise SystemExit(f"train.py: {err}") from None
    with checkpoint.hold_for_job(Path(cfg.out), rank == 0):  # one run per folder; a dead holder does not count
        return run(cfg, ddp, rank, world, device, on_epoch)


def run(
    cfg: Config,
    ddp: bool,
    rank: int,
    world: int,
    device: torch.device,
    on_epoch: Callable[[int], None] | None = None,
) -> tuple[AVModel, MemoryBank]:
    if rank == 0:
        amp = precision_on(cfg.amp, device)
        print(start_line("train.py", device, world, "fp32" if amp == "off" else amp, workers_per_process(cfg.workers)))
    torch.manual_seed(cfg.seed + rank)  # different negatives and augmentations per rank
    random.seed(cfg.seed + rank)
    if cfg.init and not Path(cfg.init).is_file():  # before the data is read
        raise SystemExit(f"train.py: --init {cfg.init}: no such checkpoint (a train.py run's OUT/ckpt.pt)")
    checkpoint.refuse_other_settings(cfg)  # a resume under settings that change what it trained: also before
    dataset = data.build_train_set(cfg, device)
    sampler, loader = data.train_loader(cfg, dataset, rank, world, device)
    parts, instances = build_parts(cfg, dataset, device), dataset.instances()
    show_bar = rank == 0 and sys.stdout.isatty()
    try:  # resumes OUT/ckpt.pt if there is one, at its last whole epoch
        r = checkpoint.Run(cfg, parts, instances, asdict(dataset.spec), len(loader), rank)
        if cfg.init and not r.resumed:  # Table 2: a second stage starts from the warm-up's model and bank
            parts.load_state_dict(checkpoint.branch_state(cfg.init, instances, cfg.allow_config_change))
        watch = DriftWatch(parts.bank, cfg, not r.resumed, rank == 0)  # a branch's start: the bank it was given
        if ddp:  # after the restore: DDP starts every replica from rank 0's weights
            parts.model = DDP(parts.model, device_ids=[device.index] if device.type == "cuda" else None)
        for epoch in range(r.start, cfg.warmup_epochs + cfg.epochs):
            sampler.set_epoch(epoch)  # shuffling and every item's augmentation seeds depend on the epoch only
            record = train_epoch(parts, loader, cfg, epoch, world, show_bar, r.history)
            # log only: bank_report reads the ground truth, the drift signals need none
            record.update(bank_report(parts.bank, dataset.labels, dataset.faulty, cfg.tau_s, cfg.tau_t))
            record.update(watch.signals(epoch))
            r.end_epoch(epoch, record)  # the checkpoint, then the log line
            if on_epoch is not None and rank == 0:
                on_epoch(epoch)
            watch.warn(r.history)  # a soft-target stage losing the bank's cross-modal agreement: one line
    except SystemExit:  # a non-finite loss, an unwritable checkpoint: exits every rank takes together
        leave_group(parts, ddp)
        raise
    leave_group(parts, ddp)
    return parts.unwrapped(), parts.bank


if __name__ == "__main__":
    main(parse_config(description=__doc__.split("\n\n")[0]))
