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
from the checkpoint's (--allow-config-change overrides). Logs: a tqdm bar and OUT/log.jsonl, one
line per epoch. Options and their paper values: python train.py --help (config.py).
"""
import json
import math
import os
import random
import signal
import sys
import threading
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

import checkpoint
import data
import manifest
from augment import ClipAugment
from config import config_from_dict, parse_config, result_changes
from diagnostics import bank_structure, faulty_auroc
from losses import VARIANTS, robust_xid_loss, sample_weights, soft_targets
from memory_bank import MemoryBank
from model import AVModel


# ----------------------------------------------------------------------------- what a run is built from

def build_train_set(cfg):
    """The pre-training instances (one bank slot each), with the injected faulty positives."""
    records, classes = manifest.load_records(cfg.layout, cfg.data, cfg.split, cfg.fold, cfg.annotations or None,
                                             cfg.manifest or None, need_audio=True)
    dataset = data.AVDataset(records, data.clip_spec(cfg), train=True, faulty_fraction=cfg.faulty_fraction,
                             **injection(cfg, records), seed=cfg.seed, max_bad_fraction=cfg.max_bad_fraction,
                             preload=cfg.preload)
    dataset.classes = classes
    return dataset


def injection(cfg, records):
    """data.AVDataset's faulty_source and pool for the run's --faulty-source."""
    if cfg.faulty_fraction == 0 or cfg.faulty_source == "train":
        return {"faulty_source": "train", "pool": ()}
    return {"faulty_source": "pool", "pool": injection_pool(cfg, records)}


def pool_folder(cfg):
    """Where --faulty-source heldout or noise takes its sounds: --faulty-pool, else the synthetic set's."""
    if cfg.faulty_pool:
        return Path(cfg.faulty_pool)
    return Path(cfg.data) / ("_heldout" if cfg.faulty_source == "heldout" else "_pool")


def injection_pool(cfg, records):
    """The replacement audio of Sec. 5.2 as (path, seconds): 'heldout' reads --faulty-pool (default
    ROOT/_heldout), 'noise' ROOT/_pool. A pool that holds a file of the training or the test split
    is refused: the paper's injected audio is "not part of the training set"."""
    root, folder = Path(cfg.data), pool_folder(cfg)
    if not folder.is_dir():
        raise SystemExit(f"--faulty-fraction {cfg.faulty_fraction} injects audio from outside the training set "
                         f"(paper, Sec. 5.2), but the pool {folder} does not exist. Pass --faulty-pool DIR, a folder "
                         f"of media in neither split (for example the videos left out of a Kinetics subset), or "
                         f"regenerate the synthetic set (synthetic.py writes ROOT/_heldout); --faulty-source train "
                         f"lends other training videos' audio instead (a deviation)")
    try:
        test = manifest.list_split(cfg.layout, root, "test", cfg.fold, cfg.annotations or None)[0]
    except (FileNotFoundError, ValueError):  # a dataset without a test split: nothing there to leak into
        test = []
    in_splits = {Path(r.path).resolve() for r in records} | {(root / rel).resolve() for rel, _ in test}
    pool = manifest.audio_pool(folder)
    shared = [p for p, _ in pool if Path(p).resolve() in in_splits]
    if shared:
        raise SystemExit(f"--faulty-pool {folder}: {len(shared)} of its files are training or test videos "
                         f"(first: {shared[0]}); injected audio must come from outside both splits")
    return pool


@dataclass
class Parts:
    """Everything a training step touches."""
    model: torch.nn.Module       # AVModel, wrapped in DDP under torchrun
    augment: ClipAugment         # the device half of the input (augment.py)
    bank: MemoryBank
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    autocast: object             # torch.autocast context, or nullcontext() in fp32
    video_format: torch.memory_format
    truth: dict                  # ground truth on the device, for the oracles only: labels, injected


def build_parts(cfg, dataset, device):
    model = AVModel(**checkpoint.model_args(cfg)).to(device)
    amp = cfg.amp if cfg.amp != "auto" else ("bf16" if device.type == "cuda" else "off")
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
    video_format = torch.channels_last_3d if cfg.channels_last and device.type == "cuda" else torch.contiguous_format
    model.video.to(memory_format=video_format)
    return Parts(model=model, augment=ClipAugment(dataset.spec, train=True).to(device),
                 bank=MemoryBank(len(dataset), momentum=cfg.momentum, seed=cfg.seed).to(device),
                 optimizer=torch.optim.Adam(model.parameters(), lr=cfg.lr),
                 scaler=torch.amp.GradScaler(device.type, enabled=amp == "fp16"),  # fp16 only
                 autocast=torch.autocast(device.type, dtype=amp_dtype) if amp_dtype else nullcontext(),
                 video_format=video_format,
                 truth={"labels": dataset.labels.to(device), "injected": dataset.injected.to(device)})


# ----------------------------------------------------------------------------- schedule and step

def lr_at(step, cfg, steps_per_epoch):
    """Constant during the xID warm-up, then cosine from lr to lr_min over the second stage."""
    warm = cfg.warmup_epochs * steps_per_epoch
    if step < warm:
        return cfg.lr
    progress = (step - warm) / max(1, cfg.epochs * steps_per_epoch)
    return cfg.lr_min + 0.5 * (cfg.lr - cfg.lr_min) * (1 + math.cos(math.pi * progress))


def stage_at(epoch, cfg):
    return "xid" if epoch < cfg.warmup_epochs else cfg.loss


def objective(v, a, idx, bank, cfg, stage, truth):
    """eq. (17) for one batch with the switches of VARIANTS[stage]: candidates and their bank
    targets, soft targets T (eqs. (8)-(14)) if the variant is soft, weights w_i from the bank scores
    (eq. (6)) or the oracle's 0/1 if it is weighted. Returns the loss and statistics for the log."""
    variant = VARIANTS[stage]
    cand = bank.sample(idx, cfg.num_negatives)  # (B, 1+K)
    vbar, abar = bank.targets(cand)             # (B, 1+K, D) each
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


def train_step(parts, batch, cfg, stage, lr):
    """One step of the recipe on a loader batch (uint8 crops, waveforms, bank indices): augment on
    the device -> encode -> eq. (17) -> backward -> EMA update of the bank. bench.py times this
    same function. Returns the loss and the statistics, on the device (no host sync here)."""
    bank = parts.bank
    device = bank.video.device
    for group in parts.optimizer.param_groups:
        group["lr"] = lr
    # workers send uint8 crops and waveforms; colour, blur and spectrograms are done here, batched
    video, audio = parts.augment(batch["video"].to(device, non_blocking=True),
                                 batch["audio"].to(device, non_blocking=True))  # (B, 3, T, H, W), (B, 1, F, T')
    video = video.to(memory_format=parts.video_format)
    idx = batch["index"].to(device, non_blocking=True)  # (B,)
    # A file that failed to decode came as another item (data.AVDataset._get): its slot leaves the
    # bank before the loss samples negatives, and the substitute, whose slot may also be in the batch
    # as itself, does not update the bank.
    failed = batch.get("failed")
    failed = torch.full((len(batch["index"]),), -1) if failed is None else failed  # (B,) on the host
    failed_anywhere = gather_on_host(failed)  # (W*B,)
    substituted = failed_anywhere >= 0  # (W*B,)
    if substituted.any():
        bank.exclude(failed_anywhere[substituted].unique())
    with parts.autocast:
        v, a = parts.model(video, audio)  # (B, 128) each
    loss, stats = objective(v, a, idx, bank, cfg, stage, parts.truth)
    parts.optimizer.zero_grad(set_to_none=True)
    parts.scaler.scale(loss).backward()
    parts.scaler.step(parts.optimizer)
    parts.scaler.update()
    # after the loss: this step's targets came from the old memory
    bank.update(idx, v, a, keep=(failed < 0) if substituted.any() else None)
    stats["loss"] = loss
    stats["skipped"] = torch.tensor(float(substituted.sum()), device=device)  # items, over all ranks
    return loss.detach(), {k: val.detach().float() for k, val in stats.items()}


def gather_on_host(t):
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

def setup_distributed():
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


def make_loader(cfg, dataset, rank, world, device):
    """Shuffled per rank; each item's random draws seeded by (seed, epoch, index) (data.SeededSampler)."""
    if cfg.batch_size % world:
        raise SystemExit(f"--batch-size {cfg.batch_size} is the global batch: it must divide by {world} processes")
    sampler = data.SeededSampler(torch.utils.data.DistributedSampler(
        dataset, num_replicas=world, rank=rank, shuffle=True, seed=cfg.seed), seed=cfg.seed + 7919 * rank)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=cfg.batch_size // world, sampler=sampler, num_workers=cfg.workers, drop_last=True,
        pin_memory=device.type == "cuda", persistent_workers=cfg.workers > 0,
        worker_init_fn=data.worker_init_fn(cfg.workers, cfg.pin_workers),
        generator=torch.Generator().manual_seed(cfg.seed))  # its own: the loader's draws leave the global RNG alone
    if len(loader) == 0:
        raise SystemExit(f"{len(dataset)} training videos are fewer than one batch of {cfg.batch_size}")
    return sampler, loader


def same_injection(state, dataset, path, allow=False):
    """A run resumed or branched off must see the faulty positives its bank was trained with."""
    saved = state.get("instances", {}).get("injected")
    if saved is not None and not allow and not torch.equal(saved.cpu(), dataset.injected):
        raise SystemExit(f"{path} was trained with other injected faulty positives than this run's (another "
                         f"seed, share or data, or an older injection draw: data.INJECTION_STREAM); "
                         f"use another --out, or --allow-config-change")


def load_resumable(ckpt_path, rank):
    """OUT/ckpt.pt, or where it cannot be read (truncated, corrupt), OUT/ckpt.pt.prev: the unreadable
    file is named, moved aside as ckpt.pt.corrupt, and the run goes on from the checkpoint before it."""
    try:
        return checkpoint.load_checkpoint(ckpt_path)
    except checkpoint.CheckpointError as err:
        prev = checkpoint.previous(ckpt_path)
        if not prev.is_file():
            raise SystemExit(f"{err}, and there is no earlier checkpoint ({prev}) to fall back to: move it "
                             f"aside to start afresh, or use another --out") from err
        state = checkpoint.load_checkpoint(prev)
        if dist.is_initialized():
            dist.barrier()  # every rank has read it before rank 0 moves the bad file
        if rank == 0:
            aside = ckpt_path.with_name(ckpt_path.name + ".corrupt")
            os.replace(ckpt_path, aside)
            print(f"{err}. Moved it aside to {aside}; resuming from the previous checkpoint, {prev} "
                  f"(after epoch {state['epoch']})", file=sys.stderr)
        return state


def restore(cfg, parts, ckpt_path, rank, dataset):
    """Resume OUT/ckpt.pt (model, bank, optimizer, RNG, the log's history) or branch off --init (model
    and bank, a fresh optimizer). Returns the first epoch to run, the log records up to it, and how far a run stopped
mid-epoch got into it (None if it did not)."""
    num_items = len(dataset)
    if ckpt_path.exists():  # rerunning the same command resumes
        state = load_resumable(ckpt_path, rank)
        changed = result_changes(config_from_dict(state["config"], str(ckpt_path)), cfg)
        if changed and not cfg.allow_config_change:
            raise SystemExit(f"{ckpt_path} was trained with other settings: " + ", ".join(
                f"{k} {old!r} -> {new!r}" for k, (old, new) in changed.items())
                + ". Use another --out, or --allow-config-change to resume under the new ones.")
        same_injection(state, dataset, ckpt_path, cfg.allow_config_change)  # same settings, older draw
        parts.model.load_state_dict(state["model"])
        parts.bank.load_state_dict(state["bank"])
        parts.optimizer.load_state_dict(state["optimizer"])
        if state["scaler"] and parts.scaler.is_enabled():  # empty when saved without fp16 (bf16 or fp32)
            parts.scaler.load_state_dict(state["scaler"])
        checkpoint.set_rng_state(state["rng"][rank] if rank < len(state["rng"]) else state["rng"][0])
        if rank == 0:
            print(f"resuming from {ckpt_path} after epoch {state['epoch']}")
        # log None: a checkpoint from before it kept the log; partial: where a stopped epoch stopped
        return state["epoch"] + 1, state.get("log"), state.get("partial")
    if cfg.init:
        state = checkpoint.load_checkpoint(cfg.init)
        if state["bank"]["video"].shape[0] != num_items:
            raise SystemExit(f"--init {cfg.init}: its memory bank has {state['bank']['video'].shape[0]} slots, "
                             f"the training set {num_items} videos; use the same data and manifest")
        same_injection(state, dataset, cfg.init, cfg.allow_config_change)
        parts.model.load_state_dict(state["model"])
        parts.bank.load_state_dict(state["bank"])
    return 0, [], None


def stop_requested(stop, i, device):
    """Whether the run stops after step i: on SIGTERM, at once in one process; under DDP every 10th
    step, where the ranks agree on it (and sync anyway)."""
    if not dist.is_initialized():
        return stop["requested"]
    if i % 10:
        return False
    flag = torch.tensor(float(stop["requested"]), device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def train_epoch(parts, loader, cfg, epoch, world, show_bar, stop, resume=None):
    """One pass over the loader, or the rest of one after `resume` (how far a stopped run got).
    Returns the epoch's log record (means of the step statistics) and None, or, on a stop request
    (SIGTERM), None and how far this epoch got."""
    stage, steps = stage_at(epoch, cfg), len(loader)
    parts.model.train()
    done = resume["steps"] if resume else 0
    sums = {k: torch.tensor(v, device=parts.bank.video.device) for k, v in resume["sums"].items()} if resume else {}
    seen, t0 = (resume["seen"], time.time() - resume["seconds"]) if resume else (0, time.time())
    bar = tqdm(loader, desc=f"epoch {epoch} {stage}", disable=not show_bar, leave=False, file=sys.stdout,
               initial=done, total=steps)
    for i, batch in enumerate(bar, start=done):
        step = epoch * steps + i
        loss, stats = train_step(parts, batch, cfg, stage, lr_at(step, cfg, steps))
        for k, val in stats.items():  # summed on the device: no host sync per statistic
            sums[k] = sums.get(k, 0.0) + val
        seen += batch["video"].shape[0] * world
        if i % 10 == 0 or i == steps - 1:  # the only host syncs: every 10th step
            if not math.isfinite(loss.item()):
                raise SystemExit(f"non-finite loss ({loss.item()}) at or before step {step} (epoch {epoch}): "
                                 f"lower --lr, or try --amp off")
            bar.set_postfix(loss=f"{loss.item():.3f}", clips_s=f"{seen / (time.time() - t0):.0f}")
        if i < steps - 1 and stop_requested(stop, i, loss.device):
            return None, {"epoch": epoch, "steps": i + 1, "sums": {k: float(v) for k, v in sums.items()},
                          "seen": seen, "seconds": time.time() - t0}
    if dist.is_initialized():  # the log is the global batch's: each rank's loss is its share of eq. (17)
        for k in sorted(sums):
            dist.all_reduce(sums[k])
            sums[k] /= world
    skipped = round(float(sums.pop("skipped", 0.0)))  # the same count on every rank
    return {"epoch": epoch, "stage": stage, "lr": lr_at(epoch * steps, cfg, steps),
            **{k: float(s) / steps for k, s in sums.items()}, "clips_per_s": seen / (time.time() - t0),
            "skipped": skipped, "excluded": parts.bank.num_items - parts.bank.num_valid}, None


def save_epoch(parts, raw_model, cfg, dataset, epoch, steps, ckpt_path, ddp, world, master_process, history,
               partial=None):
    """Checkpoint after an epoch: rank 0 writes the unwrapped model, every rank's RNG state, and the
    log records so far (the log file is rewritten from them on resume). After a stop mid-epoch,
    `epoch` is the last whole one and `partial` says how far the next one got."""
    rngs = [checkpoint.rng_state()]
    if ddp:
        # DDP broadcasts BatchNorm statistics before each forward, so after the last one each rank
        # holds its own; take rank 0's so that every replica equals the checkpoint.
        for buf in raw_model.buffers():
            dist.broadcast(buf, src=0)
        rngs = [None] * world
        dist.all_gather_object(rngs, checkpoint.rng_state())
    if master_process:
        checkpoint.save_checkpoint(
            ckpt_path, model_args=checkpoint.model_args(cfg), clip=asdict(dataset.spec), config=asdict(cfg),
            model=raw_model.state_dict(), bank=parts.bank.state_dict(), instances=checkpoint.instances_of(dataset),
            optimizer=parts.optimizer.state_dict(), scaler=parts.scaler.state_dict(), epoch=epoch,
            step=(epoch + 1) * steps, rng=rngs, log=history, partial=partial)
    if ddp:
        dist.barrier()  # no rank starts the next epoch before the checkpoint is written


def rewrite_log(history, out, start_epoch):
    """OUT/log.jsonl as the checkpoint knows it: a run killed after its log line and before its
    checkpoint, or after the checkpoint and before the log line, resumes with each epoch once.
    history None (an older checkpoint): the file's own lines before start_epoch, the last of each."""
    if history is None:
        lines = (out / "log.jsonl").read_text().splitlines() if (out / "log.jsonl").exists() else []
        by_epoch = {r["epoch"]: r for r in map(json.loads, lines) if r["epoch"] < start_epoch}
        history = [by_epoch[e] for e in sorted(by_epoch)]
    tmp = out / "log.jsonl.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in history))
    os.replace(tmp, out / "log.jsonl")
    return history


def log_epoch(record, out):
    print("epoch {epoch:3d} | {stage:8s} | loss {loss:.4f} | w {weight:.3f} | mu {mu:.3f} sigma {sigma:.3f} "
          "| soft {soft_mass:.3f} | {clips_per_s:.0f} clips/s | auroc {auroc} | 1-nn {knn_class:.2f} "
          "xmodal {xmodal_class:.2f}{bad}".format(
              **record, auroc="-" if record["faulty_auroc"] is None else f"{record['faulty_auroc']:.3f}",
              bad=f" | skipped {record['skipped']} items, {record['excluded']} slots out" if record["excluded"] else ""))
    with open(out / "log.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")


# ----------------------------------------------------------------------------- the recipe

def main(cfg):
    ddp, rank, world, device = setup_distributed()
    master_process = rank == 0
    torch.manual_seed(cfg.seed + rank)  # different negatives and augmentations per rank
    random.seed(cfg.seed + rank)
    out = Path(cfg.out)
    if master_process:
        out.mkdir(parents=True, exist_ok=True)

    dataset = build_train_set(cfg)
    sampler, loader = make_loader(cfg, dataset, rank, world, device)
    parts = build_parts(cfg, dataset, device)
    start_epoch, history, resume = restore(cfg, parts, out / "ckpt.pt", rank, dataset)
    history = rewrite_log(history, out, start_epoch) if master_process else []  # rank 0 keeps the log
    raw_model = parts.model  # what is saved; the DDP wrapper only synchronises gradients
    if ddp:
        parts.model = DDP(raw_model, device_ids=[device.index] if device.type == "cuda" else None)

    stop = {"requested": False}  # SIGTERM (torchrun, SLURM, a cloud's preemption): stop at a step boundary
    on_term = signal.signal(signal.SIGTERM, lambda *_: stop.update(requested=True)) if (
        threading.current_thread() is threading.main_thread()) else None
    try:
        for epoch in range(start_epoch, cfg.warmup_epochs + cfg.epochs):
            # shuffling and every item's augmentation seeds depend on the epoch only; a stopped epoch skips
            # the items it trained on
            sampler.set_epoch(epoch, skip=resume["steps"] * loader.batch_size if resume else 0)
            record, stopped = train_epoch(parts, loader, cfg, epoch, world, master_process and sys.stdout.isatty(),
                                          stop, resume)
            resume = None
            if record is not None:
                valid = parts.bank.valid.cpu()  # (N,) slots whose files decoded
                record["faulty_auroc"] = faulty_auroc(parts.bank.scores().cpu()[valid], dataset.faulty[valid])
                record.update(bank_structure(parts.bank.video.cpu()[valid], parts.bank.audio.cpu()[valid], dataset.labels[valid],
                                             dataset.faulty[valid]))  # ground truth, for the log only
                history.append(record)
            try:  # the checkpoint first: the log never holds an epoch that the checkpoint does not
                save_epoch(parts, raw_model, cfg, dataset, epoch if record else epoch - 1, len(loader),
                           out / "ckpt.pt", ddp, world, master_process, history, partial=stopped)
            except checkpoint.CheckpointError as err:
                raise SystemExit(f"train.py, after epoch {epoch}: {err}") from err
            if master_process and record is not None:
                log_epoch(record, out)
            if stopped or stop_requested(stop, 0, parts.bank.video.device):
                where = f"after step {stopped['steps']} of epoch {epoch}" if stopped else f"after epoch {epoch}"
                if master_process:
                    print(f"train.py: stopped by SIGTERM {where}; {out / 'ckpt.pt'} holds it, and the same "
                          f"command resumes from there", file=sys.stderr)
                raise SystemExit(128 + signal.SIGTERM)
    finally:
        if on_term is not None:
            signal.signal(signal.SIGTERM, on_term)
    if ddp:
        dist.destroy_process_group()
    return raw_model, parts.bank


if __name__ == "__main__":
    main(parse_config(description=__doc__.split("\n\n")[0]))
