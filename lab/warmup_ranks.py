"""Is make demo's warm-up as two DDP ranks equal to one process within seed noise? The runs and the
judge of lab/results/warmup_ranks/PLAN.md (written before the runs).

Two gloo ranks of one thread each train the xID warm-up faster on 2 cores than one process of two
threads, but each rank's batch norm sees half the batch of 32 and draws its own negatives, so the
arithmetic changes. The plan compares seeds 0-2 at 50% injected, three methods from each warm-up,
against the one-process arm, the earlier claims' 50% settings (the same recipe), kept in
lab/results/warmup_ranks/one_process/settings since those claims left the tree (commit 554eea5).

    python -m lab.warmup_ranks run      # seeds 0-2 at 50%, about 45 min on 2 cores; resumes
    python -m lab.warmup_ranks judge    # lab/results/warmup_ranks/VERDICT.md
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

import demo
from lab import claims_report
from tools import demo_report

RESULTS = Path("lab/results/warmup_ranks")
ONE_PROCESS = Path("lab/results/warmup_ranks/one_process")  # settings/seed{0,1,2}_faulty50.json: one process
SEEDS, FAULTY, METHODS, ENDPOINTS = (0, 1, 2), 0.5, ("xid", "weighted", "oracle"), ("1-shot", "5-shot")


def run(args):
    demo.main(
        ["--seeds", *map(str, SEEDS), "--faulty", str(FAULTY), "--methods", *METHODS, "--warmup-ranks", "2"]
        + ["--runs", args.runs, "--results", str(RESULTS)]
    )


def _rows(folder, seed):
    return json.loads((Path(folder) / "settings" / demo.setting_name(seed, FAULTY)).with_suffix(".json").read_text())[
        "rows"
    ]


def judge(two=RESULTS, one=ONE_PROCESS):
    """PLAN.md's criterion on the seeds both arms have; returns (verdict text, adopt). Fewer seeds than
    the plan's 3 give no adoption."""
    seeds = [s for s in SEEDS if (Path(two) / "settings" / f"{demo.setting_name(s, FAULTY)}.json").exists()]
    lines = [
        "# Two-rank warm-up against one process: the verdict of PLAN.md's criterion",
        "",
        f"Made by `python -m lab.warmup_ranks judge` from {two}/settings (two ranks) and "
        f"{one}/settings (one process), seeds {', '.join(map(str, seeds)) or 'none'} of the plan's "
        f"{', '.join(map(str, SEEDS))} at 50% injected, on data/synth2000. Points of few-shot accuracy; the "
        "paired difference is two ranks - one process with its 95% t-interval; SD is the one-process "
        "arm's across the plan's seeds.",
        "",
        "| method | endpoint | one process | two ranks | difference [95% CI] | SD | holds |",
        "|---|---|---|---|---:|---:|:-:|",
    ]
    adopt = len(seeds) == len(SEEDS)
    for m in METHODS:
        for e in ENDPOINTS:
            a = [100 * _rows(one, s)[m][e] for s in seeds]
            b = [100 * _rows(two, s)[m][e] for s in seeds]
            mean, lo, hi = claims_report.interval(b, a, paired=True)
            sd = statistics.stdev(100 * _rows(one, s)[m][e] for s in SEEDS)
            holds = len(seeds) > 1 and lo <= 0 <= hi and abs(mean) < sd
            ci = f"[{lo:+.1f}, {hi:+.1f}]" if len(seeds) > 1 else "(one seed: no interval)"
            adopt &= holds
            lines.append(
                f"| {demo_report.method_name(m)} | {e} | {' / '.join(f'{x:.1f}' for x in a)} | "
                f"{' / '.join(f'{x:.1f}' for x in b)} | {mean:+.1f} {ci} | {sd:.1f} | "
                f"{'yes' if holds else 'no'} |"
            )
    lines += ["", "| gain over xID | endpoint | one process | two ranks | same sign |", "|---|---|---:|---:|:-:|"]
    for m in METHODS[1:]:
        for e in ENDPOINTS:
            g = [statistics.mean(100 * (_rows(f, s)[m][e] - _rows(f, s)["xid"][e]) for s in seeds) for f in (one, two)]
            same = (g[0] > 0) == (g[1] > 0)
            adopt &= same
            lines.append(
                f"| {demo_report.method_name(m)} | {e} | {g[0]:+.1f} | {g[1]:+.1f} | {'yes' if same else 'no'} |"
            )
    if adopt:
        verdict = (
            "**Adopted**: every row holds, so make demo's warm-up runs as two ranks where there are 2 cores or more."
        )
    elif len(seeds) < len(SEEDS):
        verdict = (
            f"**Not adopted**: {len(seeds)} of the plan's {len(SEEDS)} seeds ran, and the plan adopts on all 3 only."
        )
    else:
        verdict = "**Not adopted**: a row above fails, so make demo's warm-up stays one process."
    return "\n".join(lines + ["", verdict, ""]), adopt


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("run", "judge"))
    p.add_argument("--runs", default="runs/warmup_ranks")
    args = p.parse_args(argv)
    if args.command == "run":
        run(args)
    else:
        text, adopt = judge()
        (RESULTS / "VERDICT.md").write_text(text)
        print(text)


if __name__ == "__main__":
    sys.exit(main())
