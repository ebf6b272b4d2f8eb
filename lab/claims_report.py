"""The report of `python -m lab.claims report`: Fig. 7, Table 1 and Table 2 from the finished
settings of one claims run (the rerun's in lab/results/claims/rerun/settings/, the first run's in
lab/results/claims/settings/), and each claim of its plan judged as the plan says:
paired differences over seeds on the two primary endpoints (in-domain 1-shot and transfer 1-shot), two-sided
paired t-tests, Holm's step-down over the two at family-wise 0.05 (lab/statistics.py). The 5-shots and
R@1 are shown, not judged.

    python -m lab.claims report     # writes lab/results/claims/rerun/{fig7,table1,table2,VERDICT,sweeps}.md, fig7*.png

Table 2's fine-tune column joins table2.md from finetune.jsonl (lab/claims_finetune.py), and
the README's summary and CLAIMS.md's claims section are remade from the same numbers
(lab/claims_docs.py, which claims.py calls after this). The claims modules import in one
direction: claims -> claims_docs -> claims_report -> claims_plan (the claims as data), and
claims_finetune -> claims.
"""

import json
from pathlib import Path
from statistics import mean

import numpy as np

from lab import figures
from lab.claims_plan import (  # noqa: F401  (claims_report.X: the judge's readers)
    BOUND,
    CEILING,
    CHANCE,
    CLAIMS,
    FIG7_ONLY,
    FIRST_RUN,
    FIRST_SEED,
    FLOOR,
    MARGIN,
    PRIMARY,
    RECIPE,
    REPORTED,
    SEEDS,
    SHORT,
    SHOWN,
    SWEEP,
    SWEEP_CLAIMS,
    SWEEP_VALUES,
    Claim,
    at,
    gain,
    load,
    planned,
)
from lab.statistics import ALPHA, holm, interval, t_test
from tools import demo_report


def cell(claim, res, metric):
    """'mean [95% CI]' of A - B in points, paired or Welch's as the claim is; '-' with nothing."""
    a, b = claim.sides(res, metric)
    if not a:
        return "-"
    if len(a) == 1:
        return f"{100 * (a[0] - b[0]):+.1f}"
    m, lo, hi = (100 * x for x in interval(a, b, claim.paired))
    return f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]"


def at_ceiling(values):
    """A baseline with no room for a gain: at CEILING or above on average, or on more than half the
    claim's seeds (PLAN.md: the ceiling is judged per seed as well as on average)."""
    return bool(values) and (mean(values) >= CEILING or 2 * sum(v >= CEILING for v in values) > len(values))


def judge(claim, res):
    """{'verdict', 'cells': {metric: text}, 'n', 'p': {endpoint: Holm p}, 'claim_p': the claim's smallest
    Holm p in its own direction or None}; no verdict while the plan's seeds are not all there.

    Verdicts (PLAN.md, verdict rules): an endpoint whose baseline is at its ceiling (at_ceiling), or
    whose compared sides all average within 3 points of chance (Claim.at_floor), is left out
    ("untestable here (ceiling)" or "(floor)" when none is left). 'A > B': holds / contradicted / not shown by Holm
    over the tested endpoints. 'A >= B': holds (not worse) when the one-sided lower bound at the claim's
    not_worse_level (the first run's 95%; the rerun's 97.5%, the printed 95% interval's lower end) is above
    -MARGIN on every tested endpoint, worse when the upper bound at that level is below -MARGIN on one,
    else inconclusive."""
    sides = {m: claim.sides(res, m) for m in PRIMARY + SHOWN}
    n = min(len(sides[m][0]) for m in PRIMARY)  # a seed missing either endpoint is not finished
    cells = {m: cell(claim, res, m) for m in PRIMARY + SHOWN}
    out = {"cells": cells, "n": n, "p": {}, "claim_p": None}
    if n < len(claim.seeds):
        return {**out, "verdict": f"incomplete ({n} of {len(claim.seeds)} seeds)"}
    ceiling = [m for m in PRIMARY if at_ceiling(claim.base(res, m))]
    floor = [m for m in PRIMARY if m not in ceiling and claim.at_floor(res, m)]
    tested = [m for m in PRIMARY if m not in ceiling + floor]
    left_out = (("ceiling", ceiling), ("floor", floor))
    untestable = "untestable here (" + ", ".join(w for w, ms in left_out if ms) + ")" if not tested else None
    ceiling_note = "".join(f"; {', '.join(ms)} at {what}" for what, ms in left_out if ms)
    if claim.at_least:
        bounds = {m: interval(*sides[m], claim.paired, level=claim.not_worse_level, sided=1) for m in PRIMARY}
        worse = [m for m in PRIMARY if bounds[m][2] < -MARGIN]  # a left-out endpoint counts against it too
        if worse:
            verdict = "worse (" + ", ".join(worse) + ")"
        elif untestable:
            return {**out, "verdict": untestable}
        elif all(bounds[m][1] > -MARGIN for m in tested):
            verdict = f"holds (not worse by {100 * MARGIN:g} points)"
        else:
            verdict = "inconclusive"
        return {**out, "verdict": verdict + ceiling_note + power_note(claim, sides, tested, verdict)}
    # every endpoint is tested for a contradiction, one at its ceiling or floor too (a significant loss
    # there is still a loss); only the tested ones can make a claim hold
    raw = [t_test(*sides[m]) if not claim.paired else t_test(np.subtract(*sides[m])) for m in PRIMARY]
    p = dict(zip(PRIMARY, holm(raw)))
    diffs = {m: mean(sides[m][0]) - mean(sides[m][1]) for m in PRIMARY}
    up = [m for m in tested if p[m] < ALPHA and diffs[m] > 0]
    down = [m for m in PRIMARY if p[m] < ALPHA and diffs[m] < 0]
    if down:
        verdict = "contradicted (" + ", ".join(down) + ")"
    elif untestable:
        return {**out, "verdict": untestable, "p": p, "claim_p": 1.0}
    else:
        verdict = "holds (" + ", ".join(up) + ")" if up else "not shown"
    positive = [p[m] for m in tested if diffs[m] > 0]
    note = ceiling_note + power_note(claim, sides, tested, verdict)
    return {**out, "verdict": verdict + note, "p": p, "claim_p": min(positive) if positive else 1.0}


def power_note(claim, sides, tested, verdict):
    """PLAN.md's notes on power: a 'not shown' or 'inconclusive' of a group that 15 seeds could not power
    reads as underpowered; and where the SD seen on an endpoint exceeds the one the seeds were sized on,
    the claim had less power than planned. A claim sized on its own (the rerun) holds each endpoint's
    planning SD, and only the endpoints its sizing measured are checked, each against its own."""
    if claim.sized:
        bounds, short, finds = claim.sized
        bounds = dict(bounds)
    else:
        bound, short, finds = BOUND.get(claim.group), SHORT.get(claim.group), None
        bounds = {m: bound for m in PRIMARY} if bound else {}
    note = ""
    if short is not None and verdict.startswith(("not shown", "inconclusive")):
        finds = f", 15 seeds find {100 * finds:.1f} points" if finds else ""
        note += f"; underpowered (planned power {short:.2f}{finds})"
    if bounds and tested and len(sides[tested[0]][0]) > 1:
        over = []
        for m in (m for m in tested if m in bounds):
            x, y = sides[m]
            sd = np.std(np.subtract(x, y), ddof=1) if claim.paired else np.hypot(np.std(x, ddof=1), np.std(y, ddof=1))
            own = f" (planned {100 * bounds[m]:.1f})" if claim.sized else ""
            over += [f"{m} {100 * sd:.1f}{own}"] if sd > bounds[m] else []
        if over:
            planned = "" if claim.sized else f" {100 * bounds[tested[0]]:.1f}"
            note += f"; SD seen above the planned{planned}: " + ", ".join(over)
    return note


def family_wise(claims, res):
    """Holm across every 'A > B' claim of the plan, a family fixed in advance: {name: adjusted p}. Each
    claim enters with its smallest within-claim Holm p in the claimed direction; one without a verdict
    yet, untestable, or contradicted enters with p = 1, so the family never shrinks with the data."""
    judged = {c.name: judge(c, res) for c in claims if not c.at_least}
    ps = {
        k: j["claim_p"] if j["claim_p"] is not None and not j["verdict"].startswith("contradicted") else 1.0
        for k, j in judged.items()
    }
    return dict(zip(ps, holm(list(ps.values()))))


def claims_table(claims, res, judged=True, family=None, seeds=False):
    """One row per claim: its differences, and where judged its Holm p, verdict and family-wise view. seeds:
    a column with how many seeds each claim is judged on (the rerun's claims have their own counts)."""
    head = (
        "| claim | "
        + ("seeds | " if seeds else "")
        + " | ".join(f"Δ {m}" for m in PRIMARY + SHOWN)
        + (f" | Holm p ({', '.join(PRIMARY)}) | verdict | family-wise |" if judged else " |")
    )
    lines = [head, "|---|" + "---:|" * (len(PRIMARY) + len(SHOWN) + seeds) + ("---|---|---|" if judged else "")]
    for c in claims:
        j = judge(c, res)
        cells = (f"{len(c.seeds)} | " if seeds else "") + " | ".join(j["cells"][m] for m in PRIMARY + SHOWN)
        if judged:
            ps = ", ".join(f"{j['p'][m]:.3f}" if m in j["p"] else "-" for m in PRIMARY) if j["p"] else "-"
            fw = "-"
            if (
                family
                and c.name in family
                and not j["verdict"].startswith(("incomplete", "contradicted", "untestable"))
            ):
                fw = f"{'holds' if family[c.name] < ALPHA else 'not shown'} (p {family[c.name]:.3f})"
            lines.append(f"| **{c.name}** {c.text} | {cells} | {ps} | {j['verdict']} | {fw} |")
        else:
            lines.append(f"| {c.name}: {c.text} | {cells} |")
    return "\n".join(lines)


def seed_span(seeds):
    """'1500-1504' for a run of consecutive seeds, else the list: a table's seeds, never implied."""
    run = len(seeds) > 1 and seeds == list(range(seeds[0], seeds[-1] + 1))
    return f"{seeds[0]}-{seeds[-1]}" if run else ", ".join(map(str, seeds))


def method_table(res, level, methods, per_row=False):
    """Means ± sample SD over the seeds that every listed method with any result has (one set of seeds
    for every row), and the bank AUROC of each branch. per_row: each row over every seed it has, with a
    seeds column (the rerun trains each branch on its own count, so a common set would drop most)."""
    at_level = res.get(level, {})
    present = [m for m in methods if any(m in rows for rows in at_level.values())]
    common = sorted(s for s, rows in at_level.items() if all(m in rows for m in present))
    cols = SHOWN + PRIMARY + ("AUROC",)
    lines = [
        f"{level:.0%} injected, " + ("each row over its own seeds:" if per_row else f"seeds {common}:"),
        "",
        "| method | " + ("seeds | " if per_row else "") + " | ".join(cols) + " |",
        "|---|" + "---:|" * (len(cols) + per_row),
    ]
    for m in present:
        seeds = sorted(s for s, rows in at_level.items() if m in rows) if per_row else common
        rows = [at_level[s][m] for s in seeds]
        if rows:
            span = f"{len(seeds)}: {seed_span(seeds)} | " if per_row else ""
            cells = " | ".join(demo_report.fmt([r[c] for r in rows]) for c in cols)
            lines.append(f"| {demo_report.method_name(m)} | {span}{cells} |")
    return "\n".join(lines)


def finetune_results(folder):
    """{(level, method): {seed: test accuracy}} of finetune.jsonl (lab/claims_finetune.py), and
    its first line (protocol, device); ({}, None) where the column was not run."""
    path = Path(folder) / "finetune.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    acc = {}
    for r in rows:
        acc.setdefault((r["faulty"], r["method"]), {})[r["seed"]] = r["test_acc"]
    return acc, (rows[0] if rows else None)


def finetune_diffs(acc, level, method, base="xid"):
    ref = acc.get((level, base), {})
    return [acc[(level, method)][s] - ref[s] for s in sorted(acc.get((level, method), {})) if s in ref]


def finetune_table(folder, base="xid"):
    """Table 2's fine-tune column: test accuracy per method, mean ± std over seeds, and the paired
    difference against xID with its 95% interval. Reported, not judged (PLAN.md's amendment)."""
    acc, first = finetune_results(folder)
    if not acc:
        return "Fine-tune column: not run (it needs a GPU: about 33 min per checkpoint on 2 cores)."
    lines = [
        f"Fine-tune column (Sec. 5.1: {first['protocol']['text']}), on {first['device']}; reported, not "
        "judged. Top-1 of video-level predictions on the 300 test videos, in %:",
        "",
        "| level | method | seeds | fine-tune | Δ vs xID [95% CI] |",
        "|---|---|---|---:|---:|",
    ]
    for level, method in sorted(acc, key=lambda k: (k[0], TABLE2_ORDER.index(k[1]))):
        d = finetune_diffs(acc, level, method, base) if method != base else []
        lines.append(
            f"| {level:.0%} | {demo_report.method_name(method)} | {sorted(acc[(level, method)])} | "
            f"{demo_report.fmt(list(acc[(level, method)].values()))} | {demo_report.fmt_diff(d) if d else '-'} |"
        )
    return "\n".join(lines)


def load_sweeps(folder):
    """{(knob, level): {seed: {value: row}}} of the sweeps' finished values, keyed beside load()'s levels."""
    out = {}
    for f in sorted(Path(folder).glob("*_settings/seed*.json")):
        if f.parent.name != "settings":
            p = planned(f)
            out.setdefault((f.parent.name[: -len("_settings")], p["faulty"]), {})[p["seed"]] = p["rows"]
    return out


def sweeps_report(folder, plan="PLAN.md", command=FIRST_RUN.command, out=None):
    """The appendix's sweeps at 50% over the seeds whose every value has finished: the sweep's own tables
    (S1 and S2 are judged with the other claims, from load_sweeps), into `out` (default: `folder`)."""
    from lab import sweep

    text = [
        "# The appendix's sweeps on the adopted regime\n",
        f"Made by `{command}` from `delta_settings/` and `lambda_settings/`, over the "
        f"seeds whose every value has finished. {plan}'s S1 and S2 are judged in [VERDICT.md](VERDICT.md) once "
        "all their seeds are in; S3 (the best lambda) is read off these tables. lambda 0 is xID exactly.\n",
    ]
    for knob, values in SWEEP_VALUES.items():
        files = sorted((Path(folder) / f"{knob}_settings").glob("seed*_faulty50.json"))
        points = [p for p in map(planned, files) if all(v in p["rows"] for v in ["xid", *values])]
        text.append(f"## {knob} at 50% injected: seeds {[p['seed'] for p in points]}\n")
        text.append(sweep.tables(points, knob, list(values), 0.5) if points else "nothing finished yet")
        text.append("")
    (Path(out or folder) / "sweeps.md").write_text("\n".join(text) + "\n")


TABLE2_ORDER = ["xid", "weighted", "soft", "robust", "oracle"]

# The paper's gains over xID (fine-tuning accuracy, UCF / HMDB) as shares of the oracle targets' gain:
# Table 1 (oracle 73.6 / 45.4, xID 68.0 / 39.0) and Table 2 (which has no oracle row: Table 1's)
PAPER_GAIN = {
    "soft:bootstrap": (1.2, 1.5),
    "soft:neighbor": (2.5, 2.2),
    "soft:swapped": (2.0, 2.3),
    "soft": (2.3, 2.5),
    "weighted": (1.7, 1.1),
    "robust": (3.6, 2.9),
}
PAPER_ORACLE = (5.6, 6.4)


def oracle_shares(res):
    """Each strategy's gain over xID at 0% as a share of the oracle targets' gain, here (per primary
    endpoint, ratio of the means over the seeds every row has) beside the paper's (UCF, HMDB)."""
    rows = res.get(0.0, {})
    seeds = [s for s, r in rows.items() if all(m in r for m in ["xid", "soft:oracle", *PAPER_GAIN])]
    head = " | ".join(f"here, {m}" for m in PRIMARY)
    lines = [
        f"Share of the oracle targets' gain over xID at 0%, seeds {seeds} (here) and the paper's Tables 1-2 (UCF, "
        "HMDB fine-tuning; Table 2 has no oracle row, so Table 1's). A share of 1 recovers all of it:",
        "",
        f"| method | {head} | paper, UCF | paper, HMDB |",
        "|---|---:|---:|---:|---:|",
    ]
    for m, paper in PAPER_GAIN.items():
        here = []
        for e in PRIMARY:
            won = mean(rows[s][m][e] - rows[s]["xid"][e] for s in seeds) if seeds else None
            oracle = mean(rows[s]["soft:oracle"][e] - rows[s]["xid"][e] for s in seeds) if seeds else None
            here.append(f"{won / oracle:.2f}" if seeds and oracle > 0 else "-")
        cells = " | ".join(here + [f"{g / o:.2f}" for g, o in zip(paper, PAPER_ORACLE)])
        lines.append(f"| {demo_report.method_name(m)} | {cells} |")
    return "\n".join(lines)


def rests_on():
    """The set and recipe every claims file rests on, from the plan's RECIPE."""
    r = RECIPE
    return (
        f"Set and recipe: `{r['data']}` (`make demo`'s set), `--preset demo`, {r['warmup_epochs']} xID warm-up "
        f"epochs, then {r['epochs']}-epoch branches per method; endpoints: in-domain 1-shot and transfer 1-shot "
        f"on `{r['transfer']}` (classes pre-training never saw), {r['eval_clips']} clips per video, "
        f"{r['trials']} few-shot trials."
    )


def not_worse_rule(run):
    """The 'not worse' bound of a run's claims in words: one level for every 'A >= B' claim of the run."""
    (level,) = {c.not_worse_level for c in run.claims + run.sweeps if c.at_least}
    if level == 0.975:
        return "lower end of the 95% interval printed (a one-sided 97.5% bound)"
    return f"one-sided {100 * level:g}% lower bound"


def main(folder, run=FIRST_RUN, out=None):
    """Every report file of one claims run (claims_plan.Run: the first, or lab/claims_rerun's) into `out`
    (default: `folder`), from its settings in `folder` alone."""
    folder, out = Path(folder), Path(out or folder)
    out.mkdir(parents=True, exist_ok=True)
    res = load(folder)
    wide = {**res, **load_sweeps(folder)}  # the sweeps' settings, keyed beside the levels
    levels = sorted(res)
    fig7 = ["xid", "weighted", "oracle"]
    text = [
        "# Fig. 7 on the adopted regime\n",
        f"Made by `{run.command}` from `settings/`; the plan: [{Path(run.plan).name}]({run.plan}). "
        "Metrics in %, mean ± sample SD over seeds; AUROC: the bank scores of the branch's final bank against "
        "the known faulty positives (natural and injected). At 0% Oracle-xID is xID."
        + (
            " Each figure's point is over the seeds its three methods share; the tables give each row its own.\n"
            if run.per_row
            else "\n"
        ),
    ]
    text += [method_table(res, lv, fig7, run.per_row) + "\n" for lv in levels]
    shared = {lv: [s for s in sorted(res[lv]) if all(m in res[lv][s] for m in fig7)] for lv in levels}
    for metric in PRIMARY + ("R@5",) if levels else ():  # each level's point on the seeds its three methods share
        curves = {
            demo_report.method_name(m): {lv: [res[lv][s][m][metric] for s in shared[lv]] for lv in levels} for m in fig7
        }
        png = f"fig7_{metric.replace('@', '').replace('-', '').replace(' ', '_')}.png"
        figures.noisy(levels, curves, metric, out / png, baseline="xID")
        text.append(f"![Fig. 7, {metric}]({png})")
    (out / "fig7.md").write_text("\n".join(text) + "\n")
    (out / "table2.md").write_text(
        "# Table 2 on the adopted regime\n\n"
        + "\n\n".join(
            [method_table(res, lv, TABLE2_ORDER, run.per_row) for lv in run.table2 if lv in res]
            + [finetune_table(folder)]
        )
        + "\n"
    )
    t1 = ["xid", "soft:bootstrap", "soft:neighbor", "soft:swapped", "soft", "soft:oracle"]
    (out / "table1.md").write_text(
        "# Table 1 on the adopted regime (0% injected; `soft` is CCP)\n\n"
        + (method_table(res, 0.0, t1, run.per_row) + "\n\n" + oracle_shares(res) if 0.0 in res else "no 0% setting yet")
        + "\n"
    )
    family = family_wise(run.claims + run.sweeps, wide)
    verdict = [
        f"# The claims, judged by [{Path(run.plan).name}]({run.plan})\n",
        rests_on() + f" Code: {run.code}.\n",
        "Differences in points, mean [95% t-interval] over "
        + ("each claim's seeds (the seeds column; 1500 on)" if run.per_row else "the plan's seeds")
        + ": paired by seed where both sides "
        "share a warm-up, Welch's unpaired interval and test where they do not (F1, F3b). Holm-adjusted p "
        "over the two primary endpoints; a claim 'A > B' holds when one endpoint survives Holm with a "
        "positive mean and none with a negative one. An endpoint whose baseline averages "
        f"{100 * CEILING:g}% or more (on average or on most seeds) is untestable here (ceiling), and one whose "
        f"compared sides all average below {100 * FLOOR:g}% (chance + 3) is untestable here (floor); either is "
        f"left out. 'Not worse' holds when the {not_worse_rule(run)} is above -{100 * MARGIN:g} points on both "
        f"endpoints, is 'worse' when the upper bound is below -{100 * MARGIN:g} on one, and is 'inconclusive' "
        "otherwise. The 5-shots and R@1 "
        "are shown, not judged. The last column is the family-wise view: Holm across all "
        f"{len(family)} judged 'A > B' claims, each entering with its smallest within-claim p in its own "
        "direction.\n",
        claims_table(run.claims, res, family=family, seeds=run.per_row),
        "\nReported, not judged:\n",
        claims_table(run.reported, wide, judged=False, seeds=run.per_row),
        f"\nThe appendix's sweeps ({Path(run.plan).name}'s S1 and S2; tables: [sweeps.md](sweeps.md)):\n",
        claims_table(run.sweeps, wide, family=family, seeds=run.per_row),
        "\nTables: [fig7.md](fig7.md), [table2.md](table2.md), [table1.md](table1.md).",
        "",
    ]
    (out / "VERDICT.md").write_text("\n".join(verdict))
    print("\n".join(verdict))
    sweeps_report(folder, Path(run.plan).name, run.command, out)
    return res
