#!/usr/bin/env bash
# F3b's branches (PLAN.md, amendment of 2026-11-28): for each seed, warm-ups of 30, 60 and 120 epochs at
# 50% injected, then an xID and a Weighted-xID branch of 24 epochs from each. Resumes: rerun it.
#   OMP_NUM_THREADS=1 nice -n 19 bash results/f3b_warmup/branches.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PATH="$PWD/.venv/bin:$PATH"  # the project's venv (make venv)
WARM="--preset demo --data data/synth_src2p --faulty-fraction 0.5 --epochs 0"
for S in ${SEEDS:-600 601 602}; do
  run=seed${S}_faulty50
  w30=runs/f3b/W30/$run/warmup w60=runs/f3b/W60/$run/warmup w120=runs/f3b/W120/$run/warmup
  python train.py $WARM --warmup-epochs 30 --seed "$S" --out "$w30"
  if [ ! -e "$w60/ckpt.pt" ]; then mkdir -p "$w60" && cp "$w30"/ckpt.pt "$w30"/log.jsonl "$w60"/; fi
  python train.py $WARM --warmup-epochs 60 --seed "$S" --out "$w60" --allow-config-change
  if [ ! -e "$w120/ckpt.pt" ]; then  # the study's 120-epoch warm-up (runs/faults_screen/base), or retrained
    mkdir -p "$w120"
    if [ -e runs/faults_screen/base/seed$S/ckpt.pt ]; then cp runs/faults_screen/base/seed$S/{ckpt.pt,log.jsonl} "$w120"/
    else cp "$w60"/ckpt.pt "$w60"/log.jsonl "$w120"/; fi
  fi
  python train.py $WARM --warmup-epochs 120 --seed "$S" --out "$w120" --allow-config-change
  for W in 30 60 120; do
    python -m experiments.demo --runs runs/f3b/W$W --results runs/f3b/W$W --warmup-epochs $W --epochs 24 \
      --methods xid weighted --seeds "$S" --faulty 0.5 --trials 50 --eval-clips 2 --no-figures --branch-jobs 1
  done
done
# the committed record: results/f3b_warmup/branches.json (every finished seed and W; rerun to refresh)
python - <<'PY'
import json, pathlib
out = {}
for W in (30, 60, 120):
    for f in sorted(pathlib.Path(f"runs/f3b/W{W}/demo_settings").glob("seed*_faulty50.json")):
        d = json.loads(f.read_text())
        log = [json.loads(x) for x in open(f"runs/f3b/W{W}/seed{d['seed']}_faulty50/warmup/log.jsonl")]
        warm = [r for r in log if "faulty_auroc" in r and r["epoch"] == W - 1][-1]
        rows = {m: {k: d["rows"][m][k] for k in ("R@1", "R@5", "1-shot", "5-shot", "AUROC")} for m in ("xid", "weighted")}
        out[f"seed{d['seed']}_W{W}"] = dict(seed=d["seed"], warmup_epochs=W, warmup_auroc=warm["faulty_auroc"], **rows)
pathlib.Path("results/f3b_warmup/branches.json").write_text(json.dumps(
    {"set": "data/synth_src2p", "recipe": "--preset demo --faulty-fraction 0.5; branches 24 epochs, 50 trials, 2 eval clips",
     "runs": out}, indent=1) + "\n")
print(f"results/f3b_warmup/branches.json: {len(out)} (seed, W) pairs")
PY
