"""Few-shot trials one by one vs over processes, on a trained branch's cached features (BENCHMARKS.md,
"Evaluation"): 1/5 shots x 50 trials as demo.py evaluates; the parallel call twice, to time starting
the worker processes and finding them running.

    python -m experiments.fewshot_timing runs/demo/seed0_faulty50/xid [JOBS]
"""
import glob
import sys
import time
import warnings

import torch

import fewshot

warnings.filterwarnings("ignore")  # liblinear's ConvergenceWarning, as in the demo's own evaluations
run, jobs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2
feats = {s: torch.load(sorted(glob.glob(f"{run}/features_{s}_*.pt"))[-1], weights_only=False) for s in ("train", "test")}
args = (feats["train"]["pooled"], feats["train"]["labels"], feats["test"]["pooled"], feats["test"]["labels"])
fewshot.svm_trial(*(t.numpy() for t in args), 1, 0)  # untimed: imports scikit-learn
results = []
for j, when in ((1, ""), (jobs, ", starting processes"), (jobs, ", processes running"), (1, "")):
    t0 = time.perf_counter()
    results.append(fewshot.few_shot(*args, shots=(1, 5), trials=50, jobs=j))
    print(f"{j} job(s){when}: {time.perf_counter() - t0:.2f} s, same numbers: {results[-1] == results[0]}")
