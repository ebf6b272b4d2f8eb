"""Measurement (issue 31): the shortest xID warm-up that meets items 1-2 of results/warmup/PLAN.md,
read off the logs of longer warm-ups.

The warm-up's learning rate is constant (train.lr_at), so an E-epoch warm-up computes exactly the
first E epochs of a longer one with the same seed, data and machine: its log is the longer log cut
at E. For each length E this reads, per run, when the loss leaves its chance value within those E
epochs (experiments.warmup_probe.leaves_chance) and the bank AUROC of the faulty positives at epoch
E - 1, and judges
  item 1: the loss leaves chance within the first quarter (epoch <= E / 4): the first run (the
          criterion's seed 0), and, reported beside it, every run;
  item 2: the last epoch's AUROC >= --goal on the first run and as the mean over all runs.
Training seconds are the log's (epoch size / clips per second; start-up and preload not counted).

    python -m experiments.warmup_length --out results/warmup64/length \
        results/warmup64/logs/seed{0,1,2,3,4}_faulty50.jsonl --at 25 40 64
    python -m experiments.warmup_length --goal 0.9 --out results/warmup64/length_0pct \
        results/warmup64/logs/seed0_faulty0.jsonl --at 25 40 64
"""
import argparse
import shlex
import sys
from pathlib import Path
from statistics import mean

from experiments.warmup_probe import chance_loss, leaves_chance
from runstate import read_log


def judge(logs, length, chance, goal):
    """Items 1-2 for warm-ups of `length` epochs cut from `logs` (lists of epoch records, the
    criterion's seed 0 first) -> dict, or None where a log is shorter than `length`."""
    if any(len(recs) < length for recs in logs):
        return None
    cut = [recs[:length] for recs in logs]
    left = [leaves_chance(recs, chance) for recs in cut]  # None: still at chance at epoch length - 1
    aurocs = [recs[-1]["faulty_auroc"] for recs in cut]
    early = [x is not None and 4 * x <= length for x in left]
    return {"length": length, "left": left, "auroc": aurocs, "auroc_mean": mean(aurocs),
            "item1": early[0], "item1_all": all(early),
            "item2": aurocs[0] >= goal and mean(aurocs) >= goal}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("logs", nargs="+", help="train.py log.jsonl files of xID warm-ups, the criterion's seed 0 first")
    p.add_argument("--out", required=True, help="writes OUT.md")
    p.add_argument("--at", type=int, nargs="+", default=[25, 40, 64], help="lengths to show in the table")
    p.add_argument("--goal", type=float, default=0.8, help="item 2's AUROC (PLAN.md: 0.8 at 50%%, 0.9 at 0%%)")
    p.add_argument("--num-negatives", type=int, default=256, help="K, for the chance value 2 ln(K + 1)")
    p.add_argument("--videos", type=int, default=2000, help="training videos, for the seconds an epoch takes")
    args = p.parse_args(argv)
    logs = [[r for r in read_log(f) if r.get("stage") == "xid"] for f in args.logs]
    for f, recs in zip(args.logs, logs):
        if [r["epoch"] for r in recs] != list(range(len(recs))):
            raise SystemExit(f"{f}: the xID epochs are not 0, 1, 2, ... in order (a resumed run logged twice?)")
    chance = chance_loss(args.num_negatives)
    verdicts = [v for v in (judge(logs, e, chance, args.goal) for e in range(1, max(map(len, logs)) + 1)) if v]
    smallest = next((v["length"] for v in verdicts if v["item1"] and v["item2"]), None)
    smallest_all = next((v["length"] for v in verdicts if v["item1_all"] and v["item2"]), None)
    names = [Path(f).stem for f in args.logs]
    lines = [f"`python -m experiments.warmup_length {' '.join(shlex.quote(a) for a in (argv or sys.argv[1:]))}`: "
             f"warm-ups of E epochs cut from the logs (constant learning rate: an E-epoch run is the first E "
             f"epochs). 'leaves chance': the first epoch from which the loss stays more than 0.1 below "
             f"{chance:.2f}, '-' if not within E epochs; item 1 asks for <= E / 4 on {names[0]}; item 2 for the "
             f"AUROC at epoch E - 1 >= {args.goal} on {names[0]} and on average.\n",
             "| E | leaves chance at (" + ", ".join(names) + ") | AUROC at E - 1 | mean | item 1 | item 1, every run "
             "| item 2 | training s to E (first run) |", "|---:|---|---|---:|:-:|:-:|:-:|---:|"]
    for v in verdicts:
        if v["length"] in args.at or v["length"] in (smallest, smallest_all):
            seconds = sum(args.videos / r["clips_per_s"] for r in logs[0][:v["length"]])
            lines.append(f"| {v['length']} | " + ", ".join("-" if x is None else str(x) for x in v["left"])
                         + " | " + ", ".join(f"{a:.3f}" for a in v["auroc"]) + f" | {v['auroc_mean']:.3f} | "
                         + " | ".join("yes" if v[k] else "no" for k in ("item1", "item1_all", "item2"))
                         + f" | {seconds:.0f} |")
    lines += ["", f"Smallest E where items 1-2 hold: {smallest or 'none within these logs'}; with item 1 on "
              f"every run: {smallest_all or 'none within these logs'}."]
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
