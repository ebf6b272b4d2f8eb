#!/usr/bin/env bash
# Criterion (a) for one candidate and seed (PLAN.md): its set made if missing, the 50% warm-up trained
# (resumed if it exists), and results/faults_screen/a/C_seedS.json written from the run's log.
#   OMP_NUM_THREADS=1 bash results/faults_screen/run_a.sh C S DATA [train.py options]
set -euo pipefail
cd "$(dirname "$0")/../.."
PATH="$PWD/.venv/bin:$PATH"  # the project's venv (make venv)
C=$1 S=$2 DATA=$3; shift 3
python -c "import sys; from experiments.sets import ensure_data; ensure_data(sys.argv[1])" "$DATA"
python train.py --preset demo --data "$DATA" --faulty-fraction 0.5 --warmup-epochs 30 --epochs 0 --seed "$S" "$@" \
  --out "runs/faults_screen/$C/seed$S"
python - "$C" "$S" "$DATA" "$*" <<'PY'
import json, sys
import torch
c, s, data, options = sys.argv[1:]
log = [json.loads(line) for line in open(f"runs/faults_screen/{c}/seed{s}/log.jsonl")]
log = [r for r in log if "faulty_auroc" in r]
last = log[-1]
cfg = torch.load(f"runs/faults_screen/{c}/seed{s}/ckpt.pt", map_location="cpu", weights_only=False)["config"]
out = dict(candidate=c, seed=int(s), options=options, set=data, faulty_fraction=cfg["faulty_fraction"], epochs=last["epoch"] + 1,
           faulty_auroc=last["faulty_auroc"], auroc_by_epoch=[r["faulty_auroc"] for r in log],
           knn_class=last["knn_class"], xmodal_class=last["xmodal_class"], own_audio=last.get("own_audio"),
           loss=last["loss"])
json.dump(out, open(f"results/faults_screen/a/{c}_seed{s}.json", "w"), indent=1)
print(f"{c} seed {s}: AUROC {out['faulty_auroc']:.3f} after {out['epochs']} epochs")
PY
