"""Throughput benchmarks, one command per figure, each printing a short table.

    python -m lab.bench data  [--root data/raw --prepared data/raw_prepared] [--preset ablation]
                          [--decoder-threads 0 1] [--sws-threads 0 1]
                                            # decode ms/clip, loader clips/s per worker, before/after prepare
    python -m lab.bench parts --root data/prepared      # a clip's ms, part by part, this checkout's code
    python -m lab.bench model [--preset ablation] [--batch 112]      # bare encoders fwd+bwd+Adam, random data
    python -m lab.bench step  [--preset ablation] [--batch 112]      # the full train.py step next to `model`
    python -m lab.bench epoch [--preset demo --epochs 3 --preload on ready]  # an epoch's split: lab/bench_epoch.py
    python -m lab.bench eval  [--preset demo --root data/synth]      # feature extraction, retrieval, few-shot
    python -m lab.bench scan  [--root data/synth2000 --workers 1 2]  # tools/scan.py: files/s per processes
    python -m lab.bench profile|threads|fold [--preset demo --batch 32]  # CPU profile, threads, folded convs

`model` and `step` run on the GPU when there is one (fp32, bf16, bf16 + channels_last_3d there; fp32
on a CPU); `--steps` and `--batch` keep CPU runs short. `model` gives GFLOP per clip (torch's flop
counter, forward + backward), clips/s, achieved TFLOP/s and peak memory; `step` adds train.train_step,
the function the training loop calls, on device-resident batches. The step/model ratio is the
figure that matters: everything but the encoders (augmentation, spectrograms, bank sampling,
targets, soft targets, weights, loss, bank update) should cost little. Figures: BENCHMARKS.md.
"""

import argparse
import itertools
import time
from contextlib import nullcontext
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

import checkpoint
import data
import train
from augment import ClipAugment
from config import parse_config, resolve_device
from lab.bench_epoch import bench_epoch
from lab.bench_profile import bench_fold, bench_profile, bench_threads
from lab.timing import bare_model_step, time_per_call
from media import decode, manifest
from media.decode import DECODER_THREADS, SWSCALE_THREADS
from memory_bank import MemoryBank
from model import AVModel
from tools import prepare


def bench_data(args):
    """Per source: decode time, item time, DataLoader clips/s per worker; and the prepared copy's."""
    cfg = parse_config(["--preset", args.preset, "--data", args.root, "--preload", "off"])
    spec = data.clip_spec(cfg)
    roots = [("as they come", args.root)]
    if args.prepared:
        if not Path(args.prepared).exists():  # made once, with the preset's frame and sample rates
            t0 = time.perf_counter()
            prepare.prepare(args.root, args.prepared, fps=cfg.fps, audio_rate=cfg.audio_rate)
            print(f"prepare: {time.perf_counter() - t0:.1f}s")
        roots.append(("prepared", args.prepared))
    torch.set_num_threads(1)
    print(
        f"data ({args.preset}): clip {spec.frames}x{spec.size}x{spec.size} at {spec.fps:g} fps, "
        f"audio {spec.audio_rate} Hz -> {spec.n_mels}x{spec.n_time}, first {args.n} train videos"
    )
    print(
        f"  {'source':14s} {'decoder':>7s} {'swscale':>7s} {'decode ms':>10s} {'item ms':>8s} "
        + " ".join(f"{f'{w} worker(s)':>12s}" for w in args.workers)
        + "   (DataLoader clips/s per worker)"
    )
    table = []
    for name, root in roots:
        records = manifest.load_records(cfg.layout, root, "train")[0][: args.n]
        ds = data.AVDataset(records, spec, train=True)
        for threads, sws in itertools.product(args.decoder_threads, args.sws_threads):  # back to back, one run
            decode.DECODER_THREADS, decode.SWSCALE_THREADS = threads, sws  # forked workers inherit them
            t0 = time.perf_counter()
            for r in records:
                decode.read_clip(r.path, r.duration / 2, spec, audio_start=max(0.0, r.duration / 2 - 0.75))
            decode_ms = 1e3 * (time.perf_counter() - t0) / len(records)
            t0 = time.perf_counter()
            for i in range(len(ds)):
                ds[i]
            item = 1e3 * (time.perf_counter() - t0) / len(ds)
            rates = [loader_rate(ds, w, getattr(args, "loader_batch", 8)) for w in args.workers]
            print(
                f"  {name:14s} {threads:7d} {sws:7d} {decode_ms:10.1f} {item:8.1f} "
                + " ".join(f"{r:12.1f}" for r in rates)
            )
            table.append(
                {
                    "source": name,
                    "decoder_threads": threads,
                    "sws_threads": sws,
                    "decode_ms": decode_ms,
                    "item_ms": item,
                    "clips_per_s": {w: r * w for w, r in zip(args.workers, rates)},
                }
            )
    decode.DECODER_THREADS, decode.SWSCALE_THREADS = DECODER_THREADS, SWSCALE_THREADS
    return table


def loader_rate(ds, n_workers, batch=8):
    """DataLoader clips/s per worker, worker start-up left out: at least 16 batches per worker, so the
    first batch (timed out) and the last ones (fewer workers busy) weigh little."""
    loader = data.loader(
        ds,
        batch,
        n_workers,
        sampler=torch.utils.data.RandomSampler(ds, num_samples=max(2 * len(ds), 16 * batch * max(1, n_workers))),
    )
    it = iter(loader)
    next(it)
    t0, n = time.perf_counter(), 0
    for batch in it:
        n += batch["video"].shape[0]
    return n / (time.perf_counter() - t0) / n_workers


def _setup(args, amp, channels_last):
    cfg = parse_config(["--preset", args.preset])
    device = resolve_device(say=False)
    model = AVModel(**checkpoint.model_args(cfg)).to(device)
    fmt = torch.channels_last_3d if channels_last else torch.contiguous_format
    model.video.to(memory_format=fmt)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if amp else nullcontext()
    return cfg, device, model, fmt, autocast


def bench_model_and_step(args):
    """`model`: encoders + heads + Adam on ready inputs, the floor. `step`: train.train_step, the
    function the training loop calls, on device-resident loader-like batches (uint8 crops and
    waveforms): augmentation, spectrograms, bank sampling, targets, soft targets, weights, loss,
    backward, Adam, bank update."""
    gpu = torch.cuda.is_available()
    settings = [("fp32", False, False)] + ([("bf16", True, False), ("bf16+cl3d", True, True)] if gpu else [])
    table = []
    print(
        f"{args.preset} preset, batch {args.batch}, {'GPU ' + torch.cuda.get_device_name() if gpu else 'CPU'}, "
        f"{torch.get_num_threads()} threads"
    )
    print(
        f"  {'setting':10s} {'GFLOP/clip':>10s} {'model clips/s':>14s} {'TFLOP/s':>8s} {'peak GiB':>9s} "
        f"{'step clips/s':>13s} {'step/model':>11s} {'peak GiB':>9s}"
    )
    for name, amp, cl in settings:
        table.append(_bench_setting(args, name, amp, cl))
        if gpu:  # the setting's model and bank are gone with its function: free their memory
            torch.cuda.empty_cache()
    blank = ([] if gpu else ["peak GiB (torch tracks the peak memory on a GPU only)"]) + (
        [] if args.cmd == "step" else ["step clips/s and step/model (`lab.bench step` times train.train_step)"]
    )
    if blank:  # say why a column is empty, not leave a reader to guess
        print("  nan: " + "; ".join(blank))
    return table


def _bench_setting(args, name, amp, cl):
    """One row of `model` / `step`: a fresh model, optimizer and bank at one precision and layout."""
    gpu = torch.cuda.is_available()
    cfg, device, model, fmt, autocast = _setup(args, amp, cl)
    spec = data.clip_spec(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    scaler = torch.amp.GradScaler(device.type, enabled=False)
    bank = MemoryBank(args.bank, momentum=cfg.momentum).to(device)
    augment = ClipAugment(spec).to(device)
    B = args.batch
    batch = {
        "video": torch.randint(0, 256, (B, 3, cfg.frames, cfg.size, cfg.size), dtype=torch.uint8, device=device),
        "audio": torch.randn(B, int(spec.audio_seconds * spec.audio_rate), device=device) * 0.1,
        "index": torch.randint(0, args.bank, (B,), device=device),
    }
    video, audio = augment(batch["video"], batch["audio"])  # (B, 3, T, H, W), (B, 1, n_mels, n_time)
    video = video.to(memory_format=fmt)

    model_step = bare_model_step(model, opt, autocast, video, audio)
    parts = train.Parts(
        model=model,
        augment=augment,
        bank=bank,
        optimizer=opt,
        scaler=scaler,
        autocast=autocast,
        video_format=fmt,
        truth={},
    )

    def full_step():  # what the training loop does per step, less data loading and DDP
        batch["index"] = torch.randint(0, args.bank, (B,), device=device)
        train.train_step(parts, batch, cfg, "robust", cfg.lr)

    with FlopCounterMode(display=False) as counter:
        model_step()
    gflop = counter.get_total_flops() / B / 1e9  # forward + backward per clip
    t_model = time_per_call(model_step, args.steps, device)
    mem_model = torch.cuda.max_memory_allocated() / 2**30 if gpu else float("nan")  # nan: not tracked on a CPU
    t_step, mem_step = float("nan"), float("nan")
    if args.cmd == "step":
        t_step = time_per_call(full_step, args.steps, device)
        mem_step = torch.cuda.max_memory_allocated() / 2**30 if gpu else float("nan")
    print(
        f"  {name:10s} {gflop:10.2f} {B / t_model:14.1f} {gflop * B / t_model / 1e3:8.3f} {mem_model:9.2f} "
        f"{B / t_step:13.1f} {t_model / t_step:11.2f} {mem_step:9.2f}"
    )
    return {
        "setting": name,
        "gflop_per_clip": gflop,
        "model_clips_per_s": B / t_model,
        "tflops": gflop * B / t_model / 1e3,
        "model_peak_gib": mem_model,
        "step_clips_per_s": B / t_step,
        "step_over_model": t_model / t_step,
        "step_peak_gib": mem_step,
    }


def bench_parts(args):
    """A training clip's milliseconds part by part on a prepared copy, with this checkout's code: open
    (the frame index where the copy has one, else the container), seek + decode + RGB, audio (the PCM
    sidecar where there is one, else the container), crop and flip. The videos, starts and crops are
    drawn from a fixed seed, so the same command in a checkout of older code (lab/bench.py copied
    in) times the same clips: BENCHMARKS.md, "Data loading", alternates the two."""
    cfg = parse_config(["--preset", args.preset, "--data", args.root, "--preload", "off"])
    spec = data.clip_spec(cfg)
    records = manifest.load_records(cfg.layout, args.root, "train")[0][: args.n]
    crop = data.video_transform(spec.size, True, spec.augment)
    indexed = hasattr(decode, "read_frame_index")  # older checkouts have neither index nor sidecar
    sidecar = hasattr(decode, "read_sidecar")
    parts = ("open", "seek+decode+rgb", "audio", "crop+flip")
    ms = {p: 0.0 for p in parts}
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    for _ in range(args.rounds):
        for r in records:
            start = float(torch.rand((), generator=g)) * max(0.0, r.duration - spec.seconds)
            seed = int(torch.randint(1 << 30, (), generator=g))
            a0 = max(0.0, start + spec.seconds / 2 - spec.audio_seconds / 2)
            t = [time.perf_counter()]
            index = decode.read_frame_index(r.path) if indexed else None
            with nullcontext() if index is not None else decode.open_media(r.path) as c:
                t.append(time.perf_counter())
                if index is not None:
                    frames = decode.decode_indexed(r.path, index, start, spec.frames, spec.fps)
                else:
                    frames = decode.decode_frames(c, start, spec.frames, spec.fps)
                t.append(time.perf_counter())
                wav = decode.read_sidecar(r.path, a0, spec.audio_seconds, spec.audio_rate) if sidecar else None
                if wav is None:
                    with decode.open_media(r.path) if c is None else nullcontext(c) as ca:
                        decode.decode_audio(ca, a0, spec.audio_seconds, spec.audio_rate)
                t.append(time.perf_counter())
            torch.manual_seed(seed)
            crop(frames)
            t.append(time.perf_counter())
            for p, a, b in zip(parts, t, t[1:]):
                ms[p] += 1e3 * (b - a) / (args.rounds * len(records))
    n = args.rounds * len(records)
    print(f"{args.preset}: {n} clips, {len(records)} videos of {args.root}; ms per clip (mean)")
    print("| part | ms |\n|---|---:|")
    for p in parts:
        print(f"| {p} | {ms[p]:.2f} |")
    print(f"| sum | {sum(ms.values()):.2f} |")
    return ms


def bench_eval(args):
    """Feature extraction (10 clips per video) for the train and test splits, then retrieval and the
    50-trial few-shot SVM on those features, with an untrained encoder of the preset's size."""
    import evaluate

    cfg = parse_config(["--preset", args.preset, "--data", args.root])
    device = resolve_device(say=False)
    encoder = AVModel(**checkpoint.model_args(cfg)).video
    rows, feats, both = [], {}, evaluate.resolve(cfg)
    for split in ("train", "test"):
        ds = data.eval_set(cfg, getattr(both, split).records)
        t0 = time.perf_counter()
        feats[split] = evaluate.extract_features(encoder, ds, device, workers=args.workers[0])
        dt = time.perf_counter() - t0
        rows.append(
            (
                f"features, {split} ({len(ds)} videos x {ds.num_clips} clips)",
                dt,
                f"{len(ds) * ds.num_clips / dt:.0f} clips/s",
            )
        )
    tr, te = feats["train"], feats["test"]
    t0 = time.perf_counter()
    evaluate.recall_at_k(te["fmap"], te["labels"], tr["fmap"], tr["labels"], device)
    rows.append((f"retrieval R@1/5/20 ({tr['fmap'].shape[1]}-d)", time.perf_counter() - t0, ""))
    # untimed: the first trial pays for importing scikit-learn, which would be charged to one job only
    evaluate.few_shot(tr["pooled"], tr["labels"], te["pooled"], te["labels"], shots=(1,), trials=1)
    # the trials one by one, then over the cores twice: the first call starts the worker processes,
    # the second finds them running (as every evaluation after the first in one demo.py process)
    n, results, base = max(2, torch.get_num_threads()), [], None
    for jobs, when in ((1, ""), (n, ", starting processes"), (n, ", processes running")):
        t0 = time.perf_counter()
        results.append(
            evaluate.few_shot(
                tr["pooled"], tr["labels"], te["pooled"], te["labels"], shots=(1, 5, 20), trials=50, jobs=jobs
            )
        )
        dt = time.perf_counter() - t0
        base = base or dt
        ratio = "" if jobs == 1 else f"{base / dt:.2f}x, same numbers: {results[-1] == results[0]}"
        rows.append((f"few-shot SVM, 1/5/20 shots x 50 trials, {jobs} job(s){when}", dt, ratio))
    print(f"eval ({args.preset} preset, {args.root}, {device.type}, {args.workers[0]} loader workers)")
    for name, sec, extra in rows:
        print(f"  {name:70s} {sec:8.2f} s  {extra}")


def bench_scan(args):
    """files/s of tools/scan.py's scan over every video under --root, once per process count, alternated
    twice (the page cache is warm after the first pass); the manifests must agree."""
    import io

    from tools import scan

    rows, lines = {}, []
    for rep, jobs in itertools.product(range(2), args.workers):
        t0 = time.perf_counter()
        got = scan.scan(args.root, jobs=jobs, out=io.StringIO(), progress=False)
        seconds = time.perf_counter() - t0
        assert rows.setdefault("first", got) == got, "the manifest depends on the process count"
        lines.append(f"| {jobs} | {rep} | {len(got)} | {seconds:.2f} | {len(got) / seconds:.0f} |")
    print("| processes | pass | files | s | files/s |\n|---:|---:|---:|---:|---:|\n" + "\n".join(lines))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "cmd", choices=["data", "parts", "model", "step", "epoch", "eval", "scan", "profile", "threads", "fold"]
    )
    p.add_argument("--rounds", type=int, default=None, help="passes over the videos (parts: 6); rounds (threads: 2)")
    p.add_argument(
        "--preset", default=None, help="train.py preset (default demo for epoch/profile/threads, else ablation)"
    )
    p.add_argument("--root", default="data/synth", help="dataset as it comes (data)")
    p.add_argument("--prepared", default="", help="its prepared copy, made with `prepare` if missing (data)")
    p.add_argument("--n", type=int, default=100, help="videos for the data benchmark")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument(
        "--decoder-threads",
        type=int,
        nargs="+",
        default=[DECODER_THREADS],
        help="FFmpeg threads per stream to compare (data); 0 is FFmpeg's default, one per core",
    )
    p.add_argument(
        "--sws-threads",
        type=int,
        nargs="+",
        default=[SWSCALE_THREADS],
        help="swscale threads per frame conversion to compare (data); 0 is PyAV's default, one per core",
    )
    p.add_argument("--batch", type=int, default=112 if torch.cuda.is_available() else 8)
    p.add_argument("--loader-batch", type=int, default=8, help="the DataLoader's batch (data)")
    p.add_argument("--steps", type=int, default=None, help="timed steps (default 20 on a GPU, 3 on a CPU; profile 5)")
    p.add_argument("--bank", type=int, default=50000, help="memory-bank slots (the paper's 50k subset)")
    p.add_argument("--epochs", type=int, default=3, help="epochs timed, the first left out of the means (epoch)")
    p.add_argument("--faulty", type=float, default=0.5, help="share of injected faulty positives (epoch)")
    p.add_argument(
        "--preload",
        nargs="+",
        default=["on"],
        choices=["auto", "on", "loader", "off", "ready"],
        help="paths to split (epoch)",
    )
    args = p.parse_args(argv)
    args.preset = args.preset or ("demo" if args.cmd in ("epoch", "profile", "threads", "fold") else "ablation")
    args.rounds = args.rounds or (2 if args.cmd in ("threads", "fold") else 6)
    args.steps = args.steps or {"profile": 5, "threads": 20, "fold": 20}.get(
        args.cmd, 20 if torch.cuda.is_available() else 3
    )
    args.root = None if args.cmd == "epoch" and args.root == "data/synth" else args.root  # epoch: the preset's set
    commands = {"data": bench_data, "parts": bench_parts, "eval": bench_eval, "scan": bench_scan, "epoch": bench_epoch}
    commands |= {"profile": bench_profile, "threads": bench_threads, "fold": bench_fold}
    commands.get(args.cmd, bench_model_and_step)(args)


if __name__ == "__main__":
    main()
