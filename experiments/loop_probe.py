"""Measurement (issue 32): does the training loop keep up with its step on a CPU? The loop's clips/s
(train.py's own epoch log) for a few loader settings, beside train.train_step timed alone in this
process on the same preset (experiments/cpu_step_probe.py), interleaved over rounds.

    python -m experiments.loop_probe [--epochs 4] [--rounds 2] [--variants NAME ...]
    python -m experiments.loop_probe --against REF --variants "0 workers (demo)" --rounds 3   # a code change

Each variant is a fresh `train.py --preset demo` run of a few xID epochs on --data (default the 500-video
data/synth, generated when missing, where an epoch takes seconds); its figure is
the median clips/s over the epochs after the first (the first includes the workers' start).
--against REF also runs each variant from a temporary git worktree of commit REF, alternated with this
checkout, and says whether the two logged the same losses (a speed-up that must not change the numbers).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch

from experiments import demo
from experiments.cpu_step_probe import build, timed
from runstate import read_log

ROOT = Path(__file__).resolve().parents[1]

# name: (train.py options, environment changes)
VARIANTS = {
    "1 worker (demo before)": (["--workers", "1"], {}),
    "0 workers (demo)": (["--workers", "0"], {}),
    "2 workers": (["--workers", "2"], {}),
    # OpenMP threads that sleep at a barrier instead of spinning leave the core to the worker
    "1 worker, OMP passive": (["--workers", "1"], {"OMP_WAIT_POLICY": "PASSIVE"}),
}


def loop_clips_per_s(options, env, epochs, batch, data, root=ROOT):
    """(median clips/s of the epochs after the first, the logged losses) of a train.py run from `root`."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, str(root / "train.py"), "--preset", "demo", "--warmup-epochs", str(epochs),
               "--epochs", "0", "--batch-size", str(batch), "--data", data, "--out", out, *options]
        res = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env={**os.environ, **env})
        if res.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stderr[-2000:]}")
        log = read_log(Path(out) / "log.jsonl")
    return statistics.median(r["clips_per_s"] for r in log[1:]), [r["loss"] for r in log]


@contextmanager
def worktree(ref):
    """A temporary git worktree of commit `ref`, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="loop_probe_"))
    subprocess.run(["git", "worktree", "add", "--detach", str(path), ref], cwd=ROOT, check=True, capture_output=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, capture_output=True)
        shutil.rmtree(path, ignore_errors=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS))
    p.add_argument("--data", default="data/synth")
    p.add_argument("--against", metavar="REF", help="also run each variant from this commit, alternated")
    args = p.parse_args()
    demo.ensure_data(args.data)
    data = str(Path(args.data).resolve())  # the same files from either checkout
    with worktree(args.against) if args.against else nullcontext() as other:
        roots = {"": ROOT} | ({f" @{args.against}": other} if other else {})
        _, step, _, _ = build(args.batch)
        step(), step()
        steps, loops, losses = [], {}, {}
        for _ in range(args.rounds):
            steps.append(args.batch / timed(step, 6))
            for name in args.variants:
                for tag, root in roots.items():
                    t0 = time.perf_counter()
                    speed, losses[name + tag] = loop_clips_per_s(*VARIANTS[name], args.epochs, args.batch, data, root)
                    loops.setdefault(name + tag, []).append(speed)
                    print(f"  {name + tag}: {speed:.1f} clips/s ({time.perf_counter() - t0:.0f} s)", flush=True)
        steps.append(args.batch / timed(step, 6))
    s = statistics.median(steps)
    print(f"train_step alone: {s:.1f} clips/s (median of {len(steps)}; {torch.get_num_threads()} threads)")
    print(f"  {'variant':20s} {'loop clips/s':>12s} {'loop/step':>9s}")
    for name, v in loops.items():
        m = statistics.median(v)
        print(f"  {name:20s} {m:12.1f} {m / s:9.2f}")
    for name in args.variants if args.against else []:
        ours, theirs = loops[name], loops[f"{name} @{args.against}"]
        per_round = ", ".join(f"{a / b:.2f}x" for a, b in zip(ours, theirs))
        same = losses[name] == losses[f"{name} @{args.against}"]
        print(f"{name}: this checkout / {args.against} = {statistics.median(ours) / statistics.median(theirs):.2f}x "
              f"(per round {per_round}); logged losses {'identical' if same else 'DIFFER'}")


if __name__ == "__main__":
    main()
