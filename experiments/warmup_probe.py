"""Measurement (issue 31): why the xID warm-up learns slowly. One xID warm-up per setting, on the demo
preset and data, one after the other (a quiet machine), each changing one thing against the demo's
own; per epoch the log holds the xID loss, the bank AUROC of the known faulty positives, the video
memories' 1-NN class accuracy, the cross-modal class agreement and the own-audio retrieval
(diagnostics.bank_structure). Writes a table per setting at a few epochs to OUT.md and the curves
to OUT.json; a finished setting is read from its log, so a rerun only adds what is missing.

    python -m experiments.warmup_probe --epochs 40 --out results/warmup/probe [--only NAME ...]

Without --only it runs every setting below, one after the other (about 2.5 minutes each at 40 epochs).
"""
import argparse
import json
import math
import shlex
import os
import subprocess
import sys
import time
from pathlib import Path

from config import parse_config
from experiments import demo
from runstate import read_log

ROOT = Path(__file__).resolve().parents[1]

# name: (injected share, train.py options that differ from the demo preset's)
SETTINGS = {
    "demo 0%": (0.0, []),
    "demo 50%": (0.5, []),
    "lr 3e-4": (0.5, ["--lr", "3e-4"]),
    "fps 4 (4 frames = 1 s)": (0.5, ["--fps", "4"]),
    "fps 8 (4 frames = 0.5 s)": (0.5, ["--fps", "8"]),
    "fps 4, 0%": (0.0, ["--fps", "4"]),
    "width 0.5": (0.5, ["--width", "0.5"]),
    "batch 16": (0.5, ["--batch-size", "16"]),
    "batch 64, lr 2e-3": (0.5, ["--batch-size", "64", "--lr", "2e-3"]),
    "generator noise 0.1": (0.5, ["--data", "data/synth_noise01"]),
    "generator noise 0.1, 0%": (0.0, ["--data", "data/synth_noise01"]),
    "2000 videos": (0.5, ["--data", "data/synth2000"]),
    "2000 videos, fps 4": (0.5, ["--data", "data/synth2000", "--fps", "4"]),
    "EMA 0 (diagnostic: the paper fixes 0.5)": (0.5, ["--momentum", "0"]),
    "K 64 (diagnostic: chance 8.35)": (0.5, ["--num-negatives", "64"]),
    "lr 3e-4, 0%": (0.0, ["--lr", "3e-4"]),
    "lr 1e-4": (0.5, ["--lr", "1e-4"]),
    "lr 3e-4, fps 4": (0.5, ["--lr", "3e-4", "--fps", "4"]),
    "lr 3e-4, fps 4, 0%": (0.0, ["--lr", "3e-4", "--fps", "4"]),
    "augment 0 (flips only)": (0.5, ["--augment", "0"]),
    "augment 0.5": (0.5, ["--augment", "0.5"]),
    "fps 4, augment 0": (0.5, ["--fps", "4", "--augment", "0"]),
    "fps 4, augment 0, 0%": (0.0, ["--fps", "4", "--augment", "0"]),
    "fps 4, augment 0.5": (0.5, ["--fps", "4", "--augment", "0.5"]),
}
# The demo preset as it was when these probes ran (the preset has since moved to what they found):
# the settings below change one thing against this.
BASE = ["--data", "data/synth", "--fps", "16", "--augment", "1"]


def chance_loss(k):
    return 2 * math.log(k + 1)


def run(name, faulty, options, epochs, runs):
    out = runs / name.split(" (")[0].replace(" ", "_").replace(",", "").replace("%", "pct")
    log = out / "log.jsonl"
    options = BASE + options  # later options win
    demo.ensure_data(ROOT / parse_config(["--preset", "demo", *options]).data)  # with demo.SYNTH_SETS' options
    if log.exists() and len(log.read_text().splitlines()) >= epochs:
        return out
    cmd = [sys.executable, str(ROOT / "train.py"), "--preset", "demo", "--warmup-epochs", str(epochs), "--epochs", "0",
           "--faulty-fraction", str(faulty), "--out", str(out), *options]
    t0 = time.time()
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"{name}: {' '.join(cmd)} failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    print(f"[probe] {name}: {time.time() - t0:.0f} s", flush=True)
    return out


def leaves_chance(records, chance, margin=0.1):
    """The first epoch from which the loss stays more than `margin` below its chance value."""
    for i in range(len(records)):
        if all(r["loss"] < chance - margin for r in records[i:]):
            return records[i]["epoch"]
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--out", default="results/warmup/probe")
    p.add_argument("--runs", default="runs/warmup_probe")
    p.add_argument("--only", nargs="+", default=list(SETTINGS))
    args = p.parse_args()
    runs, curves = Path(args.runs), {}
    for name in args.only:
        faulty, options = SETTINGS[name]
        out = run(name, faulty, options, args.epochs, runs)
        curves[name] = read_log(out / "log.jsonl")
    chance = chance_loss(256)

    def chance_of(name):
        options = SETTINGS[name][1]
        return chance_loss(int(options[options.index("--num-negatives") + 1])) if "--num-negatives" in options else chance
    at = sorted({e for e in (3, args.epochs // 4, args.epochs // 2, 3 * args.epochs // 4, args.epochs - 1)})
    lines = [f"# Why the warm-up learns slowly: one change at a time\n",
             f"`python -m experiments.warmup_probe {' '.join(shlex.quote(a) for a in sys.argv[1:])}` "
             f"({time.strftime('%Y-%m-%d')}, 2-core CPU). "
             f"Demo preset (500 videos, 4 frames at 16 fps, 64x64, width 0.25, batch 32, lr 1e-3, K 256, EMA 0.5), "
             f"seed 0, {args.epochs} epochs of xID. Each cell: xID loss (chance {chance:.2f}) / bank AUROC of the "
             f"known faulty positives / video memories' 1-NN class accuracy (chance 0.10) / cross-modal class "
             f"agreement of the 5 nearest audio memories (chance 0.10) / own-audio retrieval of clean instances "
             f"(chance 0.002).\n",
             "| setting | injected | " + " | ".join(f"epoch {e}" for e in at) + " | leaves chance at | clips/s |",
             "|---|---:|" + "---|" * len(at) + "---:|---:|"]
    for name, recs in curves.items():
        by = {r["epoch"]: r for r in recs}
        cells = []
        for e in at:
            r = by.get(e)
            cells.append("-" if r is None else f"{r['loss']:.2f} / {r['faulty_auroc'] or float('nan'):.2f} / "
                         f"{r['knn_class']:.2f} / {r['xmodal_class']:.2f} / {r['own_audio']:.3f}")
        left = leaves_chance(recs, chance_of(name))
        speed = sum(r["clips_per_s"] for r in recs) / len(recs)
        lines.append(f"| {name} | {SETTINGS[name][0]:.0%} | " + " | ".join(cells)
                     + f" | {'-' if left is None else left} | {speed:.0f} |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    Path(args.out + ".json").write_text(json.dumps(curves))
    print("\n".join(lines))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
