"""The weak-bank reproduction, collected (lab/results/ccp_drift/PLAN.md): per seed and branch, the 1-shot and
the per-epoch drift series from each branch's log (CCP's same-class share, the bank's cross-modal class
agreement, the faults' AUROC, the label-free agreement of tools/bank_report.py) and whether train.py's warning
rule fires on it. It keeps each finished setting's series in lab/results/ccp_drift/epochs.json (the runs/
folder is not kept), folds the demo.json and demo.md that PLAN.md's demo.py commands leave in
lab/results/ccp_drift/NAME/ into demos.json and demos.md, and writes lab/results/ccp_drift/RESULTS.md.

    python -m lab.screens.ccp_drift W8 W16 W8G:W8   # the settings' names, as in PLAN.md
                                                    # (NAME:BASE: xID's row from BASE, same seed)
"""

import json
import sys
from pathlib import Path

from lab.screens import help_asked, merged
from tools.bank_report import drift_warning

HERE = Path("lab/results/ccp_drift")
COMMAND = "python -m lab.screens.ccp_drift W8 W16 W8G:W8"
EPOCHS_NOTE = (
    "Per setting and seed (NAME/seedS), the per-epoch drift series of each branch (the warm-up's last epoch, "
    "then each branch epoch) and the first epoch train.py's warning fired; until commit a110d62 each was "
    "NAME/seedS_epochs.json."
)
FIELDS = {"ccp same-class": lambda r: r["soft_share"]["ccp"], "xmodal class": lambda r: r["xmodal_class"]}
FIELDS |= {"AUROC": lambda r: r["faulty_auroc"], "agreement": lambda r: r.get("agreement")}


def collect(name, runs="runs/ccp_drift", here=HERE):
    """{seed: {"rows": the setting's rows, "series": {branch: {field: [per epoch]}}, "warned": {branch: epoch}}}"""
    out = {}
    for done in sorted((here / name / "demo_settings").glob("seed*_faulty*.json")):
        saved = json.loads(done.read_text())
        seed, key = saved["seed"], f"{name}/seed{saved['seed']}"
        folder = Path(runs) / name / done.stem
        if folder.is_dir():
            series, warned = {}, {}
            for branch in saved["rows"]:
                log = [json.loads(line) for line in open(folder / branch / "log.jsonl")]
                warm = [json.loads(line) for line in open(folder / "warmup" / "log.jsonl")][-1]
                series[branch] = {k: [f(warm)] + [f(r) for r in log] for k, f in FIELDS.items()}
                fired = [r["epoch"] for k, r in enumerate(log) if drift_warning(log[: k + 1])]
                warned[branch] = fired[0] if fired else None
            merged.put(here / "epochs.json", key, {"series": series, "warned": warned}, COMMAND, EPOCHS_NOTE)
        got = merged.entries(here / "epochs.json").get(key, {"series": {}, "warned": {}})
        out[seed] = {"rows": saved["rows"], **got}
    return out


def fmt(xs):
    return " ".join("-" if x is None else f"{x:.2f}" for x in xs)


def report(names, here=HERE, runs="runs/ccp_drift"):
    """RESULTS.md's text from the settings `names` (NAME or NAME:BASE); the series of a setting whose runs
    are under `runs` are read there (and kept), the others from epochs.json."""
    lines = ["# Soft targets from a weak bank: results (PLAN.md)", "", f"Made by `{COMMAND}`.", ""]
    for given in names:
        name, _, base = given.partition(":")
        found = collect(name, runs, here)
        for seed, s in found.items():  # a setting that trained no xID branch reads its warm-up twin's
            if base and "xid" not in s["rows"]:
                s["rows"]["xid"] = collect(base, runs, here)[seed]["rows"]["xid"]
        lines += [f"## {given}", "", "| seed | xID 1-shot | Soft - xID | Robust - xID | warning fired (first epoch) |"]
        lines += ["|---:|---:|---:|---:|---|"]
        for seed, s in found.items():
            r = s["rows"]
            d = {m: 100 * (r[m]["1-shot"] - r["xid"]["1-shot"]) for m in ("soft", "robust") if m in r}
            warned = ", ".join(f"{b}: {e if e is not None else 'no'}" for b, e in s["warned"].items())
            cells = [f"{100 * r['xid']['1-shot']:.1f}", f"{d.get('soft', 0):+.1f}", f"{d.get('robust', 0):+.1f}"]
            lines.append(f"| {seed} | {' | '.join(cells)} | {warned} |")
        lines += ["", "Per epoch (the warm-up's last, then each branch epoch):", ""]
        for seed, s in found.items():
            for branch, series in s["series"].items():
                for field, xs in series.items():
                    lines.append(f"- {seed} {branch} {field}: {fmt(xs)}")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(names):
    for given in names:  # demo.py's report of a setting that ran again, kept as one section each
        name = given.partition(":")[0]
        merged.fold_demo(
            HERE / name,
            name,
            HERE,
            f"PLAN.md's `python demo.py ... --results lab/results/ccp_drift/NAME`, folded in by `{COMMAND}`",
        )
    text = report(names)
    (HERE / "RESULTS.md").write_text(text)
    print(text, end="")


if __name__ == "__main__":
    help_asked(__doc__)
    main(sys.argv[1:])
