"""The paper's claims on the adopted regime: Fig. 7 (Sec. 5.2), Table 1 (Sec. 5.3), Table 2 (Sec. 5.4)
and the appendix's delta and lambda sweeps, each (seed, level) trained once and shared by every claim
that reads it, and every branch evaluated in-domain and on the transfer set. What is judged, how, and
on how many seeds was written before the runs: lab/results/claims/PLAN.md.

    python -m lab.claims seeds      # the plan's seed counts, from the power pilot's paired SDs
    python -m lab.claims run        # every missing setting, in the plan's order; resumes
    python -m lab.claims run --jobs 2   # two settings at a time, one thread each (2 cores: 1.7x)
    python -m lab.claims run --jobs 2 --levels 0.25 0.75   # only those levels' settings
    python -m lab.claims report     # the rerun's report in lab/results/claims/rerun/, and the documents' verdicts
    python -m lab.claims report --run first   # the first run's report (seeds 400-414), in runs/claims_first/
    python -m lab.claims_finetune run PACK   # Table 2's fine-tune column, on a GPU (see its docstring)

The regime is `make demo`'s (config.PRESETS["demo"], data/synth_src2p, 30 warm-up epochs) with branches of
24 epochs (lab/results/ccp_length: the demo's 4 are far from done). Each finished (seed, level) is written to
lab/results/claims/settings/ as it finishes (commit it: runs/ is not kept), and `run` skips it next time.
"""

import argparse
import json
import sys
from pathlib import Path
from statistics import stdev

import demo
from lab import claims_docs, claims_report
from lab.claims_plan import DATA, TRANSFER
from lab.claims_report import FIG7_ONLY, FIRST_SEED, SEEDS
from lab.claims_setting import run_one
from lab.statistics import not_worse_power, power, sd_bound
from tools import synthetic

RESULTS = Path("lab/results/claims")
FIRST_OUT = "runs/claims_first"  # where `report --run first` remakes the first run's report
PILOT = Path("lab/results/power_pilot/settings")  # the screen the seeds are sized from (never its seeds)
TABLE2 = ["xid", "weighted", "soft", "robust"]
TABLE1 = ["soft:oracle", "soft:bootstrap", "soft:neighbor", "soft:swapped"]  # CCP is Table 2's "soft"
FIG7 = ["xid", "weighted", "oracle"]
EFFECT, POWER, ALPHA_CLAIM, MARGIN = 0.03, 0.8, 0.025, 0.02  # 3 points; Holm's first step over 2 endpoints


# what lab/results/power_pilot/PLAN.md (with its amendment) trains: seeds sized on less are refused
PILOT_SEEDS = (300, 301, 302, 303)
PILOT_METHODS = {
    0.0: {"xid", "weighted", "soft", "soft:oracle", "robust", "soft:bootstrap"},
    0.5: {"xid", "weighted", "oracle", "soft", "robust"},
}


def pilot_sds(folder=PILOT):
    """{(level, 'A - B'): (paired SD over the pilot's seeds, n)} on each primary endpoint's worse, and
    {(level, method): between-seed SD} for the claims that compare two warm-ups (Welch). Refuses a pilot
    that lacks a seed, a level or a method of its plan."""
    runs = {}
    for s in (json.loads(p.read_text()) for p in sorted(Path(folder).glob("seed*_faulty*.json"))):
        runs.setdefault(s["faulty"], {})[s["seed"]] = s["rows"]
    missing = [
        f"seed {seed} at {level:.0%}: {sorted(methods - set(runs.get(level, {}).get(seed, {})))}"
        for level, methods in PILOT_METHODS.items()
        for seed in PILOT_SEEDS
        if methods - set(runs.get(level, {}).get(seed, {}))
    ]
    if missing:
        raise SystemExit(
            f"{folder}: the pilot is not finished, so no seeds are sized from it; missing " + "; ".join(missing)
        )
    paired, spread = {}, {}
    for level, seeds in runs.items():
        methods = sorted(set.intersection(*(set(r) for r in seeds.values())))
        for m in methods:
            spread[(level, m)] = max(stdev([seeds[s][m][e] for s in seeds]) for e in claims_report.PRIMARY)
            for b in methods:
                if m != b and (b == "xid" or (m, b) == ("soft:oracle", "soft")):
                    sd = max(stdev([seeds[s][m][e] - seeds[s][b][e] for s in seeds]) for e in claims_report.PRIMARY)
                    paired[(level, f"{m} - {b}")] = (sd, len(seeds))
    return paired, spread


def seed_counts(folder=PILOT):
    """The plan's rule (PLAN.md, seeds): the largest pilot paired SD over both levels' differences, on the
    worse primary endpoint, its upper 80% bound, and the fewest seeds in 5..15 with 80% power for 3 points
    at alpha 0.025, for every claim at 0% and 50% ("levels"); the Welch claims (F1, F3b) from the two
    levels' SDs added in quadrature; S1 ("not worse by 2 points" on both endpoints: sqrt(0.8) each) at
    the levels' bound. Returns ({group: seeds}, the lines that show it, {"bound": {group: planning SD},
    "short": {group: power at 15}} for claims_plan.BOUND and SHORT)."""
    paired, spread = pilot_sds(folder)
    n = min(v[1] for v in paired.values())
    lines, counts, notes = [], {}, {"bound": {}, "short": {}}

    def size(group, sd, how, powered):
        bound = sd_bound(sd, n)
        k = next((k for k in range(5, 16) if powered(k, bound) >= POWER), None)
        counts[group] = k or 15
        notes["bound"][group] = round(bound, 4)
        if not k:
            notes["short"][group] = round(powered(15, bound), 2)
        short = "" if k else f"; 15 fall short: power at 15 {powered(15, bound):.2f}"
        lines.append(f"| {group} | {how} | {100 * sd:.2f} | {100 * bound:.2f} | {counts[group]}{short} |")
        return bound

    def t_power(k, bound):
        return power(k, bound, EFFECT, ALPHA_CLAIM)

    sd, (level, diff) = max((v[0], k) for k, v in paired.items())
    size("levels", sd, f"largest paired SD: {diff} at {level:.0%}", t_power)
    counts["0%"] = counts["50%"] = counts.pop("levels")
    for key in ("bound", "short"):
        if "levels" in notes[key]:
            notes[key]["0%"] = notes[key]["50%"] = notes[key].pop("levels")
    for group, m in (("F1", "xid"), ("F3b", "weighted - xid")):
        if m == "xid":
            sd = (spread[(0.0, "xid")] ** 2 + spread[(0.5, "xid")] ** 2) ** 0.5
        else:
            sd = (paired[(0.0, m)][0] ** 2 + paired[(0.5, m)][0] ** 2) ** 0.5
        size(group, sd, f"Welch: {m} at 0% and 50% in quadrature", t_power)
    sd = max(v[0] for v in paired.values())
    # "not worse" holds only on both endpoints: their joint power, taking them as independent
    size(
        "S1",
        sd,
        "not worse by 2 points on both endpoints, the levels' SD",
        lambda k, b: not_worse_power(k, b, MARGIN) ** 2,
    )
    head = ["| group | SD used | SD (points) | upper 80% bound | seeds |", "|---|---|---:|---:|---:|"]
    table = [f"| {lv:.0%} | {d} | {100 * v:.2f} | | |" for (lv, d), (v, _) in sorted(paired.items())]
    shown = head + lines + ["", f"Every pilot difference ({n} seeds, worse primary endpoint):", ""] + head + table
    return counts, shown, notes


def plan(seeds=None):
    """(seed, injected share, methods, sweeps) in the order they run, seed by seed, so a run stopped early
    leaves complete pairs. A 50% setting's sweeps run after it in the same job, from its warm-up and its
    xID and default branches (two jobs must never share a warm-up's folder). At 0% Oracle-xID is xID
    (nothing injected to drop), so it is not trained there. Seeds from FIRST_SEED on."""
    seeds = seeds or SEEDS
    n0, n50 = max(seeds["0%"], seeds["F1"], seeds["F3b"]), max(seeds["50%"], seeds["F1"], seeds["F3b"])
    out = []
    for i in range(max(n0, n50, seeds["S1"], FIG7_ONLY)):
        seed = FIRST_SEED + i
        if i < n0:
            out.append((seed, 0.0, TABLE2 + TABLE1 if i < seeds["0%"] else ["xid", "weighted"], ()))
        knobs = tuple(k for k, n in (("delta", seeds["S1"]), ("lambda", seeds["50%"])) if i < n)
        if i < n50 or knobs:
            out.append((seed, 0.5, FIG7 + ["soft", "robust"] if i < seeds["50%"] else ["xid", "weighted"], knobs))
        if i < FIG7_ONLY:
            out += [(seed, 0.25, FIG7, ()), (seed, 0.75, FIG7, ())]
    return out


def run(args):
    synthetic.ensure(args.data)
    synthetic.ensure(TRANSFER)
    todo = [s for s in plan() if args.levels is None or s[1] in args.levels]
    calls = [(args.data, args.runs, args.results or str(RESULTS), setting) for setting in todo]
    demo.side_by_side(run_one, calls, args.jobs)  # --jobs: demo.py's way


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["seeds", "run", "report"])
    p.add_argument("--data", default=DATA)
    p.add_argument("--runs", default="runs/claims")
    p.add_argument(
        "--results",
        help="the committed evidence (default: the --run's folder): `run` adds each finished setting there, "
        "`report` remakes its tables and the README's and CLAIMS.md's verdicts; the only commands, with "
        "`make gpu-check` and claims_finetune, that write tracked files",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="settings trained side by side, the cores shared out: on 2 "
        "cores, 2 jobs of 1 thread train 1.7x more than 1 job of 2 threads (BENCHMARKS.md)",
    )
    p.add_argument(
        "--run",
        choices=["first", "rerun"],
        help="`report`: the rerun on today's code (the default: seeds 1500-1514, lab/results/claims/rerun/, "
        "RERUN_PLAN.md), whose report the documents cite, or the first claims run (seeds 400-414, "
        "lab/results/claims/settings/, PLAN.md); --results defaults to the run's folder",
    )
    p.add_argument(
        "--out",
        help="`report`: write the report's files here instead of beside the settings, and leave README.md and "
        f"CLAIMS.md alone (they cite the rerun's committed report); `--run first` defaults to {FIRST_OUT}",
    )
    p.add_argument("--pilot", default=str(PILOT), help="`seeds`: the pilot's settings folder")
    p.add_argument(
        "--levels",
        type=float,
        nargs="+",
        help="`run`: only the plan's settings at these injected shares, in its order (e.g. 0.25 0.75, "
        "the shortest, when a session has under an hour left: an unfinished setting is lost with runs/)",
    )
    args = p.parse_args(argv)
    if args.run and args.action != "report":
        p.error(
            f"--run {args.run}: only `report` reads it (`run` trains the first run's plan; the rerun's: "
            "`python -m lab.claims_rerun run`)"
        )
    if args.out and args.action != "report":
        p.error(f"--out {args.out}: only `report` writes there")
    if args.action == "seeds":
        counts, lines, notes = seed_counts(Path(args.pilot))
        print("\n".join(lines) + "\n\nSEEDS = " + json.dumps(counts))
        print("BOUND = " + json.dumps(notes["bound"]) + "\nSHORT = " + json.dumps(notes["short"]))
    elif args.action == "run":
        if not SEEDS:
            sys.exit("lab/claims_plan.py: SEEDS is empty; fill it from `python -m lab.claims seeds`")
        run(args)
    else:
        from lab import claims_power, claims_rerun

        rerun = args.run != "first"
        if not rerun:  # its report files left lab/results/claims/ with the rerun (RERUN.md); they are remade aside
            args.out = args.out or FIRST_OUT
        which = claims_rerun.claims_of() if rerun else claims_report.FIRST_RUN
        folder = Path(args.results or (claims_rerun.RESULTS if rerun else RESULTS))
        res = claims_report.main(folder, which, args.out)
        waiting = claims_docs.waiting(folder, res, which)
        if args.out:
            print(f"README.md and CLAIMS.md unchanged: the report is in {args.out}, not beside the settings")
        elif waiting:  # RERUN_PLAN.md: the documents change once every setting is in
            print(f"README.md and CLAIMS.md unchanged: {len(waiting)} claims still lack seeds ({', '.join(waiting)})")
        else:
            power = claims_power.show_power(*claims_power.power_seen(folder, which)) if rerun else None
            claims_docs.update(folder, res, which, power=power)


if __name__ == "__main__":
    main(sys.argv[1:])
