"""The rerun's power as it came out (CLAIMS.md, "Where the spread came out wider than planned"): each claim's
planned endpoints (lab/claims_rerun.py's sizing, RERUN_PLAN.md) against the SD the rerun saw on them, per
injected share against the 1 in 5 that the planning bound (an upper 80% bound) lets through by chance, and
each claim with a wider endpoint: its power for the effect it was sized on, at the planned SD and at the SD
seen, beside its verdict.

    python -m lab.claims_power    # prints the block; `python -m lab.claims report` writes it into CLAIMS.md

Tests: tests/test_claims_rerun.py
"""

import argparse
from math import prod
from pathlib import Path

from scipy import stats

from lab import claims_rerun
from lab.claims_rerun import ALPHA_CLAIM, MARGIN, NOT_WORSE_LEVEL, POWER, RESULTS
from lab.statistics import not_worse_power, power


def arm_level(claim):
    """The injected share a claim's arms read ("0% vs 50%" for F1 and F3b, which compare two warm-ups)."""
    shares = sorted({lv[1] if isinstance(lv, tuple) else lv for lv, _ in claim.a.arms + claim.b.arms})
    return " vs ".join(f"{x:.0%}" for x in shares)


def chance_wider(n_old, n_new, level=0.8):
    """The chance that an SD measured anew on n_new values exceeds the upper `level` bound set on n_old, when
    the spread has not changed: (s_new / s_old)^2 is F(n_new - 1, n_old - 1), and the bound is
    s_old sqrt((n_old - 1) / chi2_{1-level}(n_old - 1)) (lab.statistics.sd_bound). A little above 1 - level:
    the bound was itself set on a sample."""
    c = (n_old - 1) / stats.chi2.ppf(1 - level, n_old - 1)
    return float(stats.f.sf(c, n_new - 1, n_old - 1))


def at_least_as_many(chances, k):
    """P(k or more of independent events with these chances): the Poisson-binomial tail, by convolution."""
    dist = [1.0]
    for p in chances:
        dist = [a * (1 - p) + b * p for a, b in zip(dist + [0.0], [0.0] + dist)]
    return sum(dist[k:])


def power_seen(folder=RESULTS, run=None, sized=None):
    """Each claim's planned endpoints against the SD the rerun saw on them: (rows, {level: [(wider, chance)]}),
    chance being chance_wider()'s for that endpoint. A row per claim with an endpoint wider than its planning
    bound (an upper 80% bound): its seeds, the endpoint, SD seen and planned, and its power with the planned
    effect, at the planned SD and at the SD seen (S1: the joint power of 'not worse' at the amendment's 97.5%,
    when the truth is 0), beside its verdict."""
    from lab import claims_report as cr

    sized = sized or claims_rerun.sizing()  # looked up when called: a test may stand in for either
    run = run or claims_rerun.claims_of(sized)
    res = cr.load(folder) | cr.load_sweeps(folder)
    rows, counts = [], {}
    for claim in run.claims + run.sweeps:
        plan, n = sized[claim.name][1], len(claim.seeds)
        bounds = dict(claim.sized[0])
        seen = {m: claims_rerun.measured(claim, res, m, every=False)[1] for m in bounds}  # the SD, as sized
        wider = [m for m in bounds if seen[m] > bounds[m]]
        level = arm_level(claim)
        n_seen = len(claim.sides(res, "1-shot")[0])
        counts.setdefault(level, []).extend((m in wider, chance_wider(plan["n"], n_seen)) for m in bounds)
        if not wider:
            continue
        if claim.at_least:
            alpha = 1 - NOT_WORSE_LEVEL
            planned = prod(not_worse_power(n, bounds[m], MARGIN, alpha) for m in bounds)
            now = prod(not_worse_power(n, seen[m], MARGIN, alpha) for m in bounds)
            effect = "0 (margin 2)"
        else:
            m = plan["endpoint"]
            planned, now = (power(n, sd, plan["low"], ALPHA_CLAIM) for sd in (bounds[m], seen[m]))
            effect = f"{100 * plan['low']:.1f} ({m})"
        verdict = cr.judge(claim, res)["verdict"].split(";")[0]
        moved = "lower" if now < planned else "higher"
        reading = (
            f"short of 0.8 as planned, {moved} at the SD seen"
            if planned < POWER
            else "underpowered: below the plan's 0.8 at the SD seen"
            if now < POWER
            else f"powered as planned, {moved} at the SD seen"
        )
        rows.append(
            f"| {claim.name} | {level} | {n} | "
            + ", ".join(f"{m} {100 * seen[m]:.2f} > {100 * bounds[m]:.2f}" for m in wider)
            + f" | {effect} | {planned:.3f} | {now:.3f} | {verdict} | {reading} |"
        )
    return rows, counts


def show_power(rows, counts):
    """power_seen() as CLAIMS.md's block: per share, the endpoints wider than their bound against the number
    chance gives (each endpoint's chance_wider(), the endpoints taken as independent), then the rows."""
    lines = [
        "| injected share | planned endpoints | wider than their bound | expected by chance | P(as many or more) |",
        "|---|---:|---:|---:|---:|",
    ]
    for level, ends in [*sorted(counts.items()), ("all", [e for v in counts.values() for e in v])]:
        over, chances = sum(w for w, _ in ends), [c for _, c in ends]
        lines.append(f"| {level} | {len(ends)} | {over} | {sum(chances):.1f} | {at_least_as_many(chances, over):.3f} |")
    lines += [
        "",
        "| claim | injected share | seeds | endpoint: SD seen > planned bound (points) | effect planned for "
        "(points) | power planned | power at the SD seen | verdict | its power |",
        "|---|---|---:|---|---|---:|---:|---|---|",
        *rows,
    ]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", default=str(RESULTS), help="the rerun's results folder")
    a = p.parse_args(argv)
    print(show_power(*power_seen(Path(a.results))))


if __name__ == "__main__":
    main()
