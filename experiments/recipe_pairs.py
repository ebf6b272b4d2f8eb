"""Measurement: one demo setting under two recipes (e.g. fp32 and bf16 autocast), paired by seed:
B - A for each method's metrics and for each method's gain over xID, with 95% intervals; with the
two run folders, also the warm-up's last-epoch bank AUROC and where its loss leaves chance.

    python -m experiments.recipe_pairs results/demo2000/demo_settings results/demo2000/bf16/demo_settings \
        --runs runs/demo2000 runs/demo2000_bf16
"""
import argparse
from pathlib import Path

import numpy as np

from experiments.demo import COLUMNS, finished_settings, fmt_diff
from experiments.warmup_probe import chance_loss, leaves_chance
from runstate import read_log


def paired(a_folder, b_folder):
    """{seed: (row A, row B)} for the (seed, level) settings both folders finished."""
    a = {(r["seed"], r["faulty"]): r for r in finished_settings(a_folder)}
    b = {(r["seed"], r["faulty"]): r for r in finished_settings(b_folder)}
    return {k: (a[k], b[k]) for k in sorted(set(a) & set(b))}


def warmup_log(runs, seed, faulty):
    path = Path(runs) / f"seed{seed}_faulty{round(100 * faulty)}" / "warmup" / "log.jsonl"
    return read_log(path) if path.exists() else None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a", help="settings folder of recipe A (the reference)")
    p.add_argument("b", help="settings folder of recipe B")
    p.add_argument("--runs", nargs=2, metavar=("RUNS_A", "RUNS_B"), help="their demo.py --runs folders")
    p.add_argument("--num-negatives", type=int, default=256, help="K of the warm-ups (the demo preset's 256)")
    args = p.parse_args(argv)
    pairs = paired(args.a, args.b)
    print(f"{len(pairs)} paired settings {sorted(pairs)}: B - A, mean [95% interval] in points")
    methods = [m for m in next(iter(pairs.values()))[0]["rows"] if all(m in b["rows"] for _, b in pairs.values())]
    for m in methods:
        for c in COLUMNS:
            d = [b["rows"][m][c] - a["rows"][m][c] for a, b in pairs.values()]  # (seeds,)
            print(f"{m:9s} {c:6s}: A {100 * np.mean([a['rows'][m][c] for a, _ in pairs.values()]):5.1f}  "
                  f"B {100 * np.mean([b['rows'][m][c] for _, b in pairs.values()]):5.1f}  B - A {fmt_diff(d)}")
    for m in methods[1:]:  # each method's gain over the first (xID), B's gain minus A's
        for c in COLUMNS:
            gain = {k: [r["rows"][m][c] - r["rows"][methods[0]][c] for r in ab] for k, ab in pairs.items()}
            print(f"{m} - {methods[0]} {c:6s}: A {fmt_diff([g[0] for g in gain.values()])}  "
                  f"B {fmt_diff([g[1] for g in gain.values()])}  B - A {fmt_diff([g[1] - g[0] for g in gain.values()])}")
    for c in COLUMNS:
        for side, i in (("A", 0), ("B", 1)):
            v = 100 * np.array([ab[i]["rows"][methods[0]][c] for ab in pairs.values()])  # (seeds,)
            print(f"{methods[0]} {c} over seeds, {side}: mean {v.mean():.1f}, std {v.std(ddof=1):.1f} "
                  f"(n - 1; demo.md's ± is the n one, {v.std():.1f})")
    if args.runs:
        for side, runs in zip("AB", args.runs):
            logs = {k: warmup_log(runs, *k) for k in pairs}
            if any(v is None for v in logs.values()):
                print(f"{side}: warm-up logs missing under {runs}")
                continue
            last = [recs[-1]["faulty_auroc"] for recs in logs.values()]
            chance = [leaves_chance(recs, chance_loss(args.num_negatives)) for recs in logs.values()]
            print(f"warm-up {side}: last-epoch bank AUROC {np.round(last, 3).tolist()} (mean {np.mean(last):.3f}); "
                  f"loss leaves chance at epochs {chance}")


if __name__ == "__main__":
    main()
