"""The faster epoch's branches, paired on one warm-up (lab/results/epoch_speed/BRANCH_PLAN.md, written before the
runs): for seeds 0-2, the old code's warm-up (0756166, from the equivalence runs) branched by the new code,
against the old code's own branches from that warm-up (seedS_old); and the control, the old code's seed-0
branches rerun from its warm-up (control_seed0), which must equal seed0_old. Writes
lab/results/epoch_speed/BRANCHES.md.

    python -m lab.screens.epoch_branches   # reads lab/results/epoch_speed/demos.json

The new runs (branch_seedS_new) are demo.py's demo.json of `--seeds S` in a clone of the new code
with the old warm-up folder copied in (the warm-up is then finished, and only the branches train).
"""

from statistics import mean

from lab.screens import help_asked, merged
from lab.screens.epoch_equivalence import DEMOS, HERE, METHODS, SEEDS, rows
from tools.demo_report import ci95

METRICS = ("1-shot", "R@5")


def interval(d):
    return mean(d), mean(d) - ci95(d), mean(d) + ci95(d)


def report():
    """BRANCHES.md's text."""
    control = rows("control_seed0")
    same = all(f"{100 * control[m][k]:.2f}" == f"{100 * rows('seed0_old')[m][k]:.2f}" for m in METHODS for k in METRICS)
    lines = [
        "# The faster epoch's branches on the old code's warm-ups (plan: BRANCH_PLAN.md)",
        "",
        "Made by `python -m lab.screens.epoch_branches`. 25% injected, make demo's settings; the old code's",
        "30-epoch warm-up of each seed, then 24-epoch branches by the old code (seedS_old) and by the new",
        "(branch_seedS_new), both kept in demos.json; new - old in points, mean [95% interval] over seeds 0-2.",
        "",
        f"**Control:** the old code's seed-0 branches rerun from its warm-up "
        f"{'equal' if same else 'do NOT equal'} seed0_old to 2 decimals on every row (1-shot, R@5).",
        "",
        "| Method | Δ 1-shot | Δ R@5 |",
        "|---|---:|---:|",
    ]
    diff = {
        (m, k): [100 * (rows(f"branch_seed{s}_new")[m][k] - rows(f"seed{s}_old")[m][k]) for s in SEEDS]
        for m in METHODS
        for k in METRICS
    }
    named = []
    for m in METHODS:
        cells = []
        for k in METRICS:
            mu, lo, hi = interval(diff[m, k])
            cells.append(f"{mu:+.1f} [{lo:+.1f}, {hi:+.1f}]")
            if lo > 1 or hi < -1:
                named.append(f"{m} {k}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    per_seed = {k: [mean(diff[m, k][i] for m in METHODS) for i in range(len(SEEDS))] for k in METRICS}
    overall = {k: interval(per_seed[k]) for k in METRICS}
    mu, lo, hi = overall["1-shot"]
    lines += [
        "",
        "Overall (the 15 pairs; interval over the 3 per-seed means): "
        + ", ".join(f"{k} {m:+.1f} [{a:+.1f}, {b:+.1f}]" for k, (m, a, b) in overall.items())
        + ".",
        "",
        "Per seed, 1-shot new - old: "
        + "; ".join(
            f"seed {s}: " + ", ".join(f"{m} {diff[m, '1-shot'][i]:+.1f}" for m in METHODS) for i, s in enumerate(SEEDS)
        )
        + ".",
        "",
        "Single branches differ by up to "
        + f"{max(abs(x) for m in METHODS for x in diff[m, '1-shot']):.1f} points 1-shot. What the claims compare,"
        + " each method's gap to xID (its 1-shot minus xID's, same seed), moves by new - old:",
        "",
        "| Method | Δ (gap to xID, 1-shot) per seed 0, 1, 2 | mean [95% interval] |",
        "|---|---:|---:|",
        *(
            f"| {m} | "
            + ", ".join(f"{g:+.1f}" for g in gaps)
            + " | {:+.1f} [{:+.1f}, {:+.1f}] |".format(*interval(gaps))
            for m in METHODS[1:]
            for gaps in [[a - b for a, b in zip(diff[m, "1-shot"], diff["xid", "1-shot"])]]
        ),
        "",
        "**Rule 1** (any per-method interval excluding zero by more than 1 point): "
        + (", ".join(named) if named else "none")
        + ".",
        f"**Rule 2** (overall 1-shot interval inside [-3, +3]): {'holds' if -3 <= lo and hi <= 3 else 'not shown'}.",
    ]
    lines += addendum()
    return "\n".join(lines) + "\n"


def main():
    text = report()
    (HERE / "BRANCHES.md").write_text(text)
    print(text, end="")


def addendum(seeds=(3, 4, 5, 6, 7)):
    """BRANCH_PLAN.md's addendum: each method's 1-shot gap to xID, new - old, over the seeds that ran."""
    kept = merged.entries(DEMOS)
    ran = [s for s in seeds if f"branch_seed{s}_new" in kept and f"seed{s}_old" in kept]
    lines = [
        "",
        f"## Addendum: seeds {seeds[0]}-{seeds[-1]} ({len(ran)} ran: {', '.join(map(str, ran)) or 'none'})",
        "",
    ]
    if len(ran) < 2:
        return lines + ["Too few seeds for an interval."]
    gap = {  # method -> per seed: (new gap to xID) - (old gap to xID), in points
        m: [
            100 * (new[m]["1-shot"] - new["xid"]["1-shot"] - old[m]["1-shot"] + old["xid"]["1-shot"])
            for s in ran
            for new, old in [(rows(f"branch_seed{s}_new"), rows(f"seed{s}_old"))]
        ]
        for m in METHODS[1:]
    }
    lines += ["| Method | Δ (gap to xID, 1-shot) per seed | mean [95% interval] | rule |", "|---|---:|---:|:-:|"]
    for m, g in gap.items():
        mu, lo, hi = interval(g)
        moved = "moved" if lo > 1 or hi < -1 else "not shown to move"
        lines.append(f"| {m} | {', '.join(f'{x:+.1f}' for x in g)} | {mu:+.1f} [{lo:+.1f}, {hi:+.1f}] | {moved} |")
    return lines


if __name__ == "__main__":
    help_asked(__doc__)
    main()
