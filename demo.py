"""The demo: the paper's Table robust-distill on the synthetic dataset, where the truth is known.

One xID warm-up, then four branches for equal epochs (xID, Weighted-xID, Soft-xID with CCP
targets, Robust-xID), each evaluated by retrieval, few-shot SVMs, a short fine-tune and the
faulty-positive AUROC of its weights. Writes results/demo.md and the analysis plots.

    make demo                                              # = python demo.py (one seed, 30% injected)
    python demo.py --seeds 0 1 2 --faulty 0 0.3 0.6        # Fig. noisy: mean +- std over seeds

As in the paper (Sec. 5.2), delta is set from the known noise level: the weight function's
midpoint sits at the quantile of the known share of faulty positives (natural + injected).
"""
import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from statistics import NormalDist, mean, pstdev

import data
import evaluate
import train

VARIANTS = (("xID", "xid", False, False), ("Weighted-xID", "weighted", True, False),
            ("Soft-xID", "soft", False, True), ("Robust-xID", "robust", True, True))
COLUMNS = ("R@1", "R@5", "1-shot", "5-shot", "fine-tune", "AUROC")


def ensure_data(root):
    if not (Path(root) / "manifest.csv").exists():
        data.main(["synth", "--out", str(root)])  # the defaults of `python data.py synth`


def faulty_share(cfg):
    """The known share of faulty positives in the training set: ground truth plus injected."""
    return float(train.build_train_set(cfg).faulty.float().mean())


def run_setting(args, seed, faulty):
    """Warm-up and four branches for one seed and injected-fault level; returns {method: metrics}."""
    root = Path(args.runs) / f"seed{seed}_faulty{round(100 * faulty)}"
    common = ["--preset", "demo", "--data", args.data, "--seed", str(seed), "--faulty-fraction", str(faulty),
              "--workers", str(args.workers)] + args.train_args
    warm = train.parse_config(common + ["--out", str(root / "warmup"), "--warmup-epochs", str(args.warmup_epochs),
                                        "--epochs", "0"])
    delta = NormalDist().inv_cdf(faulty_share(warm))
    train.main(warm)
    rows = {}
    for name, loss, _, _ in VARIANTS:
        cfg = train.parse_config(common + ["--out", str(root / loss), "--init", str(root / "warmup" / "ckpt.pt"),
                                           "--warmup-epochs", "0", "--epochs", str(args.epochs), "--loss", loss,
                                           "--delta", f"{delta:.4f}"])
        train.main(cfg)
        ckpt = root / loss / "ckpt.pt"
        res = evaluate.evaluate(ckpt, ["retrieval", "fewshot", "analysis", "finetune"],
                                finetune_epochs=args.finetune_epochs, finetune_lr=args.finetune_lr,
                                trials=args.trials, workers=args.workers, shots=(1, 5))  # the table's columns
        rows[name] = {"R@1": res["retrieval"]["R@1"], "R@5": res["retrieval"]["R@5"],
                      "1-shot": res["fewshot"]["1-shot"][0], "5-shot": res["fewshot"]["5-shot"][0],
                      "fine-tune": res["finetune"]["test_acc"], "AUROC": res["weights"]["faulty_auroc"],
                      "soft_same_class": res["soft_targets_same_class"]}
        print(f"[demo] seed {seed} faulty {faulty:.0%} {name}: " + json.dumps({k: rows[name][k] for k in COLUMNS}))
    return rows, delta, root


def fmt(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    if len(values) == 1:
        return f"{100 * values[0]:.1f}"
    return f"{100 * mean(values):.1f} ± {100 * pstdev(values):.1f}"


def table(results, faulty):
    """Markdown table like the paper's: one row per method, mean +- std over seeds."""
    lines = ["| Method | Weighting | CCP soft targets | " + " | ".join(COLUMNS) + " |",
             "|---|:-:|:-:|" + "---:|" * len(COLUMNS)]
    for name, _, weighted, soft in VARIANTS:
        cells = [fmt([r[faulty][name][c] for r in results]) for c in COLUMNS]
        lines.append(f"| {name} | {'✓' if weighted else '✗'} | {'✓' if soft else '✗'} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="data/synth", help="generated here when missing")
    p.add_argument("--runs", default="runs/demo")
    p.add_argument("--results", default="results")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--faulty", type=float, nargs="+", default=[0.3], help="injected faulty-positive fractions")
    p.add_argument("--warmup-epochs", type=int, default=30)
    p.add_argument("--epochs", type=int, default=6, help="epochs of each branch")
    p.add_argument("--finetune-epochs", type=int, default=2)
    p.add_argument("--finetune-lr", type=float, default=1e-3)
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--fresh", action="store_true", help="delete earlier demo runs first (else they resume)")
    args, args.train_args = p.parse_known_args(argv)  # the rest goes to train.py, e.g. --lr 3e-4
    t0 = time.time()
    if args.fresh:
        shutil.rmtree(args.runs, ignore_errors=True)
    ensure_data(args.data)
    results, deltas = [], {}
    for seed in args.seeds:
        per_level = {}
        for faulty in args.faulty:
            per_level[faulty], deltas[faulty], root = run_setting(args, seed, faulty)
        results.append(per_level)
    minutes = (time.time() - t0) / 60
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    for png in ("scores_weights.png", "per_class_r1.png"):  # plots of the last Robust-xID run
        shutil.copy(root / "robust" / png, out / png)
    command = "python demo.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = ["# Demo results\n", f"`{command.strip()}`: seeds {args.seeds}; warm-up {args.warmup_epochs} epochs "
            f"of xID, then {args.epochs} epochs per branch; fine-tune {args.finetune_epochs} epochs; "
            f"{minutes:.1f} minutes in all. Metrics in %: test videos query the train set (R@k), "
            f"SVMs on n train videos per class (n-shot), fine-tuned top-1, and the AUROC of the weights "
            f"for the ground-truth faulty positives.\n"]
    for faulty in args.faulty:
        text += [f"## {faulty:.0%} injected faulty positives (delta = {deltas[faulty]:.2f})\n", table(results, faulty), ""]
    (out / "demo.md").write_text("\n".join(text) + "\n")
    (out / "demo.json").write_text(json.dumps({"args": vars(args), "minutes": minutes, "results": [
        {str(k): v for k, v in r.items()} for r in results]}, indent=1))
    print("\n".join(text))


if __name__ == "__main__":
    main()
