"""F3b's branches (lab/results/f3b_warmup/PLAN.md, amendment of 2026-11-28): for each seed, warm-ups of 30, 60
and 120 epochs at 50% injected, then an xID and a Weighted-xID branch of 24 epochs from each; then the
committed record, lab/results/f3b_warmup/branches.json (every finished seed and W). Resumes: rerun it.

    OMP_NUM_THREADS=1 nice -n 19 python -m lab.screens.f3b_warmup            # seeds 600 601 602
    OMP_NUM_THREADS=1 nice -n 19 python -m lab.screens.f3b_warmup --seeds 600
"""

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

RESULT = Path("lab/results/f3b_warmup/branches.json")
WARM = ["--preset", "demo", "--data", "data/synth_src2p", "--faulty-fraction", "0.5", "--epochs", "0"]
LENGTHS = (30, 60, 120)


def python(*args):
    subprocess.run([sys.executable, *map(str, args)], check=True)


def copy_run(src, dest):
    """A warm-up's checkpoint and log, to be resumed to a longer warm-up."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("ckpt.pt", "log.jsonl"):
        shutil.copy(src / name, dest / name)


def warmups(s):
    """The seed's 30-epoch warm-up, resumed to 60, and the 120-epoch one (the faults screen's, if there)."""
    run = f"seed{s}_faulty50"
    w30, w60, w120 = (Path(f"runs/f3b/W{w}/{run}/warmup") for w in LENGTHS)
    python("train.py", *WARM, "--warmup-epochs", 30, "--seed", s, "--out", w30)
    if not (w60 / "ckpt.pt").exists():
        copy_run(w30, w60)
    python("train.py", *WARM, "--warmup-epochs", 60, "--seed", s, "--out", w60, "--allow-config-change")
    if not (w120 / "ckpt.pt").exists():  # the study's 120-epoch warm-up (runs/faults_screen/base), or retrained
        study = Path(f"runs/faults_screen/base/seed{s}")
        copy_run(study if (study / "ckpt.pt").exists() else w60, w120)
    python("train.py", *WARM, "--warmup-epochs", 120, "--seed", s, "--out", w120, "--allow-config-change")


def branches(s):
    """An xID and a Weighted-xID branch of 24 epochs from each warm-up, evaluated as the claims are."""
    evaluation = ["--trials", 50, "--eval-clips", 2, "--no-figures", "--branch-jobs", 1]
    for w in LENGTHS:
        where = ["--runs", f"runs/f3b/W{w}", "--results", f"runs/f3b/W{w}", "--warmup-epochs", w, "--epochs", 24]
        what = ["--methods", "xid", "weighted", "--seeds", s, "--faulty", 0.5]
        python("demo.py", *where, *what, *evaluation)


def record():
    """branches.json: per finished (seed, W), the warm-up's AUROC and both branches' rows."""
    out = {}
    for w in LENGTHS:
        for f in sorted(Path(f"runs/f3b/W{w}/demo_settings").glob("seed*_faulty50.json")):
            d = json.loads(f.read_text())
            log = [json.loads(x) for x in open(f"runs/f3b/W{w}/seed{d['seed']}_faulty50/warmup/log.jsonl")]
            warm = [r for r in log if "faulty_auroc" in r and r["epoch"] == w - 1][-1]
            metrics = ("R@1", "R@5", "1-shot", "5-shot", "AUROC")
            rows = {m: {k: d["rows"][m][k] for k in metrics} for m in ("xid", "weighted")}
            out[f"seed{d['seed']}_W{w}"] = dict(
                seed=d["seed"], warmup_epochs=w, warmup_auroc=warm["faulty_auroc"], **rows
            )
    made = {
        "made_by": "python -m lab.screens.f3b_warmup",
        "set": "data/synth_src2p",
        "recipe": "--preset demo --faulty-fraction 0.5; branches 24 epochs, 50 trials, 2 eval clips",
        "runs": out,
    }
    RESULT.write_text(json.dumps(made, indent=1) + "\n")
    print(f"{RESULT}: {len(out)} (seed, W) pairs")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[600, 601, 602])
    args = p.parse_args(argv)
    for s in args.seeds:
        warmups(s)
        branches(s)
    record()


if __name__ == "__main__":
    main()
