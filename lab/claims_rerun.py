"""The claims' rerun on today's code (results/claims/RERUN_PLAN.md): each claim's seeds sized from the spread
and the effect it had in the first claims run (results/claims/settings/, seeds 400-414, the same regime on
the code of two rounds ago), and Table 2's rows added at 25% injected, sized from the demo's 8-seed check
of that regime (results/spread/check_r0/, today's code; in-domain 1-shot only).

    python -m lab.claims_rerun seeds    # the sizing table and each level's seeds and branches, for the plan
    python -m lab.claims_rerun run --jobs 2 [--levels 0.25 0.75]   # every missing setting, in order; resumes

The rule (RERUN_PLAN.md says why): per claim and primary endpoint, the measured mean difference d and SD s
(paired by seed; F1 and F3b compare two warm-ups, so the two sides' SDs in quadrature), the SD's one-sided
upper 80% bound b over the seeds it was measured on (lab.statistics.sd_bound), and the fewest seeds in
5..15 whose paired t-test at alpha 0.025 (Holm's first step) has 80% power for |d| at SD b, on the
endpoint that needs fewest. A claim no endpoint powers by 15 runs 15 and is marked underpowered. S1 ("not
worse by 2 points" on both endpoints) is sized on its joint power when the truth is 0, as before.
"""

import argparse
from dataclasses import replace
from pathlib import Path
from statistics import mean, stdev

from lab.claims_plan import CLAIMS, PRIMARY, SWEEP_CLAIMS, diff_claim, load
from lab.regime import rows as demo_rows
from lab.statistics import not_worse_power, power, sd_bound

FIRST = Path("results/claims")  # the first run's settings and sweeps
CHECK = Path("results/spread/check_r0/demo_settings")  # R0's 8-seed check (CHECK_PLAN.md, amendment 1)
CHECK_SEEDS = tuple(range(1210, 1218))
FIRST_SEED = 1500  # the rerun's seeds are 1500, 1501, ...: no claim, screen, pilot, check or demo run used them
RESULTS = Path("results/claims/rerun")  # its settings, sweeps and (once whole) its report
REPORTED = {0.25: ("xid", "weighted", "oracle"), 0.75: ("xid", "weighted", "oracle")}  # Fig. 7's rows, 5 seeds
FIG7_ONLY = 5
BRANCHES = (
    "xid",
    "weighted",
    "oracle",
    "soft",
    "robust",
    "soft:oracle",
    "soft:bootstrap",
    "soft:neighbor",
    "soft:swapped",
)
ALPHA_CLAIM, POWER, MARGIN, LO, HI = 0.025, 0.8, 0.02, 5, 15

# Table 2's rows at 25% (new in the rerun): Weighted, Soft and Robust against xID, Robust against each half
TABLE2_25 = [
    diff_claim("T2a 25%", "Weighted-xID > xID at 25%", "25%", 0.25, "weighted", 0.25, "xid"),
    diff_claim("T2b 25%", "Soft-xID (CCP) > xID at 25%", "25%", 0.25, "soft", 0.25, "xid"),
    diff_claim("T2c 25%", "Robust-xID > xID at 25%", "25%", 0.25, "robust", 0.25, "xid"),
    diff_claim("T2d 25%", "Robust-xID > Weighted-xID at 25%", "25%", 0.25, "robust", 0.25, "weighted"),
    diff_claim("T2e 25%", "Robust-xID > Soft-xID at 25%", "25%", 0.25, "robust", 0.25, "soft"),
]


def first_run(folder=FIRST):
    """{level or (knob, level): {seed: rows}}, the first run's settings and sweeps, as the report reads them."""
    from lab.claims_report import load_sweeps

    return load(folder) | load_sweeps(folder)


def check_run(folder=CHECK, seeds=CHECK_SEEDS):
    """The 8-seed check's settings as {0.25: {seed: rows}}, in fractions as the claims' settings hold them."""
    return {
        0.25: {
            s: {m: {k: v / 100 for k, v in r.items()} for m, r in rows.items()}
            for s, rows in demo_rows(folder, seeds, 0.25).items()
        }
    }


def measured(claim, res, metric):
    """(mean difference, its SD, seeds) of a claim on one endpoint over every seed `res` has both sides of (not
    only the seeds the first plan gave it), or None where fewer than 3 seeds have it."""
    every = sorted({s for v in res.values() for s in v})
    a, b = replace(claim, seeds=tuple(every)).sides(res, metric)
    if len(a) < 3:
        return None
    if claim.paired:
        d = [x - y for x, y in zip(a, b)]
        return mean(d), stdev(d), len(d)
    return mean(a) - mean(b), (stdev(a) ** 2 + stdev(b) ** 2) ** 0.5, len(a)


def size(claim, res):
    """The rule on one claim: {"seeds", "endpoint", "d", "s", "n", "bound", "power at 15" (if short)} or None
    where nothing measured it."""
    best = None
    for metric in PRIMARY:
        m = measured(claim, res, metric)
        if m is None:
            continue
        d, s, n = m
        bound = sd_bound(s, n)
        if claim.at_least:  # S1: both endpoints must clear -2 points when the truth is 0
            powered = lambda k, b=bound: not_worse_power(k, b, MARGIN) ** 2  # noqa: E731
        else:
            powered = lambda k, b=bound, d=d: power(k, b, abs(d), ALPHA_CLAIM)  # noqa: E731
        k = next((k for k in range(LO, HI + 1) if powered(k) >= POWER), None)
        row = dict(endpoint=metric, d=d, s=s, n=n, bound=bound, seeds=k or HI, short=None if k else powered(HI))
        if best is None or (row["seeds"], row["short"] is not None) < (best["seeds"], best["short"] is not None):
            best = row
        elif row["short"] is not None and best["short"] is not None and row["short"] > best["short"]:
            best = row
    return best


def sizing(first=FIRST, check=CHECK):
    """{claim name: (claim, size())}: the first run's measures, and the check's for Table 2's 25% rows that the
    first run did not train (Soft and Robust at 25%). A claim both measured takes the larger bounded SD's."""
    res_first, res_check = first_run(first), check_run(check)
    out = {}
    for claim in CLAIMS + SWEEP_CLAIMS + TABLE2_25:
        rows = [r for r in (size(claim, res_first), size(claim, res_check)) if r]
        out[claim.name] = (claim, max(rows, key=lambda r: r["bound"]) if rows else None)
    return out


def levels(sized):
    """{level: {method: seeds}}: how many seeds each branch trains, the most any claim reading it needs."""
    need = {}
    for claim, row in sized.values():
        for level, method in claim.a.arms + claim.b.arms:
            k = row["seeds"] if row else HI
            need.setdefault(level, {})[method] = max(need.get(level, {}).get(method, 0), k)
    return need


def order(need, first=FIRST_SEED):
    """(seed, level, methods, sweeps) in the order they run, seed by seed, in lab.claims.run_one's form: each
    level's branches that some claim needs on that seed, Fig. 7's reported rows on the first 5, and at 50%
    the sweeps (every value of a knob, from the 50% setting's warm-up) while a sweep claim needs them."""
    need = {lv: dict(m) for lv, m in need.items()}
    for level, methods in REPORTED.items():
        for m in methods:
            need.setdefault(level, {})[m] = max(need.get(level, {}).get(m, 0), FIG7_ONLY)
    out = []
    for i in range(max(k for m in need.values() for k in m.values())):
        for level in (0.0, 0.5, 0.25, 0.75):
            methods = [m for m in BRANCHES if i < need.get(level, {}).get(m, 0)]
            knobs = tuple(
                k for k in ("delta", "lambda") if level == 0.5 and i < max(need.get((k, 0.5), {0: 0}).values())
            )
            if methods or knobs:
                out.append((first + i, level, methods, knobs))
    return out


def run(args):
    """lab.claims.run's way (one job per setting, side by side) over the rerun's order, into RESULTS."""
    from experiments import demo, jobs
    from lab.claims import run_one
    from lab.claims_plan import DATA, TRANSFER

    demo.ensure_data(DATA)
    demo.ensure_data(TRANSFER)
    todo = [s for s in order(levels(sizing())) if args.levels is None or s[1] in args.levels]
    jobs.side_by_side(run_one, [(DATA, args.runs, str(RESULTS), s) for s in todo], args.jobs)


def show(sized):
    head = "| claim | endpoint | measured on | d (points) | SD | upper 80% bound | seeds |"
    lines = [head, "|---|---|---:|---:|---:|---:|---|"]
    for name, (_, r) in sized.items():
        if r is None:
            lines.append(f"| {name} | - | - | - | - | - | {HI} (nothing measured it) |")
            continue
        short = f"; short: power at {HI} {r['short']:.2f}" if r["short"] is not None else ""
        lines.append(
            f"| {name} | {r['endpoint']} | {r['n']} seeds | {100 * r['d']:+.1f} | {100 * r['s']:.1f} | "
            f"{100 * r['bound']:.1f} | {r['seeds']}{short} |"
        )
    lines += ["", "| level | branch: seeds |", "|---|---|"]
    for level, methods in sorted(levels(sized).items(), key=lambda kv: str(kv[0])):
        lines.append(f"| {level} | " + ", ".join(f"{m}: {k}" for m, k in sorted(methods.items())) + " |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["seeds", "run"])
    p.add_argument("--first", default=str(FIRST), help="the first claims run's results folder")
    p.add_argument("--check", default=str(CHECK), help="R0's 8-seed check's settings")
    p.add_argument("--runs", default="runs/claims_rerun")
    p.add_argument("--jobs", type=int, default=1, help="settings side by side, one thread each (as lab.claims)")
    p.add_argument("--levels", type=float, nargs="+", help="`run`: only these injected shares' settings")
    a = p.parse_args(argv)
    if a.action == "run":
        run(a)
        return
    sized = sizing(Path(a.first), Path(a.check))
    print(show(sized))
    plan = order(levels(sized))
    print(f"\n{len(plan)} settings, {sum(len(m) for _, _, m, _ in plan)} branches, seeds {plan[0][0]}-{plan[-1][0]}:")
    for seed, level, methods, knobs in plan:
        print(f"- {seed} at {level:.0%}: {', '.join(methods)}" + (f"; sweeps {', '.join(knobs)}" if knobs else ""))


if __name__ == "__main__":
    main()
