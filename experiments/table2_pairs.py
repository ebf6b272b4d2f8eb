"""Measurement: the paired comparisons Table 2's claims need (Robust >= Soft >= xID, oracle targets
>> xID), and how good the CCP targets are, from the finished settings that the Table 2 command keeps
(README, "Experiments"). demo.md pairs every method with xID only; Robust vs Soft needs its own pairs.

    python -m experiments.table2_pairs [results/table2/demo_settings]
"""
import sys
from pathlib import Path

import numpy as np

from experiments.demo import COLUMNS, finished_settings, fmt_diff

METRICS = [c for c in COLUMNS if c != "AUROC"]
PAIRS = (("weighted", "xid"), ("soft", "xid"), ("robust", "xid"), ("robust", "soft"), ("robust", "weighted"),
         ("soft:oracle", "xid"), ("soft:oracle", "soft"))


def main(folder="results/table2/demo_settings"):
    rows = finished_settings(folder)
    print(f"{len(rows)} settings (seeds {[r['seed'] for r in rows]}); each pair: same seed, same warm-up")
    for a, b in PAIRS:
        for metric in METRICS:
            d = [r["rows"][a][metric] - r["rows"][b][metric] for r in rows]  # one paired difference per seed
            print(f"{a:11s} - {b:8s} {metric:6s}: {fmt_diff(d)}, {sum(x > 0 for x in d)} of {len(d)} above 0")
    # Soft targets' quality after the warm-up: the share of their mass on same-class instances (Table 1's
    # question). Measured on the xID branch's bank, so it is what Soft/Robust-xID start from.
    for strategy in ("chance", "bootstrap", "swapped", "neighbor", "ccp", "oracle"):
        mass = np.array([100 * r["rows"]["xid"]["soft_same_class"][strategy] for r in rows])  # (seeds,)
        print(f"same-class mass of {strategy:9s} targets: {mass.mean():5.1f} ± {mass.std(ddof=1):.1f}%")


if __name__ == "__main__":
    main(*sys.argv[1:])
