"""Pre-training: xID warm-up, then Robust-xID (paper Sec. 4.3, Sec. 5.1 "Pretraining", Sec. 6).

Each step: encode the clips -> draw 1+K candidates from the memory bank -> their targets -> soft
targets (eqs. (8)-(14)) and sample weights (eq. (6)) as the variant asks -> the objective, eq. (17)
-> backward -> EMA update of the bank. The first `warmup_epochs` minimise plain xID, eq. (1), at a
constant learning rate; the next `epochs` minimise --loss (losses.VARIANTS: xid, weighted, oracle,
soft, robust) under a cosine learning rate. `--init` branches a second stage off a warm-up.

    python train.py --preset demo                                   # synthetic data, CPU, minutes
    python train.py --preset ablation --data K400 --layout kinetics  # the paper's Sec. 5 setting
    torchrun --nproc_per_node=8 train.py --preset sota --data K400 --layout kinetics
    python train.py --preset demo --init runs/demo/ckpt.pt --warmup-epochs 0 --loss weighted --out runs/w

Rerunning a command resumes from OUT/ckpt.pt; it stops if a setting that changes the result differs
from the checkpoint's (--allow-config-change overrides); how a run survives faults is persistence/runstate.py's.
Logs: a tqdm bar and OUT/log.jsonl, one line per epoch. Options and their paper values: python
train.py --help (config.py).
"""

import math
import os
import random
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

import data
from analysis.diagnostics import bank_report
from augment import ClipAugment
from config import Config, parse_config
from losses import VARIANTS, robust_xid_loss, sample_weights, soft_targets
from media import loader_workers, manifest
from memory_bank import MemoryBank
from model import AVModel
from persistence import checkpoint, runstate

# ----------------------------------------------------------------------------- what a run is built from


def build_train_set(cfg: Config) -> data.AVDataset:
    """The pre-training instances (one bank slot each), with the injected faulty positives."""
    if not Path(cfg.data).is_dir():
        name = Path(cfg.data).name
        make = (
            "make demo makes it, or python -m tools.synthetic --out data/synth2000 --train-per-class 200"
            if name == "synth2000"
            else f"python -m tools.synthetic --out {cfg.data} makes a synthetic set"
            if name.startswith("synth")
            else 'README, "Real datasets", says how to lay one out'
        )
        raise SystemExit(f"train.py: dataset folder not found: {cfg.data} (--data). {make}")
    try:  # a split list, a manifest or a folder that holds nothing usable: one line, not a traceback
        records, classes = manifest.load_records(
            cfg.layout, cfg.data, cfg.split, cfg.fold, cfg.annotations or None, cfg.manifest or None, need_audio=True
        )
    except (FileNotFoundError, ValueError) as err:
        raise SystemExit(f"train.py: {err}") from None
    if cfg.num_negatives >= len(records):  # eq. (1)'s negatives are other instances: K >= N only repeats them
        raise SystemExit(
            f"train.py: --num-negatives {cfg.num_negatives}: expected fewer than the {len(records)} training "
            f"videos of {cfg.data} (at most {len(records) - 1})"
        )
    try:
        dataset = data.AVDataset(
            records,
            data.clip_spec(cfg),
            train=True,
            faulty_fraction=cfg.faulty_fraction,
            **injection(cfg, records),
            seed=cfg.seed,
            max_bad_fraction=cfg.max_bad_fraction,
            preload=cfg.preload,
            preload_cache=cfg.preload_cache,
        )
    except ValueError as err:  # e.g. a faulty-positive pool smaller than the share to inject
        raise SystemExit(f"train.py: {err}") from None
    dataset.classes = classes
    return dataset


def injection(cfg: Config, records: list[manifest.Record]) -> dict[str, Any]:
    """data.AVDataset's faulty_source and pool for the run's --faulty-source."""
    if cfg.faulty_fraction == 0 or cfg.faulty_source == "train":
        return {"faulty_source": "train", "pool": ()}
    return {"faulty_source": "pool", "pool": injection_pool(cfg, records)}


def pool_folder(cfg: Config) -> Path:
    """Where --faulty-source heldout or noise takes its sounds: --faulty-pool, else the synthetic set's."""
    if cfg.faulty_pool:
        return Path(cfg.faulty_pool)
    return Path(cfg.data) / ("_heldout" if cfg.faulty_source == "heldout" else "_pool")


def injection_pool(cfg: Config, records: list[manifest.Record]) -> list[tuple[str, float]]:
    """The replacement audio of Sec. 5.2 as (path, seconds): 'heldout' reads --faulty-pool (default
    ROOT/_heldout), 'noise' ROOT/_pool. A pool that holds a file of the training or the test split
    is refused: the paper's injected audio is "not part of the training set"."""
    root, folder = Path(cfg.data), pool_folder(cfg)
    if not folder.is_dir():
        raise SystemExit(
            f"--faulty-fraction {cfg.faulty_fraction} injects audio from outside the training set "
            f"(paper, Sec. 5.2), but the pool {folder} does not exist. Pass --faulty-pool DIR, a folder "
            f"of media in neither split (for example the videos left out of a Kinetics subset), or "
            f"regenerate the synthetic set (synthetic.py writes ROOT/_heldout); --faulty-source train "
            f"lends other training videos' audio instead (a deviation)"
        )
    try:
        test = manifest.list_split(cfg.layout, root, "test", cfg.fold, cfg.annotations or None)[0]
    except (FileNotFoundError, ValueError):  # a dataset without a test split: nothing there to leak into
        test = []
    in_splits = {Path(r.path).resolve() for r in records} | {(root / rel).resolve() for rel, _ in test}
    pool = manifest.audio_pool(folder)
    shared = [p for p, _ in pool if Path(p).resolve() in in_splits]
    if shared:
        raise SystemExit(
            f"--faulty-pool {folder}: {len(shared)} of its files are training or test videos "
            f"(first: {shared[0]}); injected audio must come from outside both splits"
        )
    return pool


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


def build_parts(cfg: Config, dataset: data.AVDataset, device: torch.device) -> Parts:
    model = AVModel(**checkpoint.model_args(cfg)).to(device)
    amp = cfg.amp if cfg.amp != "auto" else ("bf16" if device.type == "cuda" else "off")
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


# ----------------------------------------------------------------------------- schedule and step


def lr_at(step: int, cfg: Config, steps_per_epoch: int) -> float:
    """Constant during the xID warm-up, then cosine from lr to lr_min over the second stage."""
    warm = cfg.warmup_epochs * steps_per_epoch
    if step < warm:
        return cfg.lr
    progress = (step - warm) / max(1, cfg.epochs * steps_per_epoch)
    return cfg.lr_min + 0.5 * (cfg.lr - cfg.lr_min) * (1 + math.cos(math.pi * progress))


def stage_at(epoch: int, cfg: Config) -> str:
    return "xid" if epoch < cfg.warmup_epochs else cfg.loss


def objective(
    v: Tensor, a: Tensor, idx: Tensor, bank: MemoryBank, cfg: Config, stage: str, truth: dict[str, Tensor]
) -> tuple[Tensor, dict[str, Tensor]]:
    """eq. (17) for one batch with the switches of VARIANTS[stage]: candidates and their bank
    targets, soft targets T (eqs. (8)-(14)) if the variant is soft, weights w_i from the bank scores
    (eq. (6)) or the oracle's 0/1 if it is weighted. Returns the loss and statistics for the log."""
    variant = VARIANTS[stage]
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


def device_inputs(parts: Parts, batch: dict[str, Tensor], device: torch.device) -> tuple[Tensor, Tensor]:
    """The loader's uint8 crops and waveforms, augmented on the device: colour, blur and spectrograms
    are done here, batched. -> video (B, 3, T, H, W) in the model's memory format, audio (B, 1, F, T')."""
    video, audio = parts.augment(
        batch["video"].to(device, non_blocking=True), batch["audio"].to(device, non_blocking=True)
    )  # (B, 3, T, H, W), (B, 1, F, T')
    return video.to(memory_format=parts.video_format), audio


def train_step(
    parts: Parts, batch: dict[str, Tensor], cfg: Config, stage: str, lr: float
) -> tuple[Tensor, dict[str, Tensor]]:
    """One step of the recipe on a loader batch (uint8 crops, waveforms, bank indices): augment on
    the device -> encode -> eq. (17) -> backward -> EMA update of the bank. bench.py times this
    same function. Returns the loss and the statistics, on the device (no host sync here)."""
    bank = parts.bank
    device = bank.video.device
    for group in parts.optimizer.param_groups:
        group["lr"] = lr
    video, audio = device_inputs(parts, batch, device)
    idx = batch["index"].to(device, non_blocking=True)  # (B,)
    # A file that failed to decode came as another item (data.AVDataset._get): its slot leaves the
    # bank before the loss samples negatives, and the substitute, whose slot may also be in the batch
    # as itself, does not update the bank.
    failed = batch.get("failed")
    failed = torch.full((len(batch["index"]),), -1) if failed is None else failed  # (B,) on the host
    failed_anywhere = gather_on_host(failed)  # (W*B,)
    substituted = failed_anywhere >= 0  # (W*B,)
    any_substitute = bool(substituted.any())  # the same on every rank
    if any_substitute:
        bank.exclude(failed_anywhere[substituted].unique())
    with parts.autocast:
        v, a = parts.model(video, audio)  # (B, 128) each
    loss, stats = objective(v, a, idx, bank, cfg, stage, parts.truth)
    parts.optimizer.zero_grad(set_to_none=True)
    parts.scaler.scale(loss).backward()
    parts.scaler.step(parts.optimizer)
    parts.scaler.update()
    # after the loss: this step's targets came from the old memory
    bank.update(idx, v, a, keep=(failed < 0) if any_substitute else None)
    stats["loss"] = loss
    stats["skipped"] = torch.tensor(float(substituted.sum()), device=device)  # items, over all ranks
    return loss.detach(), {k: val.detach().float() for k, val in stats.items()}


def gather_on_host(t: Tensor) -> Tensor:
    """A small CPU tensor (B,) from every rank, concatenated, without a device sync: under NCCL it
    travels over a gloo group of its own (made once). One process: t itself."""
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return t
    global _HOST_GROUP
    if _HOST_GROUP is None:
        _HOST_GROUP = dist.new_group(backend="gloo") if dist.get_backend() != "gloo" else dist.group.WORLD
    out = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t.contiguous(), group=_HOST_GROUP)
    return torch.cat(out)


_HOST_GROUP = None


# ----------------------------------------------------------------------------- the recipe's steps


def setup_distributed() -> tuple[bool, int, int, torch.device]:
    """torchrun's environment decides: (ddp, rank, world, device). Plain python is one process."""
    if "RANK" not in os.environ:
        return False, 0, 1, torch.device("cuda" if torch.cuda.is_available() else "cpu")
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}")
        torch.cuda.set_device(device)
    return True, dist.get_rank(), dist.get_world_size(), device


def make_loader(
    cfg: Config, dataset: data.AVDataset, rank: int, world: int, device: torch.device
) -> tuple[data.SeededSampler, torch.utils.data.DataLoader]:
    """Shuffled per rank; each item's random draws seeded by (seed, epoch, index) (data.SeededSampler)."""
    if cfg.batch_size % world:
        raise SystemExit(f"--batch-size {cfg.batch_size} is the global batch: it must divide by {world} processes")
    sampler = data.SeededSampler(
        torch.utils.data.DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=cfg.seed),
        seed=cfg.seed + 7919 * rank,
    )
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=cfg.batch_size // world,
        sampler=sampler,
        num_workers=cfg.workers,
        drop_last=True,
        pin_memory=device.type == "cuda",
        persistent_workers=cfg.workers > 0,
        worker_init_fn=loader_workers.worker_init_fn(cfg.workers, cfg.pin_workers),
        generator=torch.Generator().manual_seed(cfg.seed),
    )  # its own: the loader's draws leave the global RNG alone
    if len(loader) == 0:
        raise SystemExit(
            f"train.py: --batch-size {cfg.batch_size}: expected at most the {len(dataset)} training videos of "
            f"{cfg.data} (a step takes one batch, and the last, incomplete one is dropped)"
        )
    return sampler, loader


def train_epoch(
    parts: Parts,
    loader: torch.utils.data.DataLoader,
    cfg: Config,
    epoch: int,
    world: int,
    show_bar: bool,
    stop: runstate.SigtermStop,
    resume: dict[str, Any] | None = None,
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """One pass over the loader, or the rest of one after `resume` (how far a stopped run got).
    Returns the epoch's log record (means of the step statistics) and None, or, on a stop request
    (SIGTERM), None and how far this epoch got."""
    stage, steps = stage_at(epoch, cfg), len(loader)
    parts.model.train()
    done = resume["steps"] if resume else 0
    sums = {k: torch.tensor(v, device=parts.bank.video.device) for k, v in resume["sums"].items()} if resume else {}
    seen, t0 = (resume["seen"], time.time() - resume["seconds"]) if resume else (0, time.time())
    bar = tqdm(
        loader,
        desc=f"epoch {epoch} {stage}",
        disable=not show_bar,
        leave=False,
        file=sys.stdout,
        initial=done,
        total=steps,
    )
    for i, batch in enumerate(bar, start=done):
        step = epoch * steps + i
        loss, stats = train_step(parts, batch, cfg, stage, lr_at(step, cfg, steps))
        for k, val in stats.items():  # summed on the device: no host sync per statistic
            sums[k] = sums.get(k, 0.0) + val
        seen += batch["video"].shape[0] * world
        if i % 10 == 0 or i == steps - 1:  # the only host syncs: every 10th step
            if not math.isfinite(loss.item()):
                raise SystemExit(
                    f"non-finite loss ({loss.item()}) at or before step {step} (epoch {epoch}): "
                    f"lower --lr, raise --tau, --tau-s or --tau-t if one is near 0, or try --amp off"
                )
            bar.set_postfix(loss=f"{loss.item():.3f}", clips_s=f"{seen / (time.time() - t0):.0f}")
        if i < steps - 1 and runstate.stop_requested(stop, i, loss.device):
            return None, {
                "epoch": epoch,
                "steps": i + 1,
                "sums": {k: float(v) for k, v in sums.items()},
                "seen": seen,
                "seconds": time.time() - t0,
            }
    if dist.is_initialized():  # the log is the global batch's: each rank's loss is its share of eq. (17)
        for k in sorted(sums):
            dist.all_reduce(sums[k])
            sums[k] /= world
    skipped = round(float(sums.pop("skipped", 0.0)))  # the same count on every rank
    return {
        "epoch": epoch,
        "stage": stage,
        "lr": lr_at(epoch * steps, cfg, steps),
        **{k: float(s) / steps for k, s in sums.items()},
        "clips_per_s": seen / (time.time() - t0),
        "skipped": skipped,
        "excluded": parts.bank.num_items - parts.bank.num_valid,
    }, None


# ----------------------------------------------------------------------------- the recipe


def main(cfg: Config, on_epoch: Callable[[int], None] | None = None) -> tuple[AVModel, MemoryBank]:
    """Train as cfg says. on_epoch(epoch) is called after each epoch that ran and was logged (rank 0):
    how experiments/demo.py shows its progress."""
    ddp, rank, world, device = setup_distributed()
    master_process = rank == 0
    out = Path(cfg.out)
    with runstate.hold_for_job(out, master_process):  # one run per folder; a dead holder does not count
        return run(cfg, ddp, rank, world, device, out, on_epoch)


def run(
    cfg: Config,
    ddp: bool,
    rank: int,
    world: int,
    device: torch.device,
    out: Path,
    on_epoch: Callable[[int], None] | None = None,
) -> tuple[AVModel, MemoryBank]:
    master_process = rank == 0
    torch.manual_seed(cfg.seed + rank)  # different negatives and augmentations per rank
    random.seed(cfg.seed + rank)
    if cfg.init and not Path(cfg.init).is_file():  # before the data is read
        raise SystemExit(f"train.py: --init {cfg.init}: no such checkpoint (a train.py run's OUT/ckpt.pt)")
    dataset = build_train_set(cfg)
    sampler, loader = make_loader(cfg, dataset, rank, world, device)
    parts = build_parts(cfg, dataset, device)
    start_epoch, history, resume = runstate.restore(cfg, parts, out / "ckpt.pt", rank, dataset)
    history = runstate.rewrite_log(history, out, start_epoch) if master_process else []  # rank 0 keeps the log
    raw_model = parts.model  # what is saved; the DDP wrapper only synchronises gradients
    if ddp:
        parts.model = DDP(raw_model, device_ids=[device.index] if device.type == "cuda" else None)

    with runstate.SigtermStop() as stop:  # SIGTERM stops the run at a step boundary, resumably
        for epoch in range(start_epoch, cfg.warmup_epochs + cfg.epochs):
            # shuffling and every item's augmentation seeds depend on the epoch only; a stopped epoch skips
            # the items it trained on
            sampler.set_epoch(epoch, skip=resume["steps"] * loader.batch_size if resume else 0)
            record, stopped = train_epoch(
                parts, loader, cfg, epoch, world, master_process and sys.stdout.isatty(), stop, resume
            )
            resume = None
            if record is not None:
                record.update(bank_report(parts.bank, dataset.labels, dataset.faulty, cfg.tau_s, cfg.tau_t))  # log only
                history.append(record)
            try:  # the checkpoint first: the log never holds an epoch that the checkpoint does not
                runstate.save_epoch(
                    parts,
                    raw_model,
                    cfg,
                    dataset,
                    epoch if record else epoch - 1,
                    len(loader),
                    out / "ckpt.pt",
                    ddp,
                    world,
                    master_process,
                    history,
                    partial=stopped,
                )
            except checkpoint.CheckpointError as err:
                raise SystemExit(f"train.py, after epoch {epoch}: {err}") from err
            if master_process and record is not None:
                runstate.log_epoch(record, out)
                if on_epoch is not None:
                    on_epoch(epoch)
            if stopped or runstate.stop_requested(stop, 0, parts.bank.video.device):
                runstate.exit_stopped(out, epoch, stopped, master_process)
    if ddp:
        dist.destroy_process_group()
    return raw_model, parts.bank


if __name__ == "__main__":
    main(parse_config(description=__doc__.split("\n\n")[0]))
