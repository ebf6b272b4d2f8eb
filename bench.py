"""Throughput benchmarks, one command per figure, each printing a short table.

    python bench.py data  [--root data/raw --prepared data/raw_prepared] [--preset ablation]
                                            # decode ms/clip, loader clips/s per worker, before/after prepare
    python bench.py model [--preset ablation] [--batch 112]      # bare encoders fwd+bwd+Adam, random data
    python bench.py step  [--preset ablation] [--batch 112]      # the full train.py step next to `model`

`model` and `step` run on the GPU when there is one (fp32, bf16, bf16 + channels_last_3d there; fp32
on a CPU); `--steps` and `--batch` keep CPU runs short. The step/model ratio is the figure that
matters: everything but the encoders (bank sampling, targets, soft targets, weights, loss, bank
update) should cost little.
"""
import argparse
import time
from contextlib import nullcontext
from pathlib import Path

import torch

import data
import manifest
import prepare
import train
from memory_bank import MemoryBank


def bench_data(args):
    """Per source: decode time, item time, DataLoader clips/s per worker; and the prepared copy's."""
    cfg = train.parse_config(["--preset", args.preset, "--data", args.root, "--no-preload"])
    spec = train.clip_spec(cfg)
    roots = [("as they come", args.root)]
    if args.prepared:
        if not Path(args.prepared).exists():  # made once, with the preset's frame and sample rates
            t0 = time.perf_counter()
            prepare.prepare(_prepare_args(args.root, args.prepared, cfg))
            print(f"prepare: {time.perf_counter() - t0:.1f}s")
        roots.append(("prepared", args.prepared))
    torch.set_num_threads(1)
    print(f"data ({args.preset}): clip {spec.frames}x{spec.size}x{spec.size} at {spec.fps:g} fps, "
          f"audio {spec.audio_rate} Hz -> {spec.n_mels}x{spec.n_time}, first {args.n} train videos")
    print(f"  {'source':14s} {'decode ms':>10s} {'item ms':>8s} " + " ".join(f"{f'{w} worker(s)':>12s}" for w in args.workers)
          + "   (DataLoader clips/s per worker)")
    for name, root in roots:
        records = manifest.load_records(cfg.layout, root, "train")[0][:args.n]
        t0 = time.perf_counter()
        for r in records:
            data.read_clip(r.path, r.duration / 2, spec, audio_start=max(0.0, r.duration / 2 - 0.75))
        decode = 1e3 * (time.perf_counter() - t0) / len(records)
        ds = data.AVDataset(records, spec, train=True)
        t0 = time.perf_counter()
        for i in range(len(ds)):
            ds[i]
        item = 1e3 * (time.perf_counter() - t0) / len(ds)
        rates = []
        for workers in args.workers:
            loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=workers, worker_init_fn=train._worker_init,
                                                 sampler=torch.utils.data.RandomSampler(ds, num_samples=2 * len(ds)))
            it = iter(loader)
            next(it)  # worker start-up is not throughput
            t0, n = time.perf_counter(), 0
            for batch in it:
                n += batch["video"].shape[0]
            rates.append(n / (time.perf_counter() - t0) / workers)
        print(f"  {name:14s} {decode:10.1f} {item:8.1f} " + " ".join(f"{r:12.1f}" for r in rates))


def _prepare_args(src, dst, cfg):
    p = argparse.ArgumentParser()
    prepare.add_arguments(p)
    return p.parse_args([str(src), str(dst), "--fps", str(cfg.fps), "--audio-rate", str(cfg.audio_rate)])


def _setup(args, amp, channels_last):
    cfg = train.parse_config(["--preset", args.preset])
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = train.build_model(cfg).to(device)
    fmt = torch.channels_last_3d if channels_last else torch.contiguous_format
    model.video.to(memory_format=fmt)
    video = torch.randn(args.batch, 3, cfg.frames, cfg.size, cfg.size, device=device).to(memory_format=fmt)
    audio = torch.randn(args.batch, 1, cfg.n_mels, cfg.n_time, device=device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if amp else nullcontext()
    return cfg, device, model, video, audio, autocast


def _time(fn, steps, device):
    fn()  # warm-up: allocations, cuDNN algorithm choice
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps


def bench_model_and_step(args):
    gpu = torch.cuda.is_available()
    settings = [("fp32", False, False)] + ([("bf16", True, False), ("bf16+cl3d", True, True)] if gpu else [])
    print(f"{args.preset} preset, batch {args.batch}, {'GPU ' + torch.cuda.get_device_name() if gpu else 'CPU'}")
    print(f"  {'setting':10s} {'model clips/s':>14s} {'step clips/s':>13s} {'step/model':>11s}")
    for name, amp, cl in settings:
        cfg, device, model, video, audio, autocast = _setup(args, amp, cl)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        bank = MemoryBank(args.bank, momentum=cfg.momentum).to(device)

        def model_step():  # the floor: encoders, heads and Adam on a stand-in loss
            with autocast:
                v, a = model(video, audio)
            loss = -(v.float() * a.float()).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        def full_step():  # what train.py does per step, less data loading and DDP
            idx = torch.randint(0, args.bank, (args.batch,), device=device)
            with autocast:
                v, a = model(video, audio)
            loss, _ = train.robust_xid_loss(v, a, idx, bank, cfg, "robust")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            bank.update(idx, v, a)

        t_model = _time(model_step, args.steps, device)
        t_step = _time(full_step, args.steps, device) if args.cmd == "step" else float("nan")
        print(f"  {name:10s} {args.batch / t_model:14.1f} {args.batch / t_step:13.1f} {t_model / t_step:11.2f}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cmd", choices=["data", "model", "step"])
    p.add_argument("--preset", default=None, help="train.py preset (default: demo for data, ablation otherwise)")
    p.add_argument("--root", default="data/synth", help="dataset as it comes (data)")
    p.add_argument("--prepared", default="", help="its prepared copy, made with `prepare` if missing (data)")
    p.add_argument("--n", type=int, default=100, help="videos for the data benchmark")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--batch", type=int, default=112 if torch.cuda.is_available() else 8)
    p.add_argument("--steps", type=int, default=20 if torch.cuda.is_available() else 3)
    p.add_argument("--bank", type=int, default=50000, help="memory-bank slots (the paper's 50k subset)")
    args = p.parse_args(argv)
    args.preset = args.preset or "ablation"
    bench_data(args) if args.cmd == "data" else bench_model_and_step(args)


if __name__ == "__main__":
    main()
