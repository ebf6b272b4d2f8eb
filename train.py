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

Read top to bottom. The data and its faults are data.py's; the checkpoint, the log and resuming (the same
command, after the last whole epoch) checkpoint.py's; the options and their paper values config.py's.
"""

import gc
import math
import os
import random
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

import checkpoint
import data
from augment import ClipAugment
from config import Config, DeviceError, parse_config, precision, resolve_device, start_line
from data import workers_per_process
from losses import VARIANTS, robust_xid_loss, sample_weights, soft_targets
from memory_bank import MemoryBank, faulty_auroc
from model import AVModel

# ----------------------------------------------------------------------------- where it runs: torchrun decides


def setup_distributed(request: str = "auto") -> tuple[bool, int, int, torch.device]:
    """(ddp, rank, world, device): plain python is one process; under torchrun NCCL on GPUs, a process per
    cuda:LOCAL_RANK, and gloo on CPUs. The device is resolve_device's (config.py): rank 0 alone warns."""
    device = resolve_device(request, say=int(os.environ.get("RANK", 0)) == 0)
    if "RANK" not in os.environ:
        return False, 0, 1, device
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if device.type == "cuda":
        device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}")
        torch.cuda.set_device(device)
    return True, dist.get_rank(), dist.get_world_size(), device


def end_distributed(together: bool = True) -> None:
    """Destroy the group once the DDP wrapper is gone: the other order hangs at exit (pytorch/pytorch#56297)."""
    if together:
        dist.barrier()  # the last collectives finish while this thread waits without the GIL
    gc.collect()  # the wrapper's reference cycles go while the group still has an owner
    dist.destroy_process_group()


def any_rank(flag: bool, device: torch.device) -> bool:
    """Whether `flag` holds on any rank: an exit every rank then takes together."""
    if not dist.is_initialized():
        return flag
    t = torch.tensor(float(flag), device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


# ----------------------------------------------------------------------------- the schedule, the step, one epoch


def stage_at(epoch: int, cfg: Config) -> str:
    """xID during the warm-up, then the variant --loss names."""
    return "xid" if epoch < cfg.warmup_epochs else cfg.loss


def lr_at(step: int, cfg: Config, steps_per_epoch: int) -> float:
    """Constant during the xID warm-up, then half a cosine from lr to lr_min over the second stage."""
    warm = cfg.warmup_epochs * steps_per_epoch
    if step < warm:
        return cfg.lr
    progress = (step - warm) / max(1, cfg.epochs * steps_per_epoch)
    return cfg.lr_min + 0.5 * (cfg.lr - cfg.lr_min) * (1 + math.cos(math.pi * progress))


def objective(
    v: Tensor, a: Tensor, idx: Tensor, bank: MemoryBank, cfg: Config, stage: str, truth: dict[str, Tensor]
) -> tuple[Tensor, dict[str, Tensor]]:
    """eq. (17) for one batch with the switches of VARIANTS[stage]: candidates and their bank targets, soft targets
    T (eqs. (8)-(14)) if soft, weights w_i (eq. (6), or the oracle's 0/1) if weighted -> the loss, statistics."""
    variant = VARIANTS[stage]
    v, a = v.float(), a.float()  # (B, D) each: AMP's bf16/fp16 would lose the softmax at tau 0.07 (losses.py)
    cand = bank.sample(idx, cfg.num_negatives)  # (B, 1+K)
    vbar, abar = bank.targets(cand)  # (B, 1+K, D) each
    targets = None
    if variant.soft:
        labels = truth["labels"][cand] if cfg.soft_targets == "oracle" else None  # (B, 1+K)
        targets = soft_targets(vbar, abar, cfg.soft_targets, cfg.lam, cfg.tau_s, cfg.tau_t, labels=labels)
    scores = bank.scores()  # (N,): vbar_i . abar_i before this step's update
    mu, sigma = bank.score_stats(scores)
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
    """One step on a loader batch: augment on the device -> encode -> eq. (17) -> backward -> EMA update of the
    bank. Returns the loss and the statistics, on the device (no host sync here)."""
    bank, device = parts.bank, parts.bank.video.device
    for group in parts.optimizer.param_groups:
        group["lr"] = lr
    # the loader's uint8 crops and waveforms (or the in-memory set's mel power), augmented on the device, batched
    wav, mel = (batch[k].to(device, non_blocking=True) if k in batch else None for k in ("audio", "mel"))
    video, audio = parts.augment(batch["video"].to(device, non_blocking=True), wav, mel)  # (B,3,T,H,W), (B,1,F,T')
    video = video.to(memory_format=parts.video_format)
    idx = batch["index"].to(device, non_blocking=True)  # (B,)
    with parts.autocast:
        v, a = parts.model(video, audio)  # (B, 128) each
    loss, stats = objective(v, a, idx, bank, cfg, stage, parts.truth)
    parts.optimizer.zero_grad(set_to_none=True)
    parts.scaler.scale(loss).backward()
    parts.scaler.step(parts.optimizer)
    parts.scaler.update()
    bank.update(idx, v, a)  # after the loss: this step's targets came from the old memory
    stats["loss"] = loss
    return loss.detach(), {k: val.detach().float() for k, val in stats.items()}


@dataclass
class Parts:
    """Everything a training step touches."""

    model: torch.nn.Module  # AVModel, wrapped in DDP under torchrun
    augment: ClipAugment  # the device half of the input (augment.py)
    bank: MemoryBank
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    autocast: object  # torch.autocast context, or nullcontext() in fp32
    video_format: torch.memory_format
    truth: dict  # ground truth on the device, for the oracles only: labels, injected

    def unwrapped(self) -> torch.nn.Module:  # what is saved: DDP's wrapper only synchronises gradients
        return self.model.module if isinstance(self.model, DDP) else self.model

    def state_dict(self) -> dict[str, Any]:
        parts = {"bank": self.bank, "optimizer": self.optimizer, "scaler": self.scaler}
        return {"model": self.unwrapped().state_dict(), **{k: part.state_dict() for k, part in parts.items()}}

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
    amp = precision(cfg.amp, device)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
    video_format = torch.channels_last_3d if cfg.channels_last and device.type == "cuda" else torch.contiguous_format
    model.video.to(memory_format=video_format)
    return Parts(
        model=model,
        augment=ClipAugment(dataset.spec, train=True).to(device),
        bank=MemoryBank(len(dataset), momentum=cfg.momentum, seed=cfg.seed).to(device),
        optimizer=torch.optim.Adam(model.parameters(), lr=cfg.lr, foreach=True),  # a CPU's default loops: slower, same
        scaler=torch.amp.GradScaler(device.type, enabled=amp == "fp16"),  # fp16 only
        autocast=torch.autocast(device.type, dtype=amp_dtype) if amp_dtype else nullcontext(),
        video_format=video_format,
        truth={"labels": dataset.labels.to(device), "injected": dataset.injected.to(device)},
    )


def train_epoch(
    parts: Parts, loader: torch.utils.data.DataLoader, cfg: Config, epoch: int, world: int, show_bar: bool
) -> dict[str, Any]:
    """One pass over the loader -> the epoch's log record: the step statistics' means (of the global batch under
    DDP), clips/s, the share of the time spent waiting for the loader."""
    stage, steps, device = stage_at(epoch, cfg), len(loader), parts.bank.video.device
    parts.model.train()
    sums: dict[str, Tensor] = {}  # summed on the device: no host sync per step
    shown = {"disable": not show_bar, "leave": False, "file": sys.stdout}
    bar = tqdm(loader, f"epoch {epoch} {stage}", total=steps, **shown)
    t0 = ready = time.time()
    waited, seen = 0.0, 0
    for i, batch in enumerate(bar):
        waited += time.time() - ready  # the loader was behind (a GPU step ahead of it blocks at the sync instead)
        step = epoch * steps + i
        loss, stats = train_step(parts, batch, cfg, stage, lr_at(step, cfg, steps))
        for k, val in stats.items():
            sums[k] = sums.get(k, 0.0) + val
        seen += len(batch["index"]) * world
        if i % 10 == 0 or i == steps - 1:  # the only host syncs: every 10th step
            if any_rank(not math.isfinite(loss.item()), device):  # every rank stops here
                raise SystemExit(
                    f"non-finite loss ({loss.item()}) at or before step {step} (epoch {epoch}): "
                    f"lower --lr, raise --tau, --tau-s or --tau-t if one is near 0, or try --amp off"
                )
            bar.set_postfix(loss=f"{loss.item():.3f}", clips_s=f"{seen / (time.time() - t0):.0f}")
        ready = time.time()
    if dist.is_initialized():  # the global batch's means: each rank's loss is its share of eq. (17)
        for k in sorted(sums):
            dist.all_reduce(sums[k])
            sums[k] /= world
    seconds = time.time() - t0
    return {
        "epoch": epoch,
        "stage": stage,
        "lr": lr_at(epoch * steps, cfg, steps),
        **{k: float(val) / steps for k, val in sums.items()},
        "clips_per_s": seen / seconds,
        "data_wait": waited / max(1e-9, seconds),
    }


# ----------------------------------------------------------------------------- the recipe

Report = Callable[[dict[str, Any] | None, MemoryBank, data.AVDataset, list[dict[str, Any]]], None]


def main(cfg: Config, report: Report | None = None) -> tuple[AVModel, MemoryBank]:
    """Train as cfg says. report(record, bank, dataset, history), on rank 0, adds to each epoch's record before it
    is checkpointed and logged, and is called once with record None before the first epoch: make demo's bank
    diagnostics, drift warning and progress (tools/bank_report.BankReport)."""
    try:
        ddp, rank, world, device = setup_distributed(cfg.device)
    except DeviceError as err:  # --device cuda without a usable GPU: one line, no traceback
        raise SystemExit(f"train.py: {err}") from None
    with checkpoint.hold_folder(Path(cfg.out), rank == 0):  # one run per folder; a dead holder does not count
        return run(cfg, ddp, rank, world, device, report)


def run(cfg: Config, ddp: bool, rank: int, world: int, device: torch.device, report: Report | None = None) -> Any:
    if rank == 0:
        amp = precision(cfg.amp, device)
        print(start_line("train.py", device, world, "fp32" if amp == "off" else amp, workers_per_process(cfg.workers)))
    torch.manual_seed(cfg.seed + rank)  # different negatives and augmentations per rank
    random.seed(cfg.seed + rank)
    if cfg.init and not Path(cfg.init).is_file():  # before the data is read
        raise SystemExit(f"train.py: --init {cfg.init}: no such checkpoint (a train.py run's OUT/ckpt.pt)")
    checkpoint.refuse_other_settings(cfg)  # a resume under settings that change what it trained: also before
    dataset = data.build_train_set(cfg, device)
    sampler, loader = data.train_loader(cfg, dataset, rank, world, device)
    parts, instances = build_parts(cfg, dataset, device), dataset.instances()
    report = report if rank == 0 else None
    try:  # resumes OUT/ckpt.pt if there is one, after its last whole epoch
        r = checkpoint.Run(cfg, parts, instances, asdict(dataset.spec), len(loader), rank)
        if cfg.init and not r.resumed:  # Table 2: a second stage starts from the warm-up's model and bank
            parts.load_state_dict(checkpoint.branch_state(cfg.init, instances, cfg.allow_config_change, cfg))
        if report is not None:  # the bank this run starts from (a branch's: its warm-up's)
            report(None, parts.bank, dataset, r.history)
        if ddp:  # after the restore: DDP starts every replica from rank 0's weights
            parts.model = DDP(parts.model, device_ids=[device.index] if device.type == "cuda" else None)
        for epoch in range(r.start, cfg.warmup_epochs + cfg.epochs):
            sampler.set_epoch(epoch)  # shuffling and every item's augmentation seeds depend on the epoch only
            record = train_epoch(parts, loader, cfg, epoch, world, rank == 0 and sys.stdout.isatty())
            record["faulty_auroc"] = faulty_auroc(parts.bank, dataset.faulty)  # log only: the ground truth
            if report is not None:
                report(record, parts.bank, dataset, r.history)
            r.end_epoch(epoch, record)  # the checkpoint, then rank 0's log line
    except data.BadMedia as err:  # one rank alone meets it, the others wait in a collective: torchrun stops them
        leave_group(parts, ddp, together=False)  # a loader worker's traceback ends in the line naming the file
        raise SystemExit(f"train.py: {str(err).strip().splitlines()[-1].split('BadMedia: ')[-1]}") from None
    except SystemExit:  # a non-finite loss, an unwritable checkpoint: every rank stops here together
        leave_group(parts, ddp)
        raise
    leave_group(parts, ddp)
    return parts.unwrapped(), parts.bank


def leave_group(parts: Parts, ddp: bool, together: bool = True) -> None:
    """Under torchrun, on the way out of a run that ended or stopped: drop the DDP wrapper, then the group
    (after a barrier where every rank leaves `together`)."""
    if ddp:
        parts.model = parts.unwrapped()
        end_distributed(together)


if __name__ == "__main__":
    main(parse_config(description=__doc__.split("\n\n")[0]))
