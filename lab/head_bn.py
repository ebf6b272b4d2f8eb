"""Why the projection head ends in BatchNorm (model.projection_head, a named deviation): make demo's xID
warm-up trained twice from one seed, with the head as it is and with its final BatchNorm1d left out (the
head AVID-CMA and SimCLR v1 use: Linear-BN-ReLU-Linear), and each epoch's bank statistics side by side.

    python -m lab.head_bn [--epochs 5] [--seed 0]     # about 3 min per arm on 2 cores; prints a markdown table

The xID gradient, eqs. (3)-(4), has no component along the mean of the targets, so
without the final BatchNorm nothing removes an offset shared by every embedding: the bank scores vbar_i .
abar_i (mu) drift negative, the two modalities settle in opposite caps of the sphere, and the bank ranks
neither classes nor faults. lab/results/HISTORY.md holds the table this printed.
"""

import argparse
import json
import tempfile
from pathlib import Path

from torch import nn

import model
import train
from config import parse_config
from tools.bank_report import BankReport

HEAD = model.projection_head  # the head as it is


def without_final_bn(in_dim: int, out_dim: int = 128) -> nn.Sequential:
    """model.projection_head less its last layer."""
    return nn.Sequential(*list(HEAD(in_dim, out_dim))[:-1])


def warm_up(out, epochs, seed, head=None):
    """make demo's warm-up (--preset demo, xID) for `epochs` epochs into `out`; its log's rows."""
    model.projection_head = head or HEAD
    try:
        argv = ["--preset", "demo", "--data", "data/synth_src2p", "--out", str(out), "--loss", "xid"]
        cfg = parse_config(argv + ["--warmup-epochs", str(epochs), "--epochs", "0", "--seed", str(seed)])
        train.main(cfg, report=BankReport(cfg))  # knn_class: the demo's report
    finally:
        model.projection_head = HEAD
    return [json.loads(line) for line in (Path(out) / "log.jsonl").read_text().splitlines()]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        arms = {"as it is": warm_up(Path(tmp) / "bn", a.epochs, a.seed)}
        arms["final BatchNorm left out"] = warm_up(Path(tmp) / "nobn", a.epochs, a.seed, without_final_bn)
    print(
        f"make demo's xID warm-up, `--preset demo` on data/synth_src2p, seed {a.seed}; per epoch: bank score mean "
        "mu and SD sigma, the bank's 1-NN class agreement (knn_class), the bank AUROC of the known faults"
    )
    print("\n| head | epoch | loss | mu | sigma | knn_class | faulty AUROC |\n|---|---:|---:|---:|---:|---:|---:|")
    for name, rows in arms.items():
        for r in rows:
            print(
                f"| {name} | {r['epoch']} | {r['loss']:.3f} | {r['mu']:+.3f} | {r['sigma']:.3f} | "
                f"{r['knn_class']:.3f} | {r['faulty_auroc']:.3f} |"
            )


if __name__ == "__main__":
    main()
