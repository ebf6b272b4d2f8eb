"""The branch-length screen (lab/results/demo_screen/PLAN.md): its runs, and its verdict.

`run E S` is one candidate: the demo at 25% injected with E-epoch branches on seed S. A seed's warm-up is
trained once, by the first length run on it, and copied for the others. demo.py writes the
setting's file to lab/results/demo_screen/E{E}/demo_settings/; its demo.json and demo.md are folded into
lab/results/demo_screen/demos.json and demos.md. `verdict` applies criteria (a) and (b) to each finished
(length, seed) settings file, names the winner, and writes lab/results/demo_screen/RESULTS.md.

    python -m lab.screens.demo_screen run E S
    python -m lab.screens.demo_screen verdict
"""

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from statistics import mean

from lab.screens import merged

HERE = Path("lab/results/demo_screen")
RUNS = Path("runs/demo_screen")
SEEDS = (700, 701, 702)
LENGTHS = (8, 12, 16, 24)
METHODS = ("xid", "weighted", "soft", "robust", "oracle")


def rows(length, seed, faulty=25):
    f = HERE / f"E{length}" / "demo_settings" / f"seed{seed}_faulty{faulty}.json"
    return json.loads(f.read_text())["rows"] if f.exists() else None


def per_seed(r):
    """(a) and the per-seed part of (b) on one seed's rows: {condition: passed}."""
    d = {m: 100 * (r[m]["1-shot"] - r["xid"]["1-shot"]) for m in METHODS[1:]}
    return {
        "(a) Weighted AUROC >= 80": 100 * r["weighted"]["AUROC"] >= 80,
        "(b) Oracle - xID >= 5": d["oracle"] >= 5,
        "(b) Weighted > xID": d["weighted"] > 0,
        "(b) Soft > xID": d["soft"] > 0,
        "(b) Robust > xID": d["robust"] > 0,
    }


def run(e, s):
    """One candidate: length `e`, seed `s`; the warm-up copied from another length's run of the seed."""
    folder = RUNS / f"E{e}" / f"seed{s}_faulty25"
    if not (folder / "warmup" / "ckpt.pt").exists():
        for other in sorted(RUNS.glob(f"E*/seed{s}_faulty25/warmup")):
            if (other / "ckpt.pt").exists():
                folder.mkdir(parents=True, exist_ok=True)
                shutil.copytree(other, folder / "warmup", dirs_exist_ok=True)
                break
    demo = ["demo.py", "--faulty", "0.25", "--epochs", str(e), "--seeds", str(s), "--no-figures"]
    subprocess.run([sys.executable, *demo, "--runs", str(RUNS / f"E{e}"), "--results", str(HERE / f"E{e}")], check=True)
    merged.fold_demo(HERE / f"E{e}", f"E{e}", HERE, "python -m lab.screens.demo_screen run E S")


def verdict():
    """RESULTS.md's text from the committed settings files."""
    lines = ["# The branch-length screen: results (PLAN.md's criteria)", ""]
    lines += [
        "Made by `python -m lab.screens.demo_screen verdict`. Set `data/synth_src2p`, `--preset demo` (width",
        "0.125, 2 frames at 2 fps, batch 32, lr 1e-3), 30-epoch xID warm-up, 25% injected from the held-out",
        "pool, delta -0.674 (Phi^-1(0.25)); each row is `python -m lab.screens.demo_screen run E S`, read",
        "from `E{E}/demo_settings/seed{S}_faulty25.json`. 1-shot and AUROC in %; differences against xID on",
        "the same seed, in points.",
        "",
        "| E | seed | xID 1-shot | Weighted | Soft | Robust | Oracle | Weighted AUROC | (a) | (b) per seed |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|:-:|:-:|",
    ]
    winner, met = None, {}  # met: length -> (b)'s conditions met over the 3 seeds (12 per seed + the order)
    for e in LENGTHS:
        found = {s: rows(e, s) for s in SEEDS}
        for s, r in found.items():
            if r is None:
                lines.append(f"| {e} | {s} | not run | | | | | | | |")
                continue
            ok = per_seed(r)
            d = {m: 100 * (r[m]["1-shot"] - r["xid"]["1-shot"]) for m in METHODS[1:]}
            fails = [k for k, v in ok.items() if not v and k.startswith("(b)")]
            lines.append(
                f"| {e} | {s} | {100 * r['xid']['1-shot']:.1f} | "
                + " | ".join(f"{d[m]:+.1f}" for m in METHODS[1:])
                + f" | {100 * r['weighted']['AUROC']:.1f} | {'pass' if ok['(a) Weighted AUROC >= 80'] else 'FAIL'}"
                + f" | {'pass' if not fails else 'FAIL: ' + ', '.join(f[4:] for f in fails)} |"
            )
        if any(r is None for r in found.values()):
            continue
        robust, weighted, soft = (mean(found[s][m]["1-shot"] for s in SEEDS) for m in ("robust", "weighted", "soft"))
        order = robust > weighted and robust > soft
        every = all(all(per_seed(found[s]).values()) for s in SEEDS)
        lines.append(
            f"| {e} | mean | | | | | | | | Robust {100 * robust:.1f} vs Weighted {100 * weighted:.1f}, "
            f"Soft {100 * soft:.1f}: {'pass' if order else 'FAIL'} |"
        )
        met[e] = sum(v for s in SEEDS for k, v in per_seed(found[s]).items() if k.startswith("(b)")) + order
        if every and order and winner is None:
            winner = e
    lines += ["", f"**Winner by (a) and (b): {f'{winner}-epoch branches' if winner else 'none'}.**"]
    if winner is None and len(met) == len(LENGTHS):  # PLAN.md's fallback: the best by (b), ties to the shorter
        winner = max(LENGTHS, key=lambda e: (met[e], -e))
        counts = ", ".join(f"E{e} {met[e]}" for e in LENGTHS)
        lines += ["", f"Fallback (PLAN.md): (b)'s 13 conditions met: {counts}; adopted: **{winner}-epoch branches**."]
    zero = {s: rows(winner, s, 0) for s in SEEDS} if winner else {}
    if any(zero.values()):
        lines += ["", f"0% injected at E = {winner} (not a criterion; PLAN.md):", ""]
        lines += ["| seed | " + " | ".join(f"{m} 1-shot" for m in METHODS) + " |", "|---:|" + "---:|" * 5]
        for s, r in zero.items():
            if r:
                lines.append(f"| {s} | " + " | ".join(f"{100 * r[m]['1-shot']:.1f}" for m in METHODS) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run", help="one candidate: the demo at 25%% with E-epoch branches on seed S")
    one.add_argument("E", type=int)
    one.add_argument("S", type=int)
    sub.add_parser("verdict", help="criteria (a) and (b) on the committed settings: RESULTS.md")
    args = p.parse_args(argv)
    if args.command == "run":
        run(args.E, args.S)
    else:
        text = verdict()
        (HERE / "RESULTS.md").write_text(text)
        print(text, end="")


if __name__ == "__main__":
    main()
