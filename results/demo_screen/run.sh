#!/usr/bin/env bash
# One candidate of the branch-length screen (PLAN.md): the demo at 25% injected with E-epoch branches
# on seed S. A seed's warm-up is trained once, by the first length run on it, and copied for the others.
#   bash results/demo_screen/run.sh E S
set -euo pipefail
cd "$(dirname "$0")/../.."
PATH="$PWD/.venv/bin:$PATH"  # the project's venv (make venv)
E=$1 S=$2
run="runs/demo_screen/E$E/seed${S}_faulty25"
if [ ! -e "$run/warmup/ckpt.pt" ]; then
  for other in runs/demo_screen/E*/seed${S}_faulty25/warmup; do
    if [ -e "$other/ckpt.pt" ]; then mkdir -p "$run" && cp -r "$other" "$run/" && break; fi
  done
fi
python -m experiments.demo --faulty 0.25 --epochs "$E" --seeds "$S" --no-figures \
  --runs "runs/demo_screen/E$E" --results "results/demo_screen/E$E"
