"""Modify and rerun: one branch off `make demo`'s warm-up, evaluated with make demo's protocol, printed beside the
warm-up's own numbers and make demo's branch of the same method, each difference beside the noise measured for
such a branch (lab/results/rerun_settings/noise.json: branch seeds on one warm-up) and the few-shot trials' spread.

    make demo                                           # once: the warm-up, runs/make_demo/seed0_faulty25/warmup
    .venv/bin/python -m tools.rerun --lam 0.3           # any train.py option; --loss picks the method (robust)
    .venv/bin/python -m tools.rerun --branch-seed 3     # no change, another branch seed: what noise looks like
    .venv/bin/python -m tools.rerun --measure-noise 9   # remake the noise file (branch seeds 0-8)

A branch seed (train.py --seed, with --fault-seed 0) changes the branch's shuffling, augmentations and negatives and
keeps the set and its injected faults. Branch seed 0, unchanged, is make demo's branch but for float rounding (make
demo trains its branches side by side, a core's share each); `--threads 1` on 2 cores reproduces it number for
number, in about twice the time. The branch is trained once per
set of options (its folder under --out; rerunning reads it back). Tests: tests/test_rerun.py
"""

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import torch
from scipy import stats

import demo
import evaluate
import train
from config import parse_config
from tools.bank_report import BankReport
from tools.demo_report import cpu_kind

NOISE = Path(__file__).resolve().parents[1] / "lab" / "results" / "rerun_settings" / "noise.json"
COLUMNS = ("R@1", "R@5", "1-shot", "5-shot", "AUROC")
SEED, FAULTY = 0, 0.25  # make demo's setting


def branch(args, method, options, out, seed):
    """Train (or read back) one branch of `method` with extra train.py `options` into `out` -> its table row."""
    root, common, _ = demo.setting_configs(args, SEED, FAULTY)  # common holds args.train_args: the change
    warm = root / "warmup" / "ckpt.pt"
    if not warm.is_file():
        raise SystemExit(f"tools.rerun: no warm-up at {warm}: run `make demo` first (README: its minutes per CPU)")
    _, own = demo.branches_of(args, demo.paper_delta(FAULTY))[method]
    init = ["--init", str(warm), "--warmup-epochs", "0", "--epochs", str(args.epochs)]
    cfg = parse_config(
        [*common, "--out", str(out), *init, *own, *options, "--seed", str(seed), "--fault-seed", str(SEED)]
    )
    if (demo.trained(out, cfg) or 0) < args.epochs:
        train.main(cfg, report=BankReport(cfg))
    return demo.evaluate_branch(args, out / "ckpt.pt")


def trials_sd(args, ckpt):
    """The 1-shot accuracy's SD over the few-shot trials (evaluate.py's records: read back, not recomputed)."""
    res = evaluate.evaluate(ckpt, ["fewshot"], workers=1, shots=(1, 5), trials=args.trials, clips=args.eval_clips)
    return demo.shot(res["fewshot"], 1)[1]


def noise_bands(noise):
    """Per column, the half-width (points) that 95% of differences between two branch seeds stay within: a
    t quantile over the measured seeds times their SD times sqrt(2) (two independent branches)."""
    rows = list(noise["rows"].values())
    t = stats.t.ppf(0.975, len(rows) - 1)
    return {c: 100 * t * statistics.stdev(r[c] for r in rows) * math.sqrt(2) for c in COLUMNS}


def table(mine, warm, theirs, bands, trials, label, method):
    """The comparison as Markdown: this branch, the warm-up, make demo's branch, the difference and the noise."""
    lines = [
        f"{label} ({method}) beside make demo's warm-up and its {method} branch, in %:\n",
        "| | this branch | warm-up | make demo's | this - make demo's | noise (95%, branch seeds) | |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for c in COLUMNS:
        cells = [f"{100 * r[c]:.1f}" if r and r.get(c) is not None else "-" for r in (mine, warm, theirs)]
        d = 100 * (mine[c] - theirs[c]) if theirs and theirs.get(c) is not None else None
        band = bands.get(c)
        said = "-" if d is None or band is None else "beyond noise" if abs(d) > band else "within noise"
        diff = "-" if d is None else f"{d:+.1f}"
        lines.append(f"| {c} | {' | '.join(cells)} | {diff} | {'-' if band is None else f'±{band:.1f}'} | {said} |")
    lines.append(
        f"\nThe few-shot trials alone move the 1-shot mean by ±{trials:.1f} points (95%, this branch's trials); the "
        "branch-seed noise holds them too. A difference within noise is what another seed alone gives."
    )
    return "\n".join(lines)


def measure_noise(args, method, seeds, out):
    """Branch seeds 0..seeds-1 of the unchanged method: lab/results/rerun_settings/noise.json."""
    rows = {str(s): branch(args, method, [], out / f"{method}_seed{s}", s) for s in range(seeds)}
    keep = {k: {c: r[c] for c in COLUMNS} for k, r in rows.items()}
    made = {"command": f"python -m tools.rerun --measure-noise {seeds}", "method": method, "epochs": args.epochs}
    made |= {"setting": f"{args.data}, seed {SEED}, {FAULTY:.0%} injected, make demo's warm-up", "cpu": cpu_kind()}
    NOISE.write_text(json.dumps(made | {"rows": keep}, indent=1) + "\n")
    print(
        f"tools.rerun: wrote {NOISE} ({seeds} branch seeds): ±"
        + ", ±".join(f"{v:.1f} {c}" for c, v in noise_bands(made | {"rows": keep}).items())
    )


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tools.rerun", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="runs/rerun", help="where the branches go, a folder per set of options")
    p.add_argument("--loss", default="robust", help="the method to branch (one of make demo's --methods)")
    p.add_argument("--branch-seed", type=int, default=0, help="train.py's --seed for the branch (0: make demo's)")
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads (default: all; a make demo branch's share of the cores reproduces its numbers exactly)",
    )
    p.add_argument("--measure-noise", type=int, default=0, metavar="N", help="measure N branch seeds instead")
    ns, rest = p.parse_known_args(argv)
    # demo.py's options (make demo's defaults, its --runs) say which warm-up; the rest, for train.py, is the change
    args = demo.parse_args(["--runs", "runs/make_demo", "--results", "runs/make_demo", *rest])
    if ns.loss not in args.methods:
        p.error(f"--loss {ns.loss}: expected one of make demo's methods {args.methods}")
    if ns.threads:  # make demo trains its branches side by side, each on its share of the cores
        torch.set_num_threads(ns.threads)
    options, out = args.train_args, Path(ns.out)
    if ns.measure_noise:
        return measure_noise(args, ns.loss, ns.measure_noise, out / "noise")
    name = "_".join(a.lstrip("-").replace("/", "-") for a in options) or "unchanged"
    folder = out / f"{ns.loss}_{name}_seed{ns.branch_seed}"
    mine = branch(args, ns.loss, options, folder, ns.branch_seed)
    root = Path(args.runs) / demo.setting_name(SEED, FAULTY)
    warm = demo.evaluate_branch(args, root / "warmup" / "ckpt.pt")
    done = demo.setting_file(args, SEED, FAULTY)
    theirs = json.loads(done.read_text())["rows"].get(ns.loss) if done.is_file() else None
    noise = json.loads(NOISE.read_text()) if NOISE.is_file() else None
    bands = noise_bands(noise) if noise and noise["method"] == ns.loss and noise["epochs"] == args.epochs else {}
    trials = 100 * stats.t.ppf(0.975, args.trials - 1) * trials_sd(args, folder / "ckpt.pt") / math.sqrt(args.trials)
    label = f"{' '.join(options) or 'no change'}, branch seed {ns.branch_seed}"
    text = table(mine, warm, theirs, bands, trials, label, ns.loss)
    if not bands:
        text += (
            f"\n(no noise measured for {ns.loss} at {args.epochs} epochs: `python -m tools.rerun --measure-noise 9`)"
        )
    print(text)
    (folder / "rerun.md").write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
