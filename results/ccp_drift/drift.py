"""The weak-bank reproduction, collected (PLAN.md): per seed and branch, the 1-shot and the per-epoch drift
series from each branch's log (CCP's same-class share, the bank's cross-modal class agreement, the faults'
AUROC, the label-free agreement of analysis/drift.py) and whether train.py's warning rule fires on it.
Writes NAME/seedS_epochs.json beside each finished setting (the runs/ folder is not kept) and RESULTS.md.

    .venv/bin/python results/ccp_drift/drift.py W8 W16 W8G:W8   # the settings' names, as in PLAN.md
                                                                # (NAME:BASE: xID's row from BASE, same seed)
"""

import json
import sys
from pathlib import Path

from analysis.drift import drift_warning

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
FIELDS = {"ccp same-class": lambda r: r["soft_share"]["ccp"], "xmodal class": lambda r: r["xmodal_class"]}
FIELDS |= {"AUROC": lambda r: r["faulty_auroc"], "agreement": lambda r: r.get("agreement")}


def collect(name, runs="runs/ccp_drift"):
    """{seed: {"rows": the setting's rows, "series": {branch: {field: [per epoch]}}, "warned": {branch: epoch}}}"""
    out = {}
    for done in sorted((HERE / name / "demo_settings").glob("seed*_faulty*.json")):
        saved = json.loads(done.read_text())
        seed, kept = saved["seed"], HERE / name / f"seed{saved['seed']}_epochs.json"
        folder = ROOT / runs / name / done.stem
        if folder.is_dir():
            series, warned = {}, {}
            for branch in saved["rows"]:
                log = [json.loads(line) for line in open(folder / branch / "log.jsonl")]
                warm = [json.loads(line) for line in open(folder / "warmup" / "log.jsonl")][-1]
                series[branch] = {k: [f(warm)] + [f(r) for r in log] for k, f in FIELDS.items()}
                fired = [r["epoch"] for k, r in enumerate(log) if drift_warning(log[: k + 1])]
                warned[branch] = fired[0] if fired else None
            kept.write_text(json.dumps({"series": series, "warned": warned}))
        got = json.loads(kept.read_text()) if kept.exists() else {"series": {}, "warned": {}}
        out[seed] = {"rows": saved["rows"], **got}
    return out


def fmt(xs):
    return " ".join("-" if x is None else f"{x:.2f}" for x in xs)


def main(names):
    lines = ["# Soft targets from a weak bank: results (PLAN.md; collected by drift.py)", ""]
    for given in names:
        name, _, base = given.partition(":")
        found = collect(name)
        for seed, s in found.items():  # a setting that trained no xID branch reads its warm-up twin's
            if base and "xid" not in s["rows"]:
                s["rows"]["xid"] = collect(base)[seed]["rows"]["xid"]
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
    (HERE / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main(sys.argv[1:])
