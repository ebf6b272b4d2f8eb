"""The faulty-negative half of the paper on a set where it can be seen: Table 1 (Sec. 5.3) and Table 2's
soft-target rows (Sec. 5.4) at 0% injected on the screened set data/synth_cue_d, claims N1-N5 of
results/negatives/PLAN.md, judged by the rules of results/claims/PLAN.md (experiments/claims_report.py).

Why a second set: on data/synth2000 the class is almost all that picture and sound share, so same-class
negatives cost xID nothing and even the oracle's soft targets gain nothing (results/negatives/SCREEN.md).
D adds a weak per-video cue (`--instance-cue 0.3`), which makes instance discrimination fight the class.

    python -m experiments.negatives run --jobs 2   # seeds 0-4, each: 1 warm-up, 8 branches; resumes
    python -m experiments.negatives report         # results/negatives/{table1,table2,VERDICT}.md

Each seed is `make demo`'s recipe (25 warm-up epochs of xID, 6 per branch, experiments/claims.py's
regime) with Table 2's four methods and Table 1's four other targets, all from one warm-up. N5 (lambda 0.5 >
lambda 0) needs no branch of its own: eqs. (8)-(9) at lambda 0 are xID's one-hot targets, so it is N2's
CCP claim (PLAN.md's amendment). A finished seed is written to results/negatives/settings/ (commit it:
runs/ is not kept), and `run` skips it next time. N4 at 50% reads results/claims/settings/ (data/synth2000),
where the faulty-positive claims ran.
"""

import argparse
import sys
from pathlib import Path

from experiments import claims, claims_docs, claims_report, demo, demo_report, jobs
from experiments.claims_report import claims_table, diff_claim, family_wise, method_table

DATA = "data/synth_cue_d"
RESULTS = Path("results/negatives")
POSITIVES = Path("results/claims")  # the 50% settings on data/synth2000 (N4 at 50%)
SEEDS = tuple(range(5))
METHODS = claims.TABLE2 + claims.TABLE1  # xid, weighted, soft (CCP), robust, then Table 1's other targets
AT50 = ("synth2000", 0.5)  # the key under which results/claims' 50% settings join this report


def run_seed(args, seed):
    """One seed: the warm-up and METHODS' branches (demo.run_setting)."""
    demo.run_setting(claims.demo_args(args.results, METHODS, args.data, args.runs), seed, 0.0)


def run(args):
    demo.ensure_data(args.data)
    jobs.side_by_side(run_seed, [(args, seed) for seed in SEEDS], args.jobs)


def _claims():
    """N1-N5 of PLAN.md, in its order."""
    zero = 0.0
    out = [diff_claim("N1", "Soft-xID, oracle targets > xID at 0%", SEEDS, zero, "soft:oracle", zero, "xid")]
    for t, name in (("soft:bootstrap", "bootstrap"), ("soft:swapped", "swapped"), ("soft:neighbor", "neighbour")):
        out.append(diff_claim(f"N2 {name}", f"Soft-xID, {name} targets > xID at 0%", SEEDS, zero, t, zero, "xid"))
    out.append(diff_claim("N2 CCP", "Soft-xID, CCP targets > xID at 0%", SEEDS, zero, "soft", zero, "xid"))
    for t, name in (("soft", "CCP"), ("soft:neighbor", "neighbour"), ("soft:swapped", "swapped")):
        out.append(
            diff_claim(f"N3 {name}", f"{name} > bootstrap targets at 0%", SEEDS, zero, t, zero, "soft:bootstrap")
        )
    for level, label in ((zero, "0% (D)"), (AT50, "50% (synth2000)")):
        out += [
            diff_claim(f"N4 W {label}", f"Robust > Weighted at {label}", SEEDS, level, "robust", level, "weighted"),
            diff_claim(f"N4 S {label}", f"Robust > Soft at {label}", SEEDS, level, "robust", level, "soft"),
        ]
    return out  # N5 is "N2 CCP": Soft-xID at lambda 0 is xID (eqs. (8)-(9); PLAN.md's amendment)


CLAIMS = _claims()
REPORTED = [  # PLAN.md: shown with their intervals, not judged
    diff_claim(f"{m} - xID", f"{demo_report.method_name(m)} - xID at 0% (D)", SEEDS, 0.0, m, 0.0, "xid")
    for m in ("weighted", "robust")
]


def load(folder, positives=POSITIVES):
    """This set's settings, with results/claims' 50% settings under AT50."""
    res = claims_report.load(folder)
    other = claims_report.load(positives) if (Path(positives) / "settings").is_dir() else {}
    if 0.5 in other:
        res[AT50] = other[0.5]
    return res


def report(folder, positives=POSITIVES):
    folder = Path(folder)
    res = load(folder, positives)
    t1 = ["xid", "soft:bootstrap", "soft:neighbor", "soft:swapped", "soft", "soft:oracle"]
    source = (
        f"Made by `python -m experiments.negatives report` from `settings/` on `{DATA}`; the plan: [PLAN.md](PLAN.md)."
    )
    (folder / "table1.md").write_text(
        f"# Table 1 on {DATA} (0% injected; CCP is `soft`)\n\n{source} Metrics in %, mean ± sample SD over "
        "seeds; AUROC: the final bank's scores against the natural faulty positives.\n\n"
        + (method_table(res, 0.0, t1) if 0.0 in res else "no seed finished yet")
        + "\n"
    )
    (folder / "table2.md").write_text(
        f"# Table 2 at 0% on {DATA}\n\n{source}\n\n"
        + (method_table(res, 0.0, claims.TABLE2) if 0.0 in res else "no seed finished yet")
        + "\n"
    )
    family = family_wise(CLAIMS, res)
    text = [
        f"# The faulty-negative claims on {DATA}, judged\n",
        "N1-N5 of [PLAN.md](PLAN.md), judged by results/claims/PLAN.md's rules as amended "
        "([the rules](../claims/PLAN.md)): paired differences in points, mean [95% t-interval] "
        "over seeds 0-4, Holm over the two primary endpoints (1- and 5-shot), 'untestable here (ceiling)' for a "
        f"baseline averaging {100 * claims_report.CEILING:g}% or more. Every claim ran on {DATA} at 0% injected "
        f"but N4's 50% rows, which ran on data/synth2000 (results/claims/settings/). The last column: Holm "
        f"across the {len(family)} judged claims.\n",
        claims_table(CLAIMS, res, family=family),
        "\nReported, not judged:\n",
        claims_table(REPORTED, res, judged=False),
        "\nTables: [table1.md](table1.md), [table2.md](table2.md).",
        "",
    ]
    (folder / "VERDICT.md").write_text("\n".join(text))
    print("\n".join(text))
    return res


README_MARK, CLAIMS_MARK = "<!-- README-NEGATIVES -->", "<!-- NEGATIVES -->"


def readme_block(res):
    """The README's summary: the claims grouped by verdict (by how many seeds they have until they have
    all), each with its 1-shot difference; the rows with both endpoints are VERDICT.md's."""
    groups = {}
    for c in CLAIMS:
        j = claims_report.judge(c, res)
        if j["n"] == 0:
            continue
        verdict = j["verdict"] if j["n"] == len(c.seeds) else f"pending ({j['n']} of {len(c.seeds)} seeds)"
        where = "data/synth2000" if "synth2000" in c.name else DATA
        groups.setdefault(verdict, []).append(
            f"[{c.name}](results/negatives/VERDICT.md) {c.text}, `{where}`: {j['cells']['1-shot']}"
        )
    if not groups:
        return "No seed has finished yet.\n"
    family = family_wise(CLAIMS, res)
    held = [k for k, p in family.items() if p < claims_report.ALPHA]
    lines = ["Per claim (Δ 1-shot in points, 95% interval):", ""]
    lines += [f"- **{verdict}**: {'; '.join(items)}." for verdict, items in groups.items()]
    lines += [
        "",
        f"Family-wise (Holm across the {len(family)} judged claims), held: {', '.join(held) or 'none'}. "
        "N5 (lambda 0.5 > lambda 0) is N2 CCP: Soft-xID at lambda 0 is xID.",
    ]
    return "\n".join(lines) + "\n"


def claims_block(folder):
    folder = Path(folder)

    def body(name):
        return (folder / name).read_text().split("\n", 1)[1].strip().replace("](", f"]({folder.as_posix()}/")

    return (
        f"From {folder.as_posix()}/VERDICT.md, made by `python -m experiments.negatives report`:\n\n"
        f"{body('VERDICT.md')}\n\n{body('table1.md')}\n\n{body('table2.md')}\n\n"
    )


def update_docs(folder, res, readme=claims_docs.HISTORY, claims_md="CLAIMS.md"):
    """The faulty-negative sections of results/HISTORY.md (once the README's) and CLAIMS.md, remade from
    the report."""
    claims_docs.replace_after(readme, README_MARK, claims_docs.relative_to(readme, readme_block(res)), until="## ")
    claims_docs.replace_after(claims_md, CLAIMS_MARK, claims_block(folder), until="## ")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["run", "report"])
    p.add_argument("--data", default=DATA)
    p.add_argument("--runs", default="runs/negatives")
    p.add_argument(
        "--results",
        default=str(RESULTS),
        help="the committed evidence (default results/negatives/): `run` adds each finished seed, `report` "
        "remakes the tables and VERDICT.md; with experiments.claims, the commands that write tracked files",
    )
    p.add_argument("--jobs", type=int, default=1, help="seeds trained side by side, one thread each on 2 cores")
    args = p.parse_args(argv)
    if args.action == "run":
        run(args)
    else:
        update_docs(args.results, report(args.results))


if __name__ == "__main__":
    main(sys.argv[1:])
