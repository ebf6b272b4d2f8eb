"""Where a training epoch's time goes: the model, the rest of the step, waiting for data, the diagnostics.

    python -m tools.bench epoch --preset demo [--epochs 3] [--faulty 0.5] [--preload on loader off]

For each --preload path (on: the in-memory set; loader: the same memory cut per item by a DataLoader, as
before media/in_memory.py; off: the files, read by a DataLoader), one process builds the run as train.py
does (the set, its batches, the parts) and trains --epochs xID warm-up epochs through train.train_epoch,
timing each part by wrapping the functions the step calls (on a GPU each timer synchronises: a little overlap lost):

    waiting for data    the time the loop waits for its next batch (the loader, or the in-memory cut)
    augment + log-mel   media/augment.ClipAugment on the batch
    model fwd+bwd+Adam  the rest of train.train_step: encoders, backward, optimizer
    objective           train.objective: bank sampling, targets, soft targets, weights, the loss
    bank update         MemoryBank.update
    diagnostics         analysis.diagnostics.bank_report, logged after every epoch
    checkpoint          the state train.py saves after every epoch

Beside it, in the same process, the bare model (encoders, heads and Adam on a ready batch, as
`tools.bench model`): the epoch's clips/s over the model's is the figure BENCHMARKS.md tracks. The
first epoch is left out of the means (start-up: the first batch, allocations).
"""

import tempfile
import time
from pathlib import Path

import torch

import data
import train
from analysis import diagnostics
from config import parse_config
from machinery.devices import default_device

PARTS = ("waiting for data", "augment + log-mel", "model fwd+bwd+Adam", "objective", "bank update")


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def _timed(fn, sums, name, device):
    def wrapper(*args, **kwargs):
        _sync(device)
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        _sync(device)
        sums[name] = sums.get(name, 0.0) + time.perf_counter() - t0
        return out

    return wrapper


class _TimedLoader:
    """The run's batches, with the wait for each one counted."""

    def __init__(self, loader, sums, device):
        self.loader, self.sums, self.device = loader, sums, device
        self.batch_size = loader.batch_size

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        it = iter(self.loader)
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                return
            _sync(self.device)
            self.sums["waiting for data"] = self.sums.get("waiting for data", 0.0) + time.perf_counter() - t0
            yield batch


def model_clips_per_s(cfg, device, batch, steps=10):
    """The bare model's clips/s at the run's batch: encoders, heads and Adam on one ready batch."""
    parts = train.build_parts(cfg, batch["dataset"], device)
    video, audio = train.device_inputs(parts, batch, device)
    model, opt = parts.model, parts.optimizer

    def step():
        with parts.autocast:
            v, a = model(video, audio)
        loss = -(v.float() * a.float()).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(device)
    return steps * video.shape[0] / (time.perf_counter() - t0)


def _refuse(*args):
    raise ValueError("tools.bench epoch --preload loader")


def split_one(args, preload):
    """One path's split: {part: seconds per epoch}, the epoch's clips/s, the model's clips/s. preload
    "loader": the set preloaded, its clips cut per item by a DataLoader (the path before the in-memory set)."""
    device = default_device()
    loader_cuts, preload = preload == "loader", "on" if preload == "loader" else preload
    with tempfile.TemporaryDirectory() as tmp:
        cfg = parse_config(
            ["--preset", args.preset, "--faulty-fraction", str(args.faulty), "--preload", preload]
            + ["--warmup-epochs", str(args.epochs), "--epochs", "0", "--out", tmp]
            + (["--data", args.root] if args.root else [])
        )
        torch.manual_seed(cfg.seed)
        dataset = data.build_train_set(cfg, device)
        if loader_cuts:  # the same memory, cut per item by the DataLoader (the path before media/in_memory.py)
            real, data.in_memory.InMemoryClips = data.in_memory.InMemoryClips, _refuse
        try:
            sampler, loader = data.train_loader(cfg, dataset, 0, 1, device)
        finally:
            if loader_cuts:
                data.in_memory.InMemoryClips = real
        parts = train.build_parts(cfg, dataset, device)
        sums, per_epoch, clips = {}, [], 0
        timed = _TimedLoader(loader, sums, device)
        objective, update = train.objective, parts.bank.update
        train.objective = _timed(objective, sums, "objective", device)
        parts.bank.update = _timed(update, sums, "bank update", device)
        parts.augment.forward = _timed(parts.augment.forward, sums, "augment + log-mel", device)
        step_fn = train.train_step
        train.train_step = _timed(step_fn, sums, "step", device)
        try:
            for epoch in range(args.epochs):
                sums.clear()
                sampler.set_epoch(epoch)
                t0 = time.perf_counter()
                train.train_epoch(parts, timed, cfg, epoch, 1, False, lambda i: False)
                t1 = time.perf_counter()
                diagnostics.bank_report(parts.bank, dataset.labels, dataset.faulty, cfg.tau_s, cfg.tau_t)
                t2 = time.perf_counter()
                torch.save(parts.state_dict(), Path(tmp) / "ckpt.pt")
                t3 = time.perf_counter()
                inside = sums.pop("step") - sums["augment + log-mel"] - sums["objective"] - sums["bank update"]
                row = {**sums, "model fwd+bwd+Adam": inside, "diagnostics": t2 - t1, "checkpoint": t3 - t2}
                row["other (loop)"] = (t1 - t0) - sum(sums.values()) - inside
                row["epoch"] = t3 - t0
                per_epoch.append(row)
                clips = len(loader) * loader.batch_size
        finally:
            train.objective, train.train_step = objective, step_fn
        batch = next(iter(loader))
        batch["dataset"] = dataset
        model = model_clips_per_s(cfg, device, batch)
    kept = per_epoch[1:] or per_epoch
    mean = {k: sum(r[k] for r in kept) / len(kept) for k in kept[0]}
    return mean, clips / mean["epoch"], model, clips


def bench_epoch(args):
    device = default_device()
    print(
        f"epoch split ({args.preset} preset, {args.faulty:.0%} injected, {device}, {torch.get_num_threads()} threads; "
        f"mean of epochs 2-{args.epochs})"
    )
    results = {p: split_one(args, p) for p in args.preload}  # one after another in this process
    names = list(results)
    print("| part | " + " | ".join(f"--preload {p}: s/epoch | share" for p in names) + " |")
    print("|---|" + "---:|---:|" * len(names))
    parts = list(PARTS) + ["diagnostics", "checkpoint", "other (loop)", "epoch"]
    for part in parts:
        cells = [
            f"{results[p][0].get(part, 0.0):.3f} | {results[p][0].get(part, 0.0) / results[p][0]['epoch']:.0%}"
            for p in names
        ]
        print(f"| {part} | " + " | ".join(cells) + " |")
    for p in names:
        _, epoch_rate, model_rate, clips = results[p]
        print(
            f"--preload {p}: epoch {epoch_rate:.0f} clips/s ({clips} clips), model {model_rate:.0f} clips/s: "
            f"epoch/model {epoch_rate / model_rate:.2f}"
        )
    return results
