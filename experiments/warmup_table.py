"""Measurement (issue 31): when does a warm-up's bank find the faulty positives, and at what cost? A
table of finished xID warm-ups read from their logs: the per-epoch cells of experiments/warmup_probe.py
at the given epochs, the first epoch whose bank AUROC reaches the goal (by default results/warmup/PLAN.md's;
with --hold it must stay there to the run's end), and the training seconds until then (the sum of
epoch size / clips per second; start-up and preloading are not counted).

    python -m experiments.warmup_table --out results/warmup/larger_set RUN[=LABEL] ... [--at 20 40 60]

RUN is a train.py run folder (log.jsonl, ckpt.pt): its settings come from the checkpoint.
"""
import argparse
import sys
import shlex
import time
from dataclasses import asdict
from pathlib import Path

import torch

from config import Config
from experiments.warmup_probe import chance_loss, leaves_chance
from runstate import read_log


def first_reaching(recs, key, threshold, hold):
    """First epoch with recs[key] >= threshold (and never below it again when hold), or None."""
    for i, r in enumerate(recs):
        if (r.get(key) or 0.0) >= threshold and (not hold or all((s.get(key) or 0.0) >= threshold for s in recs[i:])):
            return r["epoch"]
    return None


def describe(run):
    """The run's settings (Config defaults for keys older checkpoints lack) and its number of videos.
    Read without checkpoint.load_checkpoint, which refuses older formats: only the settings are needed."""
    state = torch.load(Path(run) / "ckpt.pt", map_location="cpu", weights_only=False)
    return Config(**{**asdict(Config()), **state["config"]}), state["bank"]["video"].shape[0]


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("runs", nargs="+", help="run folders, each optionally =LABEL")
    p.add_argument("--out", required=True, help="writes OUT.md")
    p.add_argument("--at", type=int, nargs="+", default=[10, 20, 30, 39])
    p.add_argument("--threshold", type=float, default=None,
                   help="default: results/warmup/PLAN.md's, 0.9 with nothing injected (natural faults), else 0.8")
    p.add_argument("--hold", action="store_true", help="the threshold must hold to the run's end")
    args = p.parse_args(argv)
    lines = [f"`python -m experiments.warmup_table {' '.join(shlex.quote(a) for a in (argv or sys.argv[1:]))}` "
             f"({time.strftime('%Y-%m-%d')}, 2-core CPU). Each cell: xID loss / bank AUROC of the known faulty "
             f"positives / video memories' 1-NN class accuracy / cross-modal class agreement / own-audio retrieval of "
             f"clean instances / of faulty ones. 'AUROC >= goal': the first epoch"
             f"{' from which it holds to the end' if args.hold else ''}, and the training seconds until its end.\n",
             "| run | videos | injected | seed | fps | augment | " + " | ".join(f"epoch {e}" for e in args.at)
             + " | leaves chance at | AUROC >= goal at | training s until then | last epoch: AUROC |",
             "|---|---:|---:|---:|---:|---:|" + "---|" * len(args.at) + "---:|---:|---:|---:|"]
    for spec in args.runs:
        run, _, label = spec.partition("=")
        recs = read_log(Path(run) / "log.jsonl")
        cfg, n_train = describe(run)
        by = {r["epoch"]: r for r in recs}
        cells = ["-" if by.get(e) is None else
                 f"{by[e]['loss']:.2f} / {by[e]['faulty_auroc'] or float('nan'):.2f} / {by[e]['knn_class']:.2f} / "
                 f"{by[e]['xmodal_class']:.2f} / {by[e]['own_audio']:.3f} / {by[e].get('own_audio_faulty', 0):.3f}"
                 for e in args.at]
        goal = args.threshold if args.threshold is not None else (0.9 if cfg.faulty_fraction == 0 else 0.8)
        reach = first_reaching(recs, "faulty_auroc", goal, args.hold)
        seconds = None if reach is None else sum(n_train / r["clips_per_s"] for r in recs if r["epoch"] <= reach)
        left = leaves_chance(recs, chance_loss(cfg.num_negatives))
        lines.append(f"| {label or run} | {n_train} | {cfg.faulty_fraction:.0%} | {cfg.seed} | {cfg.fps:g} | "
                     f"{cfg.augment:g} | " + " | ".join(cells) + f" | {'-' if left is None else left} | "
                     f"{'-' if reach is None else f'{reach} (>= {goal})'} | {'-' if seconds is None else f'{seconds:.0f}'} | "
                     f"{recs[-1]['epoch']}: {recs[-1]['faulty_auroc']:.3f} |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
