"""Where a training epoch's time goes: the model, the rest of the step, waiting for data, the diagnostics.

    python -m lab.bench epoch --preset demo [--epochs 3] [--faulty 0.5] [--preload on loader off ready]

For each --preload path (on: the in-memory set; loader: the same memory cut per item by a DataLoader, as
before media/in_memory.py; off: the files, read by a DataLoader; ready: the in-memory set's batches cut and
augmented before each epoch's clock starts, so its epoch/model is the most any speed-up of the input can
reach), one process builds the run as train.py does (the set, its batches, the parts) and trains --epochs
xID warm-up epochs through train.train_epoch, the paths' epochs interleaved, timing each part by wrapping
the functions the step calls (on a GPU each timer synchronises: a little overlap lost):

    waiting for data    the time the loop waits for its next batch (the loader, or the in-memory cut)
    augment + log-mel   augment.ClipAugment on the batch
    model fwd+bwd+Adam  the rest of train.train_step: encoders, backward, optimizer
    objective           train.objective: bank sampling, targets, soft targets, weights, the loss
    bank update         MemoryBank.update
    diagnostics         tools.bank_report.bank_report and bank_signals, logged after every epoch
    checkpoint          the state train.py saves after every epoch

Beside it, in the same process, the bare model (encoders, heads and Adam on a ready batch, as
`lab.bench model`): the epoch's clips/s over the model's is the figure BENCHMARKS.md tracks. The
first epoch is left out of the means (start-up: the first batch, allocations).
"""

import tempfile
import time
from pathlib import Path

import torch

import data
import train
from config import parse_config, resolve_device
from lab.timing import bare_model_step, sync, time_per_call
from tools import bank_report

PARTS = ("waiting for data", "augment + log-mel", "model fwd+bwd+Adam", "objective", "bank update")


SUMS = {}  # seconds per part of the epoch being timed (the path whose epoch runs fills it)


def _timed(fn, name, device):
    def wrapper(*args, **kwargs):
        sync(device)
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        sync(device)
        SUMS[name] = SUMS.get(name, 0.0) + time.perf_counter() - t0
        return out

    return wrapper


class _TimedLoader:
    """The run's batches, with the wait for each one counted."""

    def __init__(self, loader, device):
        self.loader, self.device, self.batch_size = loader, device, loader.batch_size

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
            sync(self.device)
            SUMS["waiting for data"] = SUMS.get("waiting for data", 0.0) + time.perf_counter() - t0
            yield batch


class _Ready:
    """The epoch's batches, cut and augmented before its clock starts (`make`), handed over as they are: the
    epoch with its input free (the step's augment is then _PassOn)."""

    def __init__(self, loader, augment):
        self.loader, self.augment, self.batch_size, self.batches = loader, augment, loader.batch_size, []

    def make(self):
        self.batches = []
        for b in self.loader:
            video, audio = self.augment(b["video"], b.get("audio"), b.get("mel"))  # (B, 3, T, S, S), (B, 1, F, T')
            self.batches.append(
                {k: v for k, v in b.items() if k not in ("audio", "mel")} | {"video": video, "mel": audio}
            )

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        return iter(self.batches)


class _PassOn(torch.nn.Module):
    """The step's augment on the ready path: the batch's video and log-mel were made before the clock."""

    def forward(self, video, wav=None, mel=None):
        return video, mel


def _refuse(*args):
    raise ValueError("lab.bench epoch --preload loader")


def model_clips_per_s(cfg, device, batch, steps=5):
    """The bare model's clips/s at the run's batch: encoders, heads and Adam on one ready batch."""
    parts = train.build_parts(cfg, batch["dataset"], device)
    wav, mel = (batch[k].to(device) if k in batch else None for k in ("audio", "mel"))  # as train.train_step
    video, audio = parts.augment(batch["video"].to(device), wav, mel)
    video = video.to(memory_format=parts.video_format)
    step = bare_model_step(parts.model, parts.optimizer, parts.autocast, video, audio)
    return video.shape[0] / time_per_call(step, steps, device)


class TimedRun:
    """One path's run, built as train.py builds it; `epoch(e)` trains and times one epoch, `model()` the bare
    model at its batch. preload "loader": the set preloaded, cut per item by a DataLoader (the path before
    the in-memory set)."""

    def __init__(self, args, preload, tmp, device):
        self.device, self.tmp, self.rows = device, tmp, []
        Path(tmp).mkdir(parents=True, exist_ok=True)
        loader_cuts, ready = preload == "loader", preload == "ready"
        self.cfg = cfg = parse_config(
            [
                "--preset",
                args.preset,
                "--faulty-fraction",
                str(args.faulty),
                "--preload",
                "on" if preload in ("loader", "ready") else preload,
            ]
            + ["--warmup-epochs", str(args.epochs), "--epochs", "0", "--out", tmp]
            + (["--data", args.root] if args.root else [])
        )
        torch.manual_seed(cfg.seed)
        self.dataset = data.build_train_set(cfg, device)
        if loader_cuts:  # the same memory, cut per item by the DataLoader
            real, data.in_memory.InMemoryClips = data.in_memory.InMemoryClips, _refuse
        try:
            self.sampler, self.loader = data.train_loader(cfg, self.dataset, 0, 1, device)
        finally:
            if loader_cuts:
                data.in_memory.InMemoryClips = real
        self.parts = train.build_parts(cfg, self.dataset, device)
        if ready:  # the batches made before each epoch by the run's own augment; the step's augment passes them on
            self.loader = _Ready(self.loader, self.parts.augment)
            self.parts.augment = _PassOn()
        self.parts.bank.update = _timed(self.parts.bank.update, "bank update", device)
        self.parts.augment.forward = _timed(self.parts.augment.forward, "augment + log-mel", device)
        self.clips = len(self.loader) * self.loader.batch_size

    def epoch(self, epoch):
        self.sampler.set_epoch(epoch)
        if isinstance(self.loader, _Ready):
            self.loader.make()
        SUMS.clear()
        t0 = time.perf_counter()
        train.train_epoch(self.parts, _TimedLoader(self.loader, self.device), self.cfg, epoch, 1, False)
        t1 = time.perf_counter()
        bank_report.bank_report(self.parts.bank, self.dataset.labels, self.dataset.faulty, self.cfg.tau_s)
        bank_report.bank_signals(self.parts.bank, self.cfg)
        t2 = time.perf_counter()
        torch.save(self.parts.state_dict(), Path(self.tmp) / "ckpt.pt")
        t3 = time.perf_counter()
        inside = SUMS.pop("step") - SUMS["augment + log-mel"] - SUMS["objective"] - SUMS["bank update"]
        row = {**SUMS, "model fwd+bwd+Adam": inside, "diagnostics": t2 - t1, "checkpoint": t3 - t2}
        row["other (loop)"] = (t1 - t0) - sum(SUMS.values()) - inside
        row["epoch"] = t3 - t0
        self.rows.append(row)

    def model(self):
        batch = next(iter(getattr(self.loader, "loader", self.loader)))  # as cut, before augment
        return model_clips_per_s(self.cfg, self.device, {**batch, "dataset": self.dataset})


def split(args):
    """Every path's run built first, then their epochs interleaved (path A's epoch e, path B's, ...) and
    the bare model timed beside each round, so that a machine's drift falls on every path alike. Returns
    {path: (mean seconds per part, epoch clips/s, model clips/s, clips per epoch)}, epoch 1 left out."""
    device = resolve_device(say=False)
    objective, step_fn = train.objective, train.train_step
    train.objective, train.train_step = _timed(objective, "objective", device), _timed(step_fn, "step", device)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            runs = {p: TimedRun(args, p, f"{tmp}/{p}", device) for p in args.preload}
            models = {p: [] for p in runs}
            for epoch in range(args.epochs):
                for p, run in runs.items():
                    run.epoch(epoch)
                    models[p].append(run.model())
        finally:
            train.objective, train.train_step = objective, step_fn
    out = {}
    for p, run in runs.items():
        kept, rates = run.rows[1:] or run.rows, models[p][1:] or models[p]  # epoch 1 left out
        mean = {k: sum(r[k] for r in kept) / len(kept) for k in kept[0]}
        out[p] = (mean, run.clips / mean["epoch"], sum(rates) / len(rates), run.clips)
    return out


def bench_epoch(args):
    device = resolve_device(say=False)
    print(
        f"epoch split ({args.preset} preset, {args.faulty:.0%} injected, {device}, {torch.get_num_threads()} threads; "
        f"mean of epochs 2-{args.epochs})"
    )
    results = split(args)
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
