"""The README's summary of the claims and CLAIMS.md's claims section, remade from the claims' report, so
the documents say what the rerun's report (lab/results/claims/rerun/) says and nothing else.

    python -m lab.claims report     # writes lab/results/claims/rerun/*.md, then calls update() here

Each document holds a marker; what follows it, to the next "## " heading, is replaced. Text outside
the markers is written by hand.
"""

import posixpath
import re
from pathlib import Path

from lab import claims_report as cr

README_MARK, CLAIMS_MARK = "<!-- README-VERDICTS -->", "<!-- VERDICT -->"
POWER_MARK, POWER_END = "<!-- POWER -->", "<!-- /POWER -->"  # CLAIMS.md: the endpoints wider than planned


def readme_rows(res, run=cr.FIRST_RUN, folder="lab/results/claims"):
    """One line per claim with any seed: its verdict (or how many seeds it still lacks) and the
    primary endpoints' paired differences, and how many judged claims have all their seeds. The sweeps'
    claims join only with all their seeds (a sweep half run would show a verdict on fewer seeds)."""
    lines = [
        f"| claim (paired difference) | verdict | {' | '.join(f'Δ {m}' for m in cr.PRIMARY)} |",
        "|---|---|---:|---:|",
    ]
    complete = 0
    for claim, judged in [(c, True) for c in run.claims + run.sweeps] + [(c, False) for c in run.reported]:
        j = cr.judge(claim, res)
        if j["n"] == 0 or (claim in run.sweeps and j["n"] < len(claim.seeds)):
            continue
        done = j["n"] == len(claim.seeds)
        complete += judged and done
        if not judged:
            verdict = f"reported ({j['n']} of {len(claim.seeds)} seeds)"
        else:
            verdict = j["verdict"] if done else f"pending: {j['n']} of {len(claim.seeds)} seeds"
        lines.append(
            f"| [{claim.name}]({Path(folder).as_posix()}/{source_of(claim)}): {claim.text} | {verdict} | "
            + " | ".join(j["cells"][m] for m in cr.PRIMARY)
            + " |"
        )
    return lines, complete


def source_of(claim):
    """The report file whose table holds a claim's numbers."""
    if claim.name.startswith(("T1", "N")):
        return "table1.md"
    if claim.name.startswith("S"):
        return "sweeps.md"
    return "fig7.md" if claim.name.startswith("F") else "table2.md"


def summary(folder, res, run=cr.FIRST_RUN):
    """The README's one line on the claims: how many have their seeds, and how many held, did not, or are
    untestable here, family-wise too; which ones, with their rows, is CLAIMS.md's."""
    res = {**res, **cr.load_sweeps(folder)}  # the sweeps' settings, keyed beside the levels
    _, complete = readme_rows(res, run, folder)
    claims = run.claims + run.sweeps
    where = (
        "on `data/synth_src2p` (`make demo`'s set; 30 warm-up epochs, 24 per branch), every claim judged on "
        "in-domain 1-shot and transfer 1-shot (`data/synth_transfer`, classes pre-training never saw)"
    )
    if not cr.SEEDS:
        plan = "[lab/results/claims/PLAN.md](lab/results/claims/PLAN.md)"
        return f"The claims' runs have not started; the plan ({plan}): {where}.\n"
    if complete == 0:
        return f"No claim has all its planned seeds yet ({where}); the rows so far: [CLAIMS.md](lab/CLAIMS.md).\n"
    verdicts = {c.name: cr.judge(c, res)["verdict"] for c in claims}

    family = cr.family_wise(claims, res)
    fw_held = sum(p < cr.ALPHA for p in family.values())
    waiting = [n for n, v in verdicts.items() if v.startswith("incomplete")]

    def count(*starts):
        return sum(v.startswith(starts) for v in verdicts.values())

    text = (
        f"{complete} of {len(claims)} claims have all their planned seeds, {where}, {run.code}. "
        f"**Held: {count('holds')}**; contradicted or worse: {count('contradicted', 'worse')}; not shown: "
        f"{count('not shown')}; inconclusive: {count('inconclusive')}; untestable here: {count('untestable')}; "
        f"family-wise (Holm across the {len(family)} judged 'A > B' claims), held: {fw_held}."
    )
    if waiting:
        text += f" Waiting for their seeds: {len(waiting)}."
    return text + " Which, with every row, interval and table: [CLAIMS.md](lab/CLAIMS.md).\n"


def waiting(folder, res, run):
    """The claims of `run` that lack some of their seeds in `folder`'s settings and sweeps."""
    res = {**res, **cr.load_sweeps(folder)}
    return [c.name for c in run.claims + run.sweeps + run.reported if cr.judge(c, res)["n"] < len(c.seeds)]


def claims_block(folder, run=cr.FIRST_RUN, at="lab"):
    """The report's verdict, Fig. 7, Table 2 and Table 1, their links made relative to `at`, CLAIMS.md's folder."""
    folder = Path(folder)

    def body(name):
        text = (folder / name).read_text().split("\n", 1)[1].strip()  # less its title
        return re.sub(r"\]\((?!http|results/)([^)]+)\)", lambda m: f"]({at_doc(m.group(1))})", text)

    def at_doc(link):  # a report's link, from CLAIMS.md's folder ("../RERUN_PLAN.md" made plain)
        return posixpath.relpath(posixpath.normpath(f"{folder.as_posix()}/{link}"), at)

    verdict = body("VERDICT.md")
    return (
        f"From {folder.as_posix()}/VERDICT.md, made by `{run.command}`:\n\n{verdict}\n\n"
        f"### Fig. 7: accuracy against the share of injected faulty positives\n\n{body('fig7.md')}\n\n"
        f"### Table 2: xID, Weighted, Soft (CCP), Robust\n\n{body('table2.md')}\n\n"
        f"### Table 1: the soft-target strategies at 0%\n\n{body('table1.md')}\n\n"
    )


def replace_after(path, mark, new, until=None):
    """Replace what follows `mark` in `path` (to the end, or to the first line starting with `until`)."""
    text = Path(path).read_text()
    if mark not in text:
        raise ValueError(f"{path} has no {mark} marker: put it where the generated part starts")
    head, tail = text.split(mark, 1)
    rest = ""
    if until is not None:
        at = tail.find("\n" + until)
        rest = tail[at + 1 :] if at >= 0 else ""
    Path(path).write_text(head + mark + "\n" + new + rest)


def update(folder, res, run=cr.FIRST_RUN, readme="README.md", claims_md="lab/CLAIMS.md", power=None):
    """The README's verdict line and CLAIMS.md's claims section from the report; `power` (the rerun's
    `lab.claims_power` block) between CLAIMS.md's POWER markers."""
    replace_after(readme, README_MARK, "\n" + summary(folder, res, run) + "\n", until="## ")
    replace_after(claims_md, CLAIMS_MARK, claims_block(folder, run, Path(claims_md).parent.as_posix()), until="## ")
    if power is not None:
        replace_after(claims_md, POWER_MARK, power + "\n", until=POWER_END)
