"""The paper's claims on the demo's regime: Fig. 7 (Sec. 5.2), Table 1 (Sec. 5.3), Table 2 (Sec. 5.4)
and the appendix's delta and lambda sweeps, each (seed, level) trained once and shared by every claim
that reads it. What is judged, and how, was written before the runs: results/claims/PLAN.md.

    python -m experiments.claims run        # every missing setting, in the plan's order; resumes
    python -m experiments.claims run --jobs 2   # two settings at a time, one thread each (2 cores: 1.7x)
    python -m experiments.claims report     # results/claims/: fig7.md, fig7.png, table1.md, table2.md, VERDICT.md
    python -m experiments.claims_finetune run PACK   # Table 2's fine-tune column, on a GPU (see its docstring)

The regime is `make demo`'s: data/synth2000, 25 warm-up epochs of xID, 6 epochs per method, delta
from the known injected share (demo.paper_delta). Each finished (seed, level) is written to
results/claims/settings/ as it finishes (commit it: runs/ is not kept), and `run` skips it next time.
"""

import argparse
import sys
from pathlib import Path

from experiments import claims_docs, claims_report, demo, demo_report, jobs, sweep
from experiments.claims_report import SWEEPS

RESULTS = Path("results/claims")
TABLE2 = ["xid", "weighted", "soft", "robust"]
TABLE1 = ["soft:bootstrap", "soft:neighbor", "soft:swapped", "soft:oracle"]  # CCP is Table 2's "soft"
FIG7 = ["xid", "weighted", "oracle"]


def plan():
    """(seed, injected share, methods) in the order they run: 50% and 0% alternate seed by seed, so a
    run stopped early still leaves pairs across levels; then 25% and 75%. At 0% Oracle-xID is xID
    (nothing injected to drop), so it is not trained there."""
    out = []
    for seed in range(5):
        out.append((seed, 0.5, FIG7 + ["soft", "robust", "weighted@shares"]))
        out.append((seed, 0.0, TABLE2 + (TABLE1 if seed < 3 else [])))
    for faulty in (0.25, 0.75):
        out += [(seed, faulty, FIG7) for seed in range(3)]
    return out


def demo_args(results, seed_methods, data="data/synth2000", runs="runs/claims"):
    return argparse.Namespace(
        data=data,
        runs=runs,
        results=str(results),
        settings="settings",
        figure=None,
        methods=seed_methods,
        warmup_epochs=25,
        epochs=6,
        finetune_epochs=0,
        trials=50,
        train_args=[],
        preset="demo2000",  # the regime these claims ran on, before make demo moved (results/regime)
        workers=None,
        figures=False,
        columns=demo_report.COLUMNS,
    )


def run_one(args, setting):
    seed, faulty, methods = setting
    demo.run_setting(demo_args(args.results, methods, args.data, args.runs), seed, faulty)


def run(args):
    demo.ensure_data(args.data)
    jobs.side_by_side(run_one, [(args, setting) for setting in plan()], args.jobs)  # --jobs: demo.py's way
    for knob, faulty in SWEEPS:
        a = demo_args(args.results, [], args.data, args.runs)
        a.knob, a.values = knob, list(sweep.KNOBS[knob].values)
        for seed in range(3):
            sweep.run_point(a, seed, faulty)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["run", "report"])
    p.add_argument("--data", default="data/synth2000")
    p.add_argument("--runs", default="runs/claims")
    p.add_argument(
        "--results",
        default=str(RESULTS),
        help="the committed evidence (default results/claims/): `run` adds each finished setting there, "
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
    args = p.parse_args(argv)
    if args.action == "run":
        run(args)
    else:
        res = claims_report.main(Path(args.results))
        claims_docs.update(Path(args.results), res)


if __name__ == "__main__":
    main(sys.argv[1:])
