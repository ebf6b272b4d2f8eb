"""Measurement: Fig. 7's paired differences pooled over the noise levels with injected faults, and
their trend with the level. Reads the finished settings that `python demo.py --figure noisy` keeps.

    python results/fig7_pooled.py [results/noisy_settings]
"""
import json
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from figures import ci95  # noqa: E402

METRICS = ("R@1", "R@5", "1-shot", "5-shot")


def main(folder="results/noisy_settings"):
    rows = [json.loads(p.read_text()) for p in sorted(Path(folder).glob("seed*_faulty*.json"))]
    levels = sorted({r["faulty"] for r in rows if r["faulty"] > 0})
    print(f"{len(rows)} settings; pooled over injected levels {levels} (each pair: same seed, same warm-up)")
    for method in ("weighted", "oracle"):
        for metric in METRICS:
            pairs = [(r["faulty"], 100 * (r["rows"][method][metric] - r["rows"]["xid"][metric]))
                     for r in rows if r["faulty"] > 0]
            x, d = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
            half = ci95(d)
            fit = stats.linregress(100 * x, d)  # points of difference per point of injected share
            print(f"{method:8s} - xid {metric:6s}: {d.mean():+.1f} [{d.mean() - half:+.1f}, {d.mean() + half:+.1f}] "
                  f"over {len(d)} pairs, {int((d > 0).sum())} above 0; slope {10 * fit.slope:+.2f} points per "
                  f"10% injected (p={fit.pvalue:.2f})")


if __name__ == "__main__":
    main(*sys.argv[1:])
