"""Criterion (a) of the faults screen (lab/results/faults_screen/PLAN.md) for one candidate and seed: its set
made if missing, the 50% warm-up trained (resumed if it exists), and the entry C_seedS of
lab/results/faults_screen/a.json written from the run's log (the warm-up's last-epoch bank AUROC of the injected
faults, its series, and the memories' class figures).

    OMP_NUM_THREADS=1 python -m lab.screens.faults_screen C S DATA [train.py options]
    OMP_NUM_THREADS=1 python -m lab.screens.faults_screen L3 600 data/synth_src2p --lr 3e-3 --lr-min 3e-4
"""

import json
import sys
from pathlib import Path

import torch

from config import parse_config
from lab.screens import help_asked, merged
from tools.bank_report import BankReport
from tools.synthetic import ensure as ensure_data
from train import main as train_main

RECORD = Path("lab/results/faults_screen/a.json")
COMMAND = "python -m lab.screens.faults_screen C S DATA [train.py options] (adds or replaces C_seedS)"


def train(c, s, data, options):
    """The candidate's warm-up: `--preset demo` at 50% injected, 30 epochs unless its options say more."""
    ensure_data(data)
    warmup = ["--preset", "demo", "--data", data, "--faulty-fraction", "0.5", "--warmup-epochs", "30", "--epochs", "0"]
    out = ["--out", f"runs/faults_screen/{c}/seed{s}"]
    cfg = parse_config([*warmup, "--seed", str(s), *options, *out])
    train_main(cfg, report=BankReport(cfg))  # the memories' class figures are the demo's report's


def record(c, s, data, options, runs="runs/faults_screen"):
    """The entry of a finished warm-up, read from its log and checkpoint."""
    folder = Path(runs) / c / f"seed{s}"
    log = [json.loads(line) for line in open(folder / "log.jsonl")]
    log = [r for r in log if "faulty_auroc" in r]  # the epochs that measured the faults
    last = log[-1]
    cfg = torch.load(folder / "ckpt.pt", map_location="cpu", weights_only=False)["config"]
    return dict(
        candidate=c,
        seed=int(s),
        options=" ".join(options),
        set=data,
        faulty_fraction=cfg["faulty_fraction"],
        epochs=last["epoch"] + 1,
        faulty_auroc=last["faulty_auroc"],
        auroc_by_epoch=[r["faulty_auroc"] for r in log],
        knn_class=last["knn_class"],
        xmodal_class=last["xmodal_class"],
        own_audio=last.get("own_audio"),
        loss=last["loss"],
    )


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3:
        raise SystemExit(__doc__)
    (c, s, data), options = argv[:3], argv[3:]
    train(c, s, data, options)
    out = record(c, s, data, options)
    merged.put(RECORD, f"{c}_seed{s}", out, COMMAND)
    print(f"{c} seed {s}: AUROC {out['faulty_auroc']:.3f} after {out['epochs']} epochs")


if __name__ == "__main__":
    help_asked(__doc__)
    main()
