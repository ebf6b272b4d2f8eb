"""Soft targets on real recordings: the drum set's demo runs read by lab/results/drums/PLAN.md's
rules, and CCP's target mass split by candidate (tools/ccp_mass.py; paper eqs. (13)-(14)) on the drum
set and on a synthetic run of the same recipe, at the warm-up's end and through the soft branch.

    python -m lab.soft_real report             # lab/results/drums/RESULTS.md, runs.json, mass.json (PLAN.md)
    python -m lab.soft_real report --strong    # RESULTS_STRONG.md, runs_strong.json, mass_strong.json (drums5,
                                               # PLAN_STRONG.md's stage B, from runs/strong/B)
    python -m lab.soft_real warnings runs/check_r0 --seeds 1210 1211 1212 1213 1214 1215 1216 1217 \
        --out lab/results/spread/check_r0/warnings.json   # the drift warning on whole demo runs' soft-target branches
                                                      # (lab/results/spread/CHECK_PLAN.md, amendment 1: at most 2 of 16)

The runs come first (PLAN.md's commands). What the report reads from them is kept in lab/results/drums/runs.json
(each setting's rows, each branch's per-epoch signals) and mass.json (each checkpoint's split), so it
remakes itself from committed files where runs/ is gone.
"""

import argparse
import json
import statistics
from pathlib import Path

from lab.statistics import interval

RESULTS = Path("lab/results/drums")
# each study: its sets' runs (the first is judged; the others, reported beside), its plan, its files
STUDIES = {
    "weak": dict(
        sets={"drums": Path("runs/drums"), "synth_src2p": Path("runs/synth_mass")},
        plan="PLAN.md",
        files=("RESULTS.md", "runs.json", "mass.json"),
        title="Soft targets on the drum set: results",
    ),
    "strong": dict(
        sets={"drums5": Path("runs/strong/B")},
        plan="PLAN_STRONG.md",
        files=("RESULTS_STRONG.md", "runs_strong.json", "mass_strong.json"),
        title="Soft targets from a strong bank on real sound (drums5, stage B): results",
    ),
}
METHODS = ("xid", "weighted", "oracle", "soft", "robust")
SIGNAL_EPOCHS = (0, 5, 11, 17, 23)  # branch epochs read (train.py numbers from 0; --save-every 6 keeps these)
MASS_GROUPS = ("itself", "source", "class", "other")


def collect(kept, sets):
    """{set: {"settings": {seed: rows}, "signals": {seed: {branch: signals}}}}: what runs/ holds now, over
    what `kept` (lab/results/drums/runs.json) held, so the report remakes itself from committed files alone."""
    for name, runs in sets.items():
        got = kept.setdefault(name, {"settings": {}, "signals": {}})
        for f in sorted(Path(runs).glob("demo_settings/seed*_faulty25.json")):
            setting = json.loads(f.read_text())
            seed = str(setting["seed"])
            got["settings"][seed] = setting["rows"]
            for m in ("xid", "soft", "robust"):
                run = Path(runs) / f"seed{seed}_faulty25" / m
                if (run / "log.jsonl").exists():
                    got["signals"].setdefault(seed, {})[m] = signals(run)
    return kept


def settings(kept, name):
    """{seed: rows} of one set's finished (seed, 25%) demo settings."""
    return {int(s): rows for s, rows in sorted(kept.get(name, {}).get("settings", {}).items())}


def paired(diffs):
    """Mean and 95% t-interval of paired differences (points), or the mean alone under 2 of them."""
    m, low, high = interval(diffs, [0.0] * len(diffs), paired=True)
    return m, ((low, high) if len(diffs) > 1 else None)


def verdict(diffs):
    """PLAN.md's rule for one method against xID over the seeds."""
    if len(diffs) < 3:
        return f"not read ({len(diffs)} of 3 seeds)"
    if all(d < 0 for d in diffs):
        return "loses (negative on every seed)"
    if sum(d > 0 for d in diffs) >= 2 and statistics.mean(diffs) > 0:
        return "does not lose"
    return "not settled by 3 seeds"


def signals(run):
    """A branch's per-epoch signals at SIGNAL_EPOCHS, from its log.jsonl, and whether train.py's drift warning
    (tools/bank_report.py's rule, replayed on the log) fired in it: {"warned": epoch or None}."""
    from tools.bank_report import drift_warning

    log = [json.loads(line) for line in (Path(run) / "log.jsonl").read_text().splitlines() if line.strip()]
    keep = ("faulty_auroc", "knn_class", "xmodal_class", "agreement")
    out = {str(r["epoch"]): {k: r.get(k) for k in keep} | {"ccp": r["soft_share"]["ccp"]} for r in log}
    warned = next((log[k - 1]["epoch"] for k in range(1, len(log) + 1) if drift_warning(log[:k])), None)
    return out | {"warned": warned}


def checkpoints(root):
    """The checkpoints to split: the warm-up's end, the soft branch's saved epochs, xID's end."""
    out = [("warm-up end", root / "warmup" / "ckpt_epoch0029.pt")]
    out += [(f"soft e{e + 1}", root / "soft" / f"ckpt_epoch{e:04d}.pt") for e in SIGNAL_EPOCHS[1:]]
    out.append(("xid e24", root / "xid" / "ckpt_epoch0023.pt"))
    return [(name, p) for name, p in out if p.exists()]


def masses(cache_file, kept, sets):
    """{set: {seed: {checkpoint name: analyse()}}}, computing only what mass.json does not hold."""
    from tools.ccp_mass import analyse

    cache = json.loads(cache_file.read_text()) if cache_file.exists() else {}
    for name, runs in sets.items():
        for seed in settings(kept, name):
            root = runs / f"seed{seed}_faulty25"
            have = cache.setdefault(name, {}).setdefault(str(seed), {})
            for label, ckpt in checkpoints(root):
                if label not in have:
                    print(f"[soft_real] splitting {ckpt}", flush=True)
                    have[label] = analyse(ckpt, draws=2)
    cache_file.write_text(json.dumps(cache, indent=1) + "\n")
    return cache


def fmt(x, d=1):
    return "-" if x is None else f"{x:.{d}f}"


def report(study="weak"):
    sets, plan, (out_md, kept_name, mass_name), title = (STUDIES[study][k] for k in ("sets", "plan", "files", "title"))
    judged = next(iter(sets))
    RESULTS.mkdir(parents=True, exist_ok=True)
    kept_file = RESULTS / kept_name
    kept = collect(json.loads(kept_file.read_text()) if kept_file.exists() else {}, sets)
    kept_file.write_text(json.dumps(kept, indent=1) + "\n")
    drums = settings(kept, judged)
    lines = [
        f"# {title}",
        "",
        f"Made by `python -m lab.soft_real report{' --strong' * (study == 'strong')}` from the runs of "
        f"[{plan}]({plan}) (set and source: [README.md](README.md); each seed's rows and signals: "
        f"[{kept_name}]({kept_name}); every split: [{mass_name}]({mass_name})). Set `data/{judged}`, "
        "`--preset demo`, 25% injected, 30-epoch xID warm-up, 24-epoch branches, every process on 1 thread, the "
        "demo's evaluation; seeds " + ", ".join(map(str, drums)) + ".",
        "",
        "## 1-shot (%) and each method's difference from xID on the same seed",
        "",
        f"| {judged} seed | " + " | ".join(METHODS) + " |",
        "|---|" + "---:|" * len(METHODS),
    ]
    for name in sets:  # the judged set, then the decomposition's other runs (xID and Soft only)
        for seed, rows in settings(kept, name).items():
            x = 100 * rows["xid"]["1-shot"]
            cells = [f"{x:.1f}"] + [f"{100 * rows[m]['1-shot'] - x:+.1f}" if m in rows else "-" for m in METHODS[1:]]
            lines.append(f"| {'' if name == judged else name + ' '}{seed} | " + " | ".join(cells) + " |")
    lines += ["", f"{judged} only:", ""]
    lines += [f"| method | mean vs xID [95% CI] | bank AUROC | {plan}'s rule |", "|---|---:|---:|---|"]
    for m in METHODS[1:]:
        diffs = [100 * (r[m]["1-shot"] - r["xid"]["1-shot"]) for r in drums.values() if m in r]
        if not diffs:
            continue
        mean, ci = paired(diffs)
        ci_txt = f" [{ci[0]:+.1f}, {ci[1]:+.1f}]" if ci else ""
        auroc = statistics.mean(100 * r[m]["AUROC"] for r in drums.values() if m in r)
        rule = verdict(diffs) if m in ("soft", "robust") else "(reported)"
        lines.append(f"| {m} | {mean:+.1f}{ci_txt} | {auroc:.1f} | {rule} |")
    lines += [
        "",
        "## The branches' signals (reported, not judged)",
        "",
        "Cross-modal class agreement (`xmodal`), within-modal 1-NN and CCP's same-class share of S, at branch epochs "
        + ", ".join(str(e + 1) for e in SIGNAL_EPOCHS)
        + ".",
        "",
        "| set | seed | branch | xmodal | 1-NN | CCP same-class share | drift warning |",
        "|---|---:|---|---|---|---|---|",
    ]
    for name in sets:
        for seed, branches in sorted(kept[name]["signals"].items()):
            for m, sig in branches.items():
                cols = [
                    "/".join(fmt(sig[str(e)][k], 2) if str(e) in sig else "-" for e in SIGNAL_EPOCHS)
                    for k in ("xmodal_class", "knn_class", "ccp")
                ]
                warned = (
                    "-"
                    if m == "xid" or "warned" not in sig
                    else ("quiet" if sig["warned"] is None else f"epoch {sig['warned']}")
                )
                lines.append(f"| {name} | {seed} | {m} | " + " | ".join(cols) + f" | {warned} |")
    cache = masses(RESULTS / mass_name, kept, sets)
    lines += [
        "",
        "## Where CCP's mass goes (S_v, eq. (13); both directions in mass.json)",
        "",
        "Share of S(j|i) per candidate group, averaged over anchors (clean anchors beside all), against each "
        "group's share of the 1+K candidates (chance). `itself` is column 0; `source` its own source's other "
        "renders; `class` the same class from other sources; `other` other classes.",
        "",
        "| set | seed | checkpoint | " + " | ".join(MASS_GROUPS) + " | clean: class / other | chance: class |",
        "|---|---:|---|" + "---:|" * len(MASS_GROUPS) + "---:|---:|",
    ]
    for name, by_seed in cache.items():
        for seed, by_ckpt in by_seed.items():
            for label, r in by_ckpt.items():
                cells = [fmt(r["S_v"][g], 3) for g in MASS_GROUPS]
                clean = f"{r['clean']['S_v']['class']:.3f} / {r['clean']['S_v']['other']:.3f}" if "clean" in r else "-"
                lines.append(
                    f"| {name} | {seed} | {label} | " + " | ".join(cells) + f" | {clean} | {r['chance']['class']:.3f} |"
                )
    (RESULTS / out_md).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def drift_warnings(runs, seeds, out):
    """The drift rule replayed on each Soft- and Robust-xID branch of whole demo runs under `runs` (25%
    injected), beside the branch's 1-shot minus xID's on its seed. Kept in `out` (JSON), which is read back
    where runs/ is gone. -> {"branches": [...], "fired": n, "of": m}."""
    from lab.regime import rows as demo_rows

    out = Path(out)
    kept = json.loads(out.read_text()) if out.exists() else {"runs": str(runs), "branches": []}
    have = {(b["seed"], b["branch"]) for b in kept["branches"]}
    for seed, r in demo_rows(runs, seeds, 0.25).items():
        for m in ("soft", "robust"):
            log = Path(runs) / f"seed{seed}_faulty25" / m
            if m in r and (seed, m) not in have and (log / "log.jsonl").exists():
                vs = r[m]["1-shot"] - r["xid"]["1-shot"]
                kept["branches"].append({"seed": seed, "branch": m, "warned": signals(log)["warned"], "vs xid": vs})
    kept["branches"].sort(key=lambda b: (b["seed"], b["branch"]))
    kept["fired"] = sum(b["warned"] is not None for b in kept["branches"])
    kept["of"] = len(kept["branches"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(kept, indent=1) + "\n")
    return kept


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cmd", choices=["report", "warnings"])
    p.add_argument("runs", nargs="?", help="warnings: a demo --runs folder")
    p.add_argument("--strong", action="store_true", help="PLAN_STRONG.md's stage B on drums5")
    p.add_argument("--seeds", type=int, nargs="+", help="warnings: the seeds")
    p.add_argument("--out", help="warnings: the JSON that keeps what was read")
    a = p.parse_args(argv)
    if a.cmd == "report":
        report("strong" if a.strong else "weak")
        return
    if not (a.runs and a.seeds and a.out):
        p.error("warnings needs RUNS, --seeds and --out")
    kept = drift_warnings(a.runs, a.seeds, a.out)
    print("| seed | branch | drift warning | 1-shot vs xID |\n|---:|---|---|---:|")
    for b in kept["branches"]:
        fired = "quiet" if b["warned"] is None else f"epoch {b['warned']}"
        print(f"| {b['seed']} | {b['branch']} | {fired} | {b['vs xid']:+.1f} |")
    print(f"\nfired on {kept['fired']} of {kept['of']} soft-target branches")


if __name__ == "__main__":
    main()
