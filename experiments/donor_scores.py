"""Measurement: the donor effect of `--faulty-source train`, the deviation from Sec. 5.2.

The paper injects "a randomly selected audio that is not part of the training set". Lending the
audio of another training video instead puts that video's (the donor's) sound in a second memory-bank
slot, as a negative of its own video, and xID lowers the donor's score vbar_i . abar_i towards the
faulty ones'. This prints, per checkpoint, the bank scores of the faulty positives (injected and
natural), of the clean donors, of the other clean instances, and the AUROC of each clean group
against the faulty ones (diagnostics.faulty_auroc). Under held-out injection there are no donors.

    python -m experiments.demo --faulty-source train --runs runs/donor --results results/donor --no-figures
    python -m experiments.donor_scores runs/donor/seed0_faulty50/warmup/ckpt.pt runs/demo/seed0_faulty50/warmup/ckpt.pt
"""
import argparse
import sys
from pathlib import Path

import torch

from checkpoint import load_pretrained
from diagnostics import faulty_auroc


def groups(instances):
    """Masks over the bank slots: faulty, clean donors (their file lent its audio), other clean."""
    faulty = instances["faulty"].bool()  # (N,)
    lent = set(instances["replacement_audio"]) - {""}
    donor = torch.tensor([p in lent for p in instances["paths"]]) & ~faulty  # (N,)
    return {"faulty": faulty, "clean donors": donor, "clean, not donors": ~faulty & ~donor, "all clean": ~faulty}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoints", nargs="+")
    args = p.parse_args(argv)
    for path in args.checkpoints:
        cfg, _, bank, instances = load_pretrained(path)
        scores, masks = bank.scores(), groups(instances)  # (N,)
        print(f"\n{path}: --faulty-source {cfg.faulty_source}, {cfg.faulty_fraction:.0%} injected, seed {cfg.seed}\n")
        print("| slots | count | mean score | AUROC against the faulty ones |\n|---|---:|---:|---:|")
        for name, m in masks.items():
            auroc = "" if name == "faulty" else faulty_auroc(scores[m | masks["faulty"]], masks["faulty"][m | masks["faulty"]])
            mean = f"{float(scores[m].mean()):.3f}" if m.any() else "-"
            print(f"| {name} | {int(m.sum())} | {mean} | {'' if auroc in ('', None) else f'{auroc:.3f}'} |")


if __name__ == "__main__":
    main()
