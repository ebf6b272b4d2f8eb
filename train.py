"""Pre-training: xID warm-up, then Robust-xID (paper Sec. 4.3, 5.1 "Pretraining", Sec. 6).

Each step: encode the clips -> draw 1+K candidates from the memory bank -> their targets -> soft
targets (Soft-xID) and sample weights (Weighted-xID) -> loss, eq. (loss) -> backward -> EMA update of
the bank. The first `warmup_epochs` use plain xID at a constant learning rate, the next `epochs`
use --loss with a cosine learning rate. `--init` branches a stage off a warm-up checkpoint.

    python train.py --preset demo                                   # synthetic data, CPU, minutes
    python train.py --preset ablation --data K400 --layout kinetics  # the paper's Sec. 5 setting
    torchrun --nproc_per_node=8 train.py --preset sota --data K400 --layout kinetics
    python train.py --preset demo --init runs/demo/ckpt.pt --warmup-epochs 0 --loss weighted --out runs/w

Rerunning a command resumes from OUT/ckpt.pt. Logs: a tqdm bar and OUT/log.jsonl, one line per epoch.
"""
import argparse
import json
import math
import os
import random
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

import data
import manifest
from augment import ClipAugment
from losses import robust_loss, sample_weights, soft_targets, soft_xid_loss, xid_loss
from memory_bank import MemoryBank
from model import AVModel

LOSSES = ("xid", "weighted", "soft", "robust")


@dataclass
class Config:
    # data
    data: str = "data/synth"        # dataset root
    layout: str = "folder"          # ucf101 | hmdb51 | kinetics | folder (see data.py)
    split: str = "train"
    fold: int = 1
    annotations: str = ""           # split files / Kinetics CSV, when not in the layout's default place
    manifest: str = ""              # default ROOT/manifest.csv, made by a scan when missing
    faulty_fraction: float = 0.0    # injected faulty positives, Sec. 5.2 (Fig. noisy: 0 .. 0.8)
    faulty_pool: str = ""           # audio outside the training set; default ROOT/_pool
    workers: int = 4                # DataLoader workers per process
    preload: bool = False           # decode every video once into memory (small datasets only)
    # clip (Sec. 5.1; Sec. 6 in brackets)
    frames: int = 8                 # T = 8
    fps: float = 16.0               # 16 fps
    size: int = 80                  # 80x80 crops [112x112]
    audio_rate: int = 11025         # 11025 Hz [24 kHz]
    n_mels: int = 80                # 80 mel bands [128]
    n_time: int = 80                # 80 time steps over 2 s [128]
    # model
    video_depth: int = 9            # R(2+1)D-9 [R(2+1)D-18]
    width: float = 1.0              # channel multiplier; 1.0 is the paper's model
    # optimisation
    batch_size: int = 224           # global batch, split over processes [512]
    lr: float = 1e-4                # Adam; warm-up lr and start of the cosine [5e-4]
    lr_min: float = 1e-5            # end of the cosine [5e-5]
    warmup_epochs: int = 400        # xID warm-up [200]
    epochs: int = 200               # second stage with --loss [200]
    # method (Sec. 4)
    loss: str = "robust"            # second stage: xid | weighted | soft | robust
    soft_targets: str = "ccp"       # bootstrap | swapped | neighbor | ccp | oracle (uses labels)
    num_negatives: int = 1024       # K = 1024
    tau: float = 0.07               # tau = 0.07
    tau_s: float = 0.02             # tau_s = 0.02
    tau_t: float = 0.07             # tau_t = 0.07
    lam: float = 0.5                # lambda = 0.5
    kappa: float = 0.5              # kappa = 0.5
    w_min: float = 0.25             # w_min = 0.25
    delta: float = -1.0             # midpoint at mu + delta sigma; the paper sets it from the noise level
    momentum: float = 0.5           # memory-bank EMA constant 0.5
    # run
    out: str = "runs/demo"          # checkpoint ckpt.pt and log.jsonl
    init: str = ""                  # start from this checkpoint's model and bank (branching a stage)
    amp: str = "auto"               # bf16 | fp16 | off; auto = bf16 on GPU, off on CPU
    channels_last: bool = True      # channels_last_3d video encoder on GPU
    seed: int = 0
    max_bad_fraction: float = 0.05  # stop when more of the files fail to decode


PRESETS = {
    "ablation": {},  # the dataclass defaults are the paper's Sec. 5 values
    "sota": dict(video_depth=18, size=112, audio_rate=24000, n_mels=128, n_time=128, batch_size=512,
                 lr=5e-4, lr_min=5e-5, warmup_epochs=200, epochs=200),
    # 64x64: at smaller inputs the stem's stride and max pool leave shapes a pixel or two wide
    "demo": dict(data="data/synth", size=64, frames=8, audio_rate=11025, n_mels=40, n_time=40, width=0.25,
                 batch_size=32, lr=1e-3, lr_min=1e-4, warmup_epochs=40, epochs=10, num_negatives=256, workers=1,
                 preload=True),
}


def parse_config(argv=None):
    """--preset NAME, then any Config field as --field-name VALUE. Unknown options are an error."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="ablation", help="paper setting to start from")
    for f in fields(Config):
        kind = argparse.BooleanOptionalAction if f.type is bool else None
        parser.add_argument("--" + f.name.replace("_", "-"), type=None if kind else f.type, action=kind,
                            default=None, help=f"default {f.default!r} (ablation preset)")
    args = vars(parser.parse_args(argv))
    cfg = Config(**PRESETS[args.pop("preset")])
    for k, v in args.items():
        if v is not None:
            setattr(cfg, k, v)
    if cfg.loss not in LOSSES:
        parser.error(f"--loss {cfg.loss!r}: expected one of {LOSSES}")
    if cfg.amp not in ("auto", "bf16", "fp16", "off"):
        parser.error(f"--amp {cfg.amp!r}: expected bf16, fp16, off or auto")
    return cfg


# ----------------------------------------------------------------------------- shared with evaluate.py

def clip_spec(cfg, audio=True):
    return data.ClipSpec(frames=cfg.frames, fps=cfg.fps, size=cfg.size, audio_rate=cfg.audio_rate,
                         n_mels=cfg.n_mels, n_time=cfg.n_time, audio_seconds=2.0 if audio else 0.0)


def build_model(cfg):
    return AVModel(video_depth=cfg.video_depth, width=cfg.width)


def build_train_set(cfg):
    records, _ = manifest.load_records(cfg.layout, cfg.data, cfg.split, cfg.fold, cfg.annotations or None,
                                   cfg.manifest or None, need_audio=True)
    pool = ()
    if cfg.faulty_fraction > 0:
        pool = manifest.audio_pool(cfg.faulty_pool or Path(cfg.data) / "_pool")
    return data.AVDataset(records, clip_spec(cfg), train=True, faulty_fraction=cfg.faulty_fraction,
                          pool=pool, seed=cfg.seed, max_bad_fraction=cfg.max_bad_fraction, preload=cfg.preload)


def load_checkpoint(path):
    return torch.load(path, map_location="cpu", weights_only=True)


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


def robust_xid_loss(v, a, idx, bank, cfg, stage, labels=None):
    """eq. (loss) for one batch, with the pieces each variant switches on:
    weighted -> w_i from eq. (weigths); soft -> T from eq. (bts-trg); xid -> neither.
    Returns the loss and a dict of statistics for the log."""
    cand = bank.sample(idx, cfg.num_negatives)  # (B, 1+K)
    vbar, abar = bank.targets(cand)             # (B, 1+K, D) each
    if stage in ("soft", "robust"):
        T_v, T_a = soft_targets(vbar, abar, cfg.soft_targets, cfg.lam, cfg.tau_s, cfg.tau_t,
                                labels=None if labels is None else labels[cand])  # (B, 1+K) each
        per_sample = soft_xid_loss(v, a, vbar, abar, T_v, T_a, cfg.tau)  # (B,)
        soft_mass = 1 - 0.5 * (T_v[:, 0] + T_a[:, 0]).mean()
    else:
        per_sample = xid_loss(v, a, vbar, abar, cfg.tau)  # (B,)
        soft_mass = per_sample.new_zeros(())
    scores = bank.scores()  # (N,): vbar_i . abar_i before this step's update
    mu, sigma = scores.mean(), scores.std()
    if stage in ("weighted", "robust"):
        w = sample_weights(scores[idx], mu, sigma, cfg.delta, cfg.kappa, cfg.w_min)  # (B,)
    else:
        w = torch.ones_like(per_sample)
    loss = robust_loss(per_sample, w)
    return loss, {"weight": w.mean(), "mu": mu, "sigma": sigma, "soft_mass": soft_mass}


def train_step(model, augment, bank, optimizer, scaler, autocast, batch, cfg, stage, lr, labels=None,
               video_format=torch.contiguous_format):
    """One step of the recipe on a loader batch (uint8 crops, waveforms, bank indices): augment on
    the device -> encode -> eq. (loss) -> backward -> EMA update of the bank. bench.py times this
    same function. Returns the loss and the statistics, on the device (no host sync here)."""
    device = bank.video.device
    for group in optimizer.param_groups:
        group["lr"] = lr
    # workers send uint8 crops and waveforms; colour, blur and spectrograms are done here, batched
    video, audio = augment(batch["video"].to(device, non_blocking=True),
                           batch["audio"].to(device, non_blocking=True))  # (B, 3, T, H, W), (B, 1, n_mels, n_time)
    video = video.to(memory_format=video_format)
    idx = batch["index"].to(device, non_blocking=True)  # (B,)
    with autocast:
        v, a = model(video, audio)  # (B, 128) each
    loss, stats = robust_xid_loss(v, a, idx, bank, cfg, stage, labels)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    bank.update(idx, v, a)  # after the loss: this step's targets came from the old memory
    stats["loss"] = loss
    return loss.detach(), {k: val.detach().float() for k, val in stats.items()}


def faulty_auroc(scores, faulty):
    """AUROC of the bank scores (the weights are monotone in them) for telling faulty positives."""
    if faulty.all() or not faulty.any():
        return None
    from sklearn.metrics import roc_auc_score
    return float(roc_auc_score(faulty.numpy(), -scores.cpu().numpy()))


# ----------------------------------------------------------------------------- checkpoints

def save_checkpoint(path, **state):
    """Atomic: a kill during the write leaves the previous checkpoint intact."""
    tmp = f"{path}.tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


def rng_state():
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state):
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ----------------------------------------------------------------------------- the recipe

def main(cfg):
    # distributed mode comes from torchrun's environment; plain `python train.py` is one process
    ddp = "RANK" in os.environ
    if ddp:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend)
        rank, world = dist.get_rank(), dist.get_world_size()
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        device = torch.device(f"cuda:{local_rank}") if backend == "nccl" else torch.device("cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
    else:
        rank, world = 0, 1
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    master_process = rank == 0
    if cfg.batch_size % world:
        raise SystemExit(f"--batch-size {cfg.batch_size} is the global batch: it must divide by {world} processes")
    torch.manual_seed(cfg.seed + rank)  # different negatives and augmentations per rank
    random.seed(cfg.seed + rank)
    out = Path(cfg.out)
    ckpt_path = out / "ckpt.pt"
    if master_process:
        out.mkdir(parents=True, exist_ok=True)

    dataset = build_train_set(cfg)
    sampler = data.SeededSampler(torch.utils.data.DistributedSampler(
        dataset, num_replicas=world, rank=rank, shuffle=True, seed=cfg.seed), seed=cfg.seed + 7919 * rank)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=cfg.batch_size // world, sampler=sampler, num_workers=cfg.workers, drop_last=True,
        pin_memory=device.type == "cuda", persistent_workers=cfg.workers > 0, worker_init_fn=_worker_init,
        generator=torch.Generator().manual_seed(cfg.seed))  # its own: the loader's draws leave the global RNG alone
    steps_per_epoch = len(loader)
    if steps_per_epoch == 0:
        raise SystemExit(f"{len(dataset)} training videos are fewer than one batch of {cfg.batch_size}")

    model = build_model(cfg).to(device)
    augment = ClipAugment(dataset.spec, train=True).to(device)
    bank = MemoryBank(len(dataset), momentum=cfg.momentum, seed=cfg.seed).to(device)
    labels = dataset.labels.to(device) if cfg.soft_targets == "oracle" else None
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    amp = cfg.amp if cfg.amp != "auto" else ("bf16" if device.type == "cuda" else "off")
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
    autocast = torch.autocast(device.type, dtype=amp_dtype) if amp_dtype else nullcontext()
    scaler = torch.amp.GradScaler(device.type, enabled=amp == "fp16")
    video_format = torch.channels_last_3d if cfg.channels_last and device.type == "cuda" else torch.contiguous_format
    model.video.to(memory_format=video_format)

    start_epoch = 0
    if ckpt_path.exists():  # rerunning the same command resumes
        state = load_checkpoint(ckpt_path)
        model.load_state_dict(state["model"])
        bank.load_state_dict(state["bank"])
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        set_rng_state(state["rng"][rank] if rank < len(state["rng"]) else state["rng"][0])
        start_epoch = state["epoch"] + 1
        if master_process:
            print(f"resuming from {ckpt_path} after epoch {state['epoch']}")
    elif cfg.init:  # a new stage from a warm-up checkpoint: its model and bank, a fresh optimizer
        state = load_checkpoint(cfg.init)
        if state["bank"]["video"].shape[0] != len(dataset):
            raise SystemExit(f"--init {cfg.init}: its memory bank has {state['bank']['video'].shape[0]} slots, "
                             f"the training set {len(dataset)} videos; use the same data and manifest")
        model.load_state_dict(state["model"])
        bank.load_state_dict(state["bank"])
    raw_model = model
    if ddp:
        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)

    total_epochs = cfg.warmup_epochs + cfg.epochs
    for epoch in range(start_epoch, total_epochs):
        stage = stage_at(epoch, cfg)
        sampler.set_epoch(epoch)  # shuffling and every item's augmentation seeds depend on the epoch only
        model.train()
        sums, t0, seen = {}, time.time(), 0
        bar = tqdm(loader, desc=f"epoch {epoch} {stage}", disable=not (master_process and sys.stdout.isatty()), leave=False, file=sys.stdout)
        for i, batch in enumerate(bar):
            step = epoch * steps_per_epoch + i
            loss, stats = train_step(model, augment, bank, optimizer, scaler, autocast, batch, cfg, stage,
                                     lr_at(step, cfg, steps_per_epoch), labels, video_format)
            for k, val in stats.items():  # summed on the device: no host sync per statistic
                sums[k] = sums.get(k, 0.0) + val
            seen += batch["video"].shape[0] * world
            if i % 10 == 0 or i == steps_per_epoch - 1:  # the only host syncs: every 10th step
                if not math.isfinite(loss.item()):
                    raise SystemExit(f"non-finite loss ({loss.item()}) at or before step {step} (epoch {epoch}): "
                                     f"lower --lr, or try --amp off")
                bar.set_postfix(loss=f"{loss.item():.3f}", clips_s=f"{seen / (time.time() - t0):.0f}")

        record = {"epoch": epoch, "stage": stage, "lr": lr_at(epoch * steps_per_epoch, cfg, steps_per_epoch),
                  **{k: float(s) / steps_per_epoch for k, s in sums.items()},
                  "clips_per_s": seen / (time.time() - t0),
                  "faulty_auroc": faulty_auroc(bank.scores(), dataset.faulty)}
        if master_process:
            print("epoch {epoch:3d} | {stage:8s} | loss {loss:.4f} | w {weight:.3f} | mu {mu:.3f} sigma {sigma:.3f} "
                  "| soft {soft_mass:.3f} | {clips_per_s:.0f} clips/s | auroc {auroc}".format(
                      **record, auroc="-" if record["faulty_auroc"] is None else f"{record['faulty_auroc']:.3f}"))
            with open(out / "log.jsonl", "a") as f:
                f.write(json.dumps(record) + "\n")
        rngs = [rng_state()]
        if ddp:
            # DDP broadcasts BatchNorm statistics before each forward, so after the last one each rank
            # holds its own; take rank 0's so that every replica equals the checkpoint.
            for buf in raw_model.buffers():
                dist.broadcast(buf, src=0)
            rngs = [None] * world
            dist.all_gather_object(rngs, rng_state())
        if master_process:
            save_checkpoint(ckpt_path, model=raw_model.state_dict(), bank=bank.state_dict(),
                            optimizer=optimizer.state_dict(), scaler=scaler.state_dict(), epoch=epoch,
                            step=(epoch + 1) * steps_per_epoch, rng=rngs, config=asdict(cfg))
        if ddp:
            dist.barrier()  # no rank starts the next epoch before the checkpoint is written
    if ddp:
        dist.destroy_process_group()
    return raw_model, bank


def _worker_init(worker_id):
    torch.set_num_threads(1)  # decoding workers: one thread each, the main process keeps the cores


if __name__ == "__main__":
    main(parse_config())
