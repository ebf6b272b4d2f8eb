"""The claims' rerun on today's code (lab/results/claims/RERUN_PLAN.md): each claim's seeds sized from the spread
and the effect it had in the first claims run (lab/results/claims/settings/, seeds 400-414, the same regime on
the code of two rounds ago), and Table 2's rows added at 25% injected, sized from the demo's 8-seed check
of that regime (lab/results/spread/check_r0/, today's code; in-domain 1-shot only).

    python -m lab.claims_rerun seeds    # the sizing table and each level's seeds and branches, for the plan
    python -m lab.claims_rerun run --jobs 2 [--levels 0.25 0.75]   # every missing setting, in order; resumes
    python -m lab.claims_rerun status   # which planned settings lab/results/claims/rerun/ holds, and what each lacks
    python -m lab.claims_rerun changes  # the claims whose verdict differs from the first run's (for HISTORY.md)
    python -m lab.claims_power          # the planned endpoints whose SD came out above their bound (CLAIMS.md)

The rule (RERUN_PLAN.md says why): per claim and primary endpoint the claim's test would read (not one at
its floor or ceiling), the measured mean difference d and SD s (paired by seed; F1 and F3b compare two
warm-ups, so the two sides' SDs in quadrature), d's one-sided 80% lower bound and the SD's upper 80% bound
b over the seeds they were measured on (lab.statistics.sd_bound), and the fewest seeds in 5..15 whose
paired t-test at alpha 0.025 (Holm's first step) has 80% power for that lower bound at SD b, on the
endpoint that needs fewest. A claim no endpoint powers by 15 runs 15 and is marked underpowered, with the
effect 15 seeds would find. S1 ("not worse by 2 points" on every kept endpoint) is sized on its joint power
when the truth is 0. Where the check (today's code) spreads wider than the first run allows on the
contrasts both measured, every first-run bound is scaled up by that ratio (inflation()).
"""

import argparse
from dataclasses import replace
from math import prod
from pathlib import Path
from statistics import mean, stdev

from scipy import stats

from lab import claims_plan
from lab.claims_plan import CLAIMS, PRIMARY, SWEEP_CLAIMS, Run, diff_claim, load
from lab.regime import rows as demo_rows
from lab.statistics import not_worse_power, power, sd_bound, seeds_for

FIRST = Path("lab/results/claims")  # the first run's settings and sweeps
CHECK = Path("lab/results/spread/check_r0/demo_settings")  # R0's 8-seed check (CHECK_PLAN.md, amendment 1)
CHECK_SEEDS = tuple(range(1210, 1218))
FIRST_SEED = 1500  # the rerun's seeds are 1500, 1501, ...: no experiment used them (lab/seeds.py)
RESULTS = Path("lab/results/claims/rerun")  # its settings, sweeps and (once whole) its report
REPORTED = {0.25: ("xid", "weighted", "oracle"), 0.75: ("xid", "weighted", "oracle")}  # Fig. 7's rows, 5 seeds
FIG7_ONLY = 5
# Each branch's seeds, pasted from `python -m lab.claims_rerun seeds` into RERUN_PLAN.md and here before the
# first rerun setting: `run` trains these, never a recomputation. Each claim is judged on the seeds both its
# arms have. Pasted 2026-11-29 (RERUN_PLAN.md).
NEED = {
    0.0: {
        "robust": 11,
        "soft": 15,
        "soft:bootstrap": 15,
        "soft:neighbor": 15,
        "soft:oracle": 7,
        "soft:swapped": 15,
        "weighted": 15,
        "xid": 15,
    },
    0.5: {"oracle": 6, "robust": 15, "soft": 15, "weighted": 15, "xid": 15},
    ("delta", 0.5): {"-1": 5, "-2": 8, "1": 5, "known": 8},
    ("lambda", 0.5): {"0.5": 9, "0.9": 8, "1": 9},
    0.25: {"robust": 13, "soft": 13, "weighted": 10, "xid": 10},
}
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


def measured(claim, res, metric, every=True):
    """(mean difference, its SD, seeds) of a claim on one endpoint over every seed `res` has both sides of (not
    only the seeds the first plan gave it; every=False: the claim's own seeds), or None where fewer than 3
    seeds have it."""
    if every:
        claim = replace(claim, seeds=tuple(sorted({s for v in res.values() for s in v})))
    a, b = claim.sides(res, metric)
    if len(a) < 3:
        return None
    if claim.paired:
        d = [x - y for x, y in zip(a, b)]
        return mean(d), stdev(d), len(d)
    return mean(a) - mean(b), (stdev(a) ** 2 + stdev(b) ** 2) ** 0.5, len(a)


def kept_endpoints(claim, res):
    """The primary endpoints the claim's test would read on `res`: PLAN.md leaves out one at its floor (every
    compared side within 3 points of chance) or its ceiling (the baseline at 97%), so sizing leaves it out too."""
    from lab.claims_report import at_ceiling

    every = replace(claim, seeds=tuple(sorted({s for v in res.values() for s in v})))
    return [m for m in PRIMARY if not every.at_floor(res, m) and not at_ceiling(every.base(res, m))]


def effect_low(d, s, n):
    """|d| less its one-sided 80% t-bound (the first run's effects are estimates: a claim sized on a lucky
    one would fall short); 0 where the bound reaches zero."""
    return max(0.0, abs(d) - stats.t.ppf(0.8, n - 1) * s / n**0.5)


def smallest_effect(bound, k=HI):
    """The smallest effect the paired t-test over k seeds finds with 80% power at SD `bound` (a capped claim's
    "underpowered" in numbers)."""
    return next(e / 1000 for e in range(1, 1000) if power(k, bound, e / 1000, ALPHA_CLAIM) >= POWER)


def size(claim, res, inflate=1.0):
    """The rule on one claim: {"seeds", "endpoint", "d", "low", "s", "n", "bound", "short" (power at 15, if
    capped), "smallest" (the effect 15 seeds find)}, or None where nothing measured it on a kept endpoint.
    `inflate` scales every SD bound (today's code against the first run's: inflation())."""
    found = {m: measured(claim, res, m) for m in kept_endpoints(claim, res)}
    found = {m: (d, s, n, inflate * sd_bound(s, n)) for m, v in found.items() if v for d, s, n in [v]}
    if not found:
        return None
    if claim.at_least:  # S1: every kept endpoint must clear -2 points, when the truth is 0
        powered = lambda k: prod(not_worse_power(k, b, MARGIN) for _, _, _, b in found.values())  # noqa: E731
        k = next((k for k in range(LO, HI + 1) if powered(k) >= POWER), None)
        metric = max(found, key=lambda m: found[m][3])  # the binding endpoint: the widest
        d, s, n, b = found[metric]
        return dict(
            endpoint=" and ".join(found),
            d=d,
            low=0.0,
            s=s,
            n=n,
            bound=b,
            bounds={m: v[3] for m, v in found.items()},
            seeds=k or HI,
            short=None if k else powered(HI),
            smallest=None,
        )
    rows = []
    for metric, (d, s, n, b) in found.items():
        low = effect_low(d, s, n)
        k = seeds_for(b, low, POWER, LO, HI, ALPHA_CLAIM) if low else None  # lab.statistics' own search
        short = None if k else power(HI, b, low, ALPHA_CLAIM)
        rows.append(
            dict(
                endpoint=metric,
                d=d,
                low=low,
                s=s,
                n=n,
                bound=b,
                bounds={m: v[3] for m, v in found.items()},
                seeds=k or HI,
                short=short,
                smallest=None if k else smallest_effect(b),
            )
        )
    return min(rows, key=lambda r: (r["seeds"], -(r["short"] or 1.0)))  # Holm: either endpoint can make it hold


OVERLAP = [  # contrasts both the first run (5 seeds) and the check (8) measured at 25%, in-domain 1-shot
    diff_claim("W", "Weighted - xID at 25%", "25%", 0.25, "weighted", 0.25, "xid"),
    diff_claim("O", "Oracle - xID at 25%", "25%", 0.25, "oracle", 0.25, "xid"),
]


def inflation(res_first, res_check):
    """max(1, the largest ratio of the check's SD to the first run's upper 80% SD bound) over OVERLAP: if
    today's code spreads more than the first run's bound allows, every first-run bound grows by that much."""
    ratios = [1.0]
    for claim in OVERLAP:
        first, now = measured(claim, res_first, "1-shot"), measured(claim, res_check, "1-shot")
        if first and now:
            ratios.append(now[1] / sd_bound(first[1], first[2]))
    return max(ratios)


def sizing(first=FIRST, check=CHECK):
    """{claim name: (claim, size())}: the first run's measures, and the check's for Table 2's 25% rows that the
    first run did not train (Soft and Robust at 25%), the first run's bounds scaled by inflation(). A claim
    both measured takes the larger seed count. Refuses a check that lacks a seed."""
    res_first, res_check = first_run(first), check_run(check)
    missing = sorted(set(CHECK_SEEDS) - set(res_check[0.25]))
    if missing:
        raise SystemExit(f"{check}: R0's 8-seed check lacks seeds {missing}; the rerun is sized once it is whole")
    out, k = {}, inflation(res_first, res_check)
    for claim in CLAIMS + SWEEP_CLAIMS + TABLE2_25:
        rows = [r for r in (size(claim, res_first, k), size(claim, res_check)) if r]
        out[claim.name] = (claim, max(rows, key=lambda r: r["seeds"]) if rows else None)
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
    """(seed, level, methods, sweeps) in the order they run, seed by seed, in lab.claims_setting.run_one's form: each
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


CODE = "a8be88a"  # the commit every rerun setting runs from (RERUN.md): the plan's code, 557423f, plus documents


def trained(need=None):
    """{(level, method or sweep value): seeds}: how many seeds order(need) trains each arm on, from seed 1500 up.
    A branch trains its NEED (Fig. 7's reported rows at least 5); a sweep trains every value of its knob while
    any value needs it, so each value has the most seeds any of them needs."""
    from lab.claims_plan import SWEEP_VALUES

    out = {}
    for _, level, methods, knobs in order(need or NEED):
        arms = [(level, m) for m in methods] + [((k, level), v) for k in knobs for v in SWEEP_VALUES[k]]
        for arm in arms:
            out[arm] = out.get(arm, 0) + 1
    return out


NOT_WORSE_LEVEL = 0.975  # RERUN_PLAN.md, amendment 1: the lower end of the printed 95% interval


def claims_of(sized=None, need=None):
    """The rerun as lab.claims report judges it (a claims_plan.Run): every claim of the first run and Table 2's
    25% rows, each on every rerun seed that trains both its arms (trained(); at least its own count; RERUN_PLAN.md,
    analysis seeds), carrying its own planning SD bound and, where 15 seeds could not power it, its power and the
    effect 15 find; 'not worse' judged by the printed 95% interval (amendment 1); Fig. 7's reported rows on the
    first 5 seeds."""
    sized = sized or sizing()
    need = need or NEED
    seeds_of = trained(need)
    out = {}
    for name, (claim, row) in sized.items():
        missing = [arm for arm in claim.a.arms + claim.b.arms if arm[1] not in need.get(arm[0], {})]
        if missing or not row:
            raise SystemExit(f"{name}: {'arms ' + str(missing) + ' not in NEED' if missing else 'nothing sized it'}")
        k = min(seeds_of[arm] for arm in claim.a.arms + claim.b.arms)
        if k < row["seeds"]:
            raise SystemExit(f"{name}: its arms train {k} seeds, fewer than the {row['seeds']} it was sized for")
        short = row["short"]
        if claim.at_least:  # sized at one-sided 95%, judged at amendment 1's 97.5%: its power there, if short
            joint = prod(not_worse_power(k, b, MARGIN, 1 - NOT_WORSE_LEVEL) for b in row["bounds"].values())
            short = round(joint, 2) if joint < POWER else short
        note = (tuple(sorted(row["bounds"].items())), short, row["smallest"])
        seeds = tuple(range(FIRST_SEED, FIRST_SEED + k))
        out[name] = replace(claim, seeds=seeds, group="", sized=note, not_worse_level=NOT_WORSE_LEVEL)
    five = tuple(range(FIRST_SEED, FIRST_SEED + FIG7_ONLY))
    reported = [c for c in claims_plan.REPORTED if c.name != "F3 at 25%"]  # judged now, as T2a 25%
    sweeps = {c.name for c in SWEEP_CLAIMS}
    return Run(
        claims=[c for n, c in out.items() if n not in sweeps],
        sweeps=[c for n, c in out.items() if n in sweeps],
        reported=[replace(c, seeds=five) for c in reported],
        plan="../RERUN_PLAN.md",
        code=f"run on commit {CODE}, today's code (lab/results/claims/RERUN.md names it)",
        table2=(0.0, 0.25, 0.5),
        per_row=True,
        command="python -m lab.claims report",
    )


def run(args):
    """lab.claims.run's way (one job per setting, side by side) over the rerun's order, into RESULTS."""
    import demo
    from lab.claims_plan import DATA, TRANSFER
    from lab.claims_setting import run_one
    from tools import synthetic

    synthetic.ensure(DATA)
    synthetic.ensure(TRANSFER)
    if not NEED:
        raise SystemExit("lab/claims_rerun.py: NEED is empty; paste it from `python -m lab.claims_rerun seeds`")
    todo = [s for s in order(NEED) if args.levels is None or s[1] in args.levels]
    demo.side_by_side(run_one, [(DATA, args.runs, str(RESULTS), s) for s in todo], args.jobs)


def show(sized):
    head = "| claim | endpoint | measured on | d | d's 80% lower bound | SD | SD's upper 80% bound | seeds |"
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---|"]
    for name, (_, r) in sized.items():
        if r is None:
            lines.append(f"| {name} | - | - | - | - | - | - | {HI} (nothing measured it) |")
            continue
        short = "" if r["short"] is None else f"; short: power at {HI} {r['short']:.2f}"
        short += "" if r["smallest"] is None else f", finds {100 * r['smallest']:.1f} points"
        lines.append(
            f"| {name} | {r['endpoint']} | {r['n']} seeds | {100 * r['d']:+.1f} | {100 * r['low']:.1f} | "
            f"{100 * r['s']:.1f} | {100 * r['bound']:.1f} | {r['seeds']}{short} |"
        )
    lines += ["", "| level | branch: seeds |", "|---|---|"]
    for level, methods in sorted(levels(sized).items(), key=lambda kv: str(kv[0])):
        lines.append(f"| {level} | " + ", ".join(f"{m}: {k}" for m, k in sorted(methods.items())) + " |")
    return "\n".join(lines)


def status(folder=RESULTS, need=None):
    """(lines, missing): each planned setting of order(NEED) with what `folder` holds of it (its branches, and
    at 50% every value of its sweeps), finished or not; `missing` counts the settings not yet whole."""
    from demo import setting_name
    from lab.claims_plan import SWEEP_VALUES, planned

    def rows(sub, seed, level):  # the file `run` writes, refused if another recipe made it
        path = Path(folder) / sub / f"{setting_name(seed, level)}.json"
        return set(planned(path)["rows"]) if path.exists() else set()

    lines, missing = [], 0
    for seed, level, methods, knobs in order(need or NEED):
        lacking = [m for m in methods if m not in rows("settings", seed, level)]
        for knob in knobs:
            lacking += [f"{knob} {v}" for v in SWEEP_VALUES[knob] if v not in rows(f"{knob}_settings", seed, level)]
        missing += bool(lacking)
        lines.append(f"- {seed} at {level:.0%}: " + (f"lacks {', '.join(lacking)}" if lacking else "finished"))
    return lines, missing


def changes(run=None, first=FIRST, folder=RESULTS):
    """[(claim, first run's verdict, rerun's verdict)] for every claim both runs judge whose verdict word changed
    (holds, contradicted, not shown, ...; a claim still incomplete in the rerun counts as changed): the lines
    lab/results/HISTORY.md gains once the rerun is whole (RERUN.md, step 4), each to be given its why by hand."""
    from lab import claims_report as cr

    run = run or claims_of()

    def verdicts(claims, where):
        res = cr.load(where) | cr.load_sweeps(where)
        return {c.name: cr.judge(c, res)["verdict"] for c in claims}

    old = verdicts(CLAIMS + SWEEP_CLAIMS, first)
    new = verdicts(run.claims + run.sweeps, folder)
    word = lambda v: v.split(" (")[0].split(";")[0]  # noqa: E731  "holds (1-shot); ..." -> "holds"
    return [(n, old[n], new[n]) for n in new if n in old and word(old[n]) != word(new[n])]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["seeds", "run", "status", "changes"])
    p.add_argument("--first", default=str(FIRST), help="the first claims run's results folder")
    p.add_argument("--check", default=str(CHECK), help="R0's 8-seed check's settings")
    p.add_argument("--runs", default="runs/claims_rerun")
    p.add_argument("--jobs", type=int, default=1, help="settings side by side, one thread each (as lab.claims)")
    p.add_argument("--levels", type=float, nargs="+", help="`run`: only these injected shares' settings")
    a = p.parse_args(argv)
    if a.action == "run":
        run(a)
        return
    if a.action == "changes":
        rows = changes()
        print("| claim | first run (seeds 400-414) | rerun |\n|---|---|---|")
        print("\n".join(f"| {n} | {was} | {now} |" for n, was, now in rows) or "no verdict changed")
        return
    if a.action == "status":
        lines, missing = status()
        print("\n".join(lines) + f"\n{len(lines) - missing} of {len(lines)} settings finished ({RESULTS})")
        return
    sized = sizing(Path(a.first), Path(a.check))
    print(show(sized))
    need = levels(sized)
    print("\nNEED = " + repr({k: dict(sorted(v.items())) for k, v in need.items()}))
    plan = order(need)
    print(f"\n{len(plan)} settings, {sum(len(m) for _, _, m, _ in plan)} branches, seeds {plan[0][0]}-{plan[-1][0]}:")
    for seed, level, methods, knobs in plan:
        print(f"- {seed} at {level:.0%}: {', '.join(methods)}" + (f"; sweeps {', '.join(knobs)}" if knobs else ""))


if __name__ == "__main__":
    main()
