"""Measurement: Fig. 7's paired differences pooled over the noise levels with injected faults, and
their trend with the level; per level, Weighted - Oracle and xID's bank-score AUROC. Reads the finished settings that `python -m experiments.demo --figure noisy` keeps.

    python -m experiments.fig7_pooled [results/noisy_settings]
"""
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from experiments.demo import COLUMNS, finished_settings, fmt_diff

METRICS = [c for c in COLUMNS if c != "AUROC"]


def main(folder="results/noisy_settings"):
    rows = finished_settings(folder)
    injected = [r for r in rows if r["faulty"] > 0]  # at 0% Oracle-xID is xID: no pair to pool
    x = np.array([r["faulty"] for r in injected])  # (pairs,)
    print(f"{len(rows)} settings; pooled over injected levels {sorted(set(x.tolist()))} "
          f"(each pair: same seed, same warm-up)")
    for method in ("weighted", "oracle"):
        for metric in METRICS:
            d = np.array([r["rows"][method][metric] - r["rows"]["xid"][metric] for r in injected])  # (pairs,)
            fit = stats.linregress(100 * x, 100 * d)  # points of difference per point of injected share
            print(f"{method:8s} - xid {metric:6s}: {fmt_diff(list(d))} over {len(d)} pairs, {int((d > 0).sum())} "
                  f"above 0; slope {10 * fit.slope:+.2f} points per 10% injected (p={fit.pvalue:.2f})")

    # The paper's "Weighted beats the oracle at low noise": the oracle zeroes only the injected positives,
    # the weights may also catch the data's own; and the bank scores' AUROC that the weights rest on.
    for level in sorted({r["faulty"] for r in rows}):
        at = [r for r in rows if r["faulty"] == level]
        diffs = {m: fmt_diff([r["rows"]["weighted"][m] - r["rows"]["oracle"][m] for r in at]) for m in METRICS}
        auroc = np.mean([r["rows"]["xid"]["AUROC"] for r in at])
        print(f"{level:.0%}: weighted - oracle " + ", ".join(f"{m} {d}" for m, d in diffs.items())
              + f" ({len(at)} seeds); xID bank-score AUROC {100 * auroc:.1f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
