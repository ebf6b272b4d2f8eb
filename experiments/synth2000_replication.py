"""Measurement: the replication that results/synth2000_rep/PLAN.md wrote down before its runs, of the
larger set's Weighted - xID 5-shot gain on fresh seeds, analysed on the new seeds alone; then the
original and new seeds pooled, as a description. Also the relation of the gain to the warm-up's
bank AUROC (xID branch) on all seeds.

    python -m experiments.synth2000_replication [ORIGINAL_SETTINGS NEW_SETTINGS RUNS]   # defaults: the larger set's
"""
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from experiments.demo import COLUMNS, finished_settings, fmt_diff
from runstate import read_log

METRICS = [c for c in COLUMNS if c != "AUROC"]


def diffs(rows, a, b, metric):
    return np.array([100 * (r["rows"][a][metric] - r["rows"][b][metric]) for r in rows])  # (seeds,) points


def describe(name, rows):
    print(f"\n{name}: {len(rows)} seeds {[r['seed'] for r in rows]}")
    for a in ("weighted", "oracle"):
        for metric in METRICS:
            d = diffs(rows, a, "xid", metric)
            print(f"  {a:8s} - xid {metric:6s}: {fmt_diff(list(d / 100))}, {int((d > 0).sum())} of {len(d)} above 0")


def main(original="results/synth2000/demo_settings", new="results/synth2000_rep/demo_settings", runs="runs/synth2000"):
    old_rows, new_rows = finished_settings(original), finished_settings(new)
    describe("original (the finding)", old_rows)
    describe("replication (new seeds alone: the test)", new_rows)
    d = diffs(new_rows, "weighted", "xid", "5-shot")  # (new seeds,)
    if len(d) >= 2:
        t = stats.ttest_1samp(d, 0.0, alternative="greater")
        verdict = ("inconclusive: fewer than 4 seeds" if len(d) < 4
                   else "replicates" if d.mean() > 0 and t.pvalue < 0.05 else "does not replicate")
        print(f"\nthe pre-registered test: Weighted - xID 5-shot on the new seeds, mean {d.mean():+.1f} points, "
              f"one-sided paired t p = {t.pvalue:.4f} ({len(d)} seeds): {verdict}")
    rows = old_rows + new_rows
    describe("pooled (a description, not the test)", rows)
    # The weights of eq. (6) start from the warm-up's bank: its last logged AUROC, where the runs are
    # still on disk (runs/ is not committed); the xID branch's, from the settings files, always.
    logs = [Path(runs) / f"seed{r['seed']}_faulty50" / "warmup" / "log.jsonl" for r in rows]
    sources = {"xID branch": np.array([100 * r["rows"]["xid"]["AUROC"] for r in rows])}  # (seeds,)
    if all(p.exists() for p in logs):
        sources["warm-up"] = np.array([100 * read_log(p)[-1]["faulty_auroc"] for p in logs])
    for name, auroc in sources.items():
        print(f"  {name} bank AUROC per seed: {' '.join(f'{a:.1f}' for a in auroc)}")
        for metric in ("R@1", "5-shot"):
            for a in ("weighted", "oracle"):
                r, p = stats.pearsonr(auroc, diffs(rows, a, "xid", metric))
                print(f"  {a} - xid {metric} vs the {name}'s bank AUROC: Pearson r {r:.2f}, p {p:.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
