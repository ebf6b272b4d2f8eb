"""The README's verdict table and CLAIMS.md's claims section, remade from the claims' report, so the
two documents say what results/claims/ says and nothing else.

    python -m experiments.claims report     # writes results/claims/*.md, then calls update() here

Each document holds a marker; what follows it, to the next "## " heading, is replaced. Text outside
the markers is written by hand.
"""

import re
from pathlib import Path
from statistics import mean

from experiments import claims_report as cr
from experiments import demo_report

README_MARK, CLAIMS_MARK = "<!-- README-VERDICTS -->", "<!-- VERDICT -->"


def readme_rows(res):
    """One line per claim with any seed: its verdict (or how many seeds it still lacks) and the
    primary endpoints' paired differences. The sweeps' claims join only with all their seeds (a sweep
    half run would show a verdict on fewer seeds than planned)."""
    lines = ["| claim (paired difference) | verdict | Δ 1-shot | Δ 5-shot |", "|---|---|---:|---:|"]
    complete = 0
    for claim, judged in [(c, True) for c in cr.CLAIMS + cr.SWEEP_CLAIMS] + [(c, False) for c in cr.REPORTED]:
        j = cr.judge(claim, res)
        if j["n"] == 0 or (claim in cr.SWEEP_CLAIMS and j["n"] < len(claim.seeds)):
            continue
        done = j["n"] == len(claim.seeds)
        complete += judged and done
        if not judged:
            verdict = f"reported ({j['n']} of {len(claim.seeds)} seeds)"
        else:
            verdict = j["verdict"] if done else f"pending: {j['n']} of {len(claim.seeds)} seeds"
        lines.append(
            f"| [{claim.name}](results/claims/{source_of(claim)}): {claim.text} | {verdict} "
            f"| {j['cells']['1-shot']} | {j['cells']['5-shot']} |"
        )
    return lines, complete


def source_of(claim):
    """The report file whose table holds a claim's numbers."""
    if claim.name.startswith("T1"):
        return "table1.md"
    if claim.name.startswith("S"):
        return "sweeps.md"
    return "fig7.md" if claim.name.startswith("F") else "table2.md"


def readme_block(folder, res):
    res = {**res, **cr.load_sweeps(folder)}  # the sweeps' settings, keyed beside the levels
    lines, complete = readme_rows(res)
    total = len(cr.CLAIMS) + len(cr.SWEEP_CLAIMS)
    text = "\n".join(lines) + "\n\n"
    if complete == 0:
        text += (
            "No claim has all its planned seeds yet, so nothing above is a verdict: the rows describe the seeds so far."
        )
    else:
        verdicts = {c.name: cr.judge(c, res)["verdict"] for c in cr.CLAIMS + cr.SWEEP_CLAIMS}

        def named(*starts):
            return ", ".join(n for n, v in verdicts.items() if v.startswith(starts)) or "none"

        family = cr.family_wise(cr.CLAIMS + cr.SWEEP_CLAIMS, res)
        fw_held = ", ".join(n for n, p in family.items() if p < cr.ALPHA) or "none"
        waiting = [n for n, v in verdicts.items() if v.startswith("incomplete")]
        text += (
            f"{complete} of {total} claims have all their planned seeds. **Held**: {named('holds')}. "
            f"**Contradicted or worse**: {named('contradicted', 'worse')}. **Not shown**: {named('not shown')}. "
            f"**Inconclusive**: {named('inconclusive')}. **Untestable here (ceiling)**: {named('untestable')}. "
            f"Family-wise (Holm across the {len(family)} judged 'A > B' claims), held: {fw_held}."
        )
        if waiting:
            text += (
                f" **Waiting for their seeds** ({', '.join(waiting)}): their rows, where shown, are marked "
                "pending and describe the seeds so far; the sweeps' rows join only when complete."
            )
    xid0 = [res[0.0][s]["xid"]["1-shot"] for s in res.get(0.0, {}) if "xid" in res[0.0][s]]
    if xid0:
        text += (
            f" The ceiling is the set's, not the method's: xID's 1-shot accuracy at 0% is {100 * mean(xid0):.0f}%, "
            "so a gain over it at 0% (F4, Table 2 at 0%, most of Table 1), or a gain that grows from 0% (F3b, "
            "which would only restate F3a), cannot be seen on this set."
        )
    acc, _ = cr.finetune_results(folder)
    if (0.5, "xid") in acc:
        gains = [
            f"{demo_report.method_name(m)} - xID {demo_report.fmt_diff(cr.finetune_diffs(acc, 0.5, m))}"
            for m in ("weighted", "soft", "robust")
            if (0.5, m) in acc
        ]
        text += (
            f"\n\nTable 2's fine-tune column (50%, {len(acc[(0.5, 'xid')])} seeds, on a GPU; reported, not "
            f"judged): {'; '.join(gains)} points ([table2.md](results/claims/table2.md))."
        )
    return text + "\n"


def claims_block(folder):
    """The report's verdict, Fig. 7, Table 2 and Table 1, their links made relative to the repository."""
    folder = Path(folder)

    def body(name):
        text = (folder / name).read_text().split("\n", 1)[1].strip()  # less its title
        return re.sub(r"\]\((?!http|results/)([^)]+)\)", lambda m: f"]({folder.as_posix()}/{m.group(1)})", text)

    verdict = body("VERDICT.md")
    return (
        f"From results/claims/VERDICT.md, made by `python -m experiments.claims report`:\n\n{verdict}\n\n"
        f"### Fig. 7: faulty positives against transfer\n\n{body('fig7.md')}\n\n"
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


def relative_to(doc, text):
    """Links written from the repository's root (results/..., CLAIMS.md) made relative to `doc`, a file
    in the root or in results/."""
    if Path(doc).parent.name != "results":
        return text
    text = text.replace("](results/", "](")
    return re.sub(r"\]\((CLAIMS|BENCHMARKS|README)\.md", r"](../\1.md", text)


# The verdicts on the two earlier sets live in results/HISTORY.md since the one-regime screen; the
# README points there until the claims have run on the adopted regime.
HISTORY = "results/HISTORY.md"


def update(folder, res, readme=HISTORY, claims_md="CLAIMS.md"):
    block = relative_to(readme, readme_block(folder, res))
    replace_after(readme, README_MARK, block + "\n", until="## ")  # a blank line before it
    replace_after(claims_md, CLAIMS_MARK, claims_block(folder), until="## ")
