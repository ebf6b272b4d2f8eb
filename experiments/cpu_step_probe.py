"""Measurement (issue 32): where the demo's training step spends its time on a CPU, and what the
candidate changes buy, each as a ratio against the baseline in the same process, interleaved.

    python -m experiments.cpu_step_probe [--batch 32] [--rounds 5] [--profile]

Prints the 2048 x 2048 fp32 matmul GFLOP/s of this session, then for each variant the model alone
(encoders + heads + Adam on a stand-in loss) and the full train.train_step (demo preset, a 500-slot
bank, the robust objective), in clips/s and as a share of the matmul's FLOP/s. --profile adds a
torch.profiler table of one step by operator.
"""
import argparse
import sys
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

import checkpoint
import data
import train
from augment import ClipAugment
from config import parse_config
from memory_bank import MemoryBank
from model import AVModel


def matmul_gflops(n=2048, reps=10):
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n ** 3 * reps / (time.perf_counter() - t0) / 1e9


def build(batch, channels_last=False, foreach=None, compile_model=False, audio_channels_last=False, bf16=False,
          plain_pool=False):
    torch.manual_seed(0)
    cfg = parse_config(["--preset", "demo", "--batch-size", str(batch)])
    spec = data.clip_spec(cfg)
    model = AVModel(**checkpoint.model_args(cfg))
    if plain_pool:  # the stem's pool before model.SpatialMaxPool: F.max_pool3d in NCDHW both ways
        model.video.stem[-1] = torch.nn.MaxPool3d((1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1))
    fmt = torch.channels_last_3d if channels_last else torch.contiguous_format
    model.video.to(memory_format=fmt)
    if audio_channels_last:  # 2D convolutions in NHWC, the layout oneDNN prefers on a CPU
        model.audio.to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, foreach=foreach)
    run_model = torch.compile(model) if compile_model else model
    parts = train.Parts(model=run_model, augment=ClipAugment(spec), bank=MemoryBank(500, momentum=cfg.momentum),
                        optimizer=opt, scaler=torch.amp.GradScaler("cpu", enabled=False),
                        autocast=torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16), video_format=fmt,
                        truth={"labels": torch.zeros(500, dtype=torch.long), "injected": torch.zeros(500, dtype=torch.bool)})
    g = torch.Generator().manual_seed(0)
    b = {"video": torch.randint(0, 256, (batch, 3, cfg.frames, cfg.size, cfg.size), dtype=torch.uint8, generator=g),
         "audio": 0.1 * torch.randn(batch, int(spec.audio_seconds * spec.audio_rate), generator=g),
         "index": torch.randperm(500, generator=g)[:batch]}
    video, audio = parts.augment(b["video"], b["audio"])
    video = video.to(memory_format=fmt)

    def model_step():
        with parts.autocast:
            v, a = run_model(video, audio)
            loss = -(v.float() * a.float()).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def full_step():
        train.train_step(parts, b, cfg, "robust", cfg.lr)

    with FlopCounterMode(display=False) as counter:
        v, a = model(video, audio)
        (-(v * a).sum()).backward()
    opt.zero_grad(set_to_none=True)
    return model_step, full_step, counter.get_total_flops(), parts


def timed(fn, reps):
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


VARIANTS = {
    "baseline": {},
    "plain stem pool (old)": {"plain_pool": True},
    "channels_last_3d": {"channels_last": True},
    "adam foreach": {"foreach": True},
    "torch.compile(model)": {"compile_model": True},
    "audio channels_last (2D)": {"audio_channels_last": True},
    "bf16 autocast": {"bf16": True},
    "bf16 + channels_last_3d": {"bf16": True, "channels_last": True},
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=4)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS))
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}")
    built = {}
    for name in args.variants:
        t0 = time.perf_counter()
        m, f, flops, parts = build(args.batch, **VARIANTS[name])
        m(), f(), m(), f()  # warm-up (and compilation)
        built[name] = (m, f, flops)
        print(f"  built {name} in {time.perf_counter() - t0:.1f} s")
    times = {n: {"model": [], "step": []} for n in built}
    mm = []
    for _ in range(args.rounds):  # interleaved, so that drift of the machine falls on every variant alike
        mm.append(matmul_gflops())
        for name, (m, f, _) in built.items():
            times[name]["model"].append(timed(m, args.reps))
            times[name]["step"].append(timed(f, args.reps))
    peak = sorted(mm)[len(mm) // 2]
    print(f"matmul 2048^2 fp32: {peak:.0f} GFLOP/s (median of {len(mm)})")
    base = None
    print(f"  {'variant':22s} {'model clips/s':>13s} {'% matmul':>9s} {'step clips/s':>13s} {'step/model':>10s} "
          f"{'step vs base':>12s}")
    for name, (_, _, flops) in built.items():
        tm = sorted(times[name]["model"])[args.rounds // 2]
        ts = sorted(times[name]["step"])[args.rounds // 2]
        base = base or ts
        print(f"  {name:22s} {args.batch / tm:13.1f} {100 * flops / tm / 1e9 / peak:8.1f}% {args.batch / ts:13.1f} "
              f"{tm / ts:10.2f} {base / ts:11.2f}x")
    if args.profile:
        _, f, _, _ = build(args.batch)
        f(), f()
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU], record_shapes=False) as prof:
            for _ in range(3):
                f()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))


if __name__ == "__main__":
    main()
