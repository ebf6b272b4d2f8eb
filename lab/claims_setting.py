"""One setting of a claims run (lab/results/claims/PLAN.md, RERUN_PLAN.md): `make demo`'s set and warm-up with the
plan's branch length, every branch evaluated in-domain and on the transfer set, then at 50% the appendix's
sweeps from that same warm-up. lab/claims.py and lab/claims_rerun.py train their plans' settings with it.

    python -m lab.claims run --jobs 2            # the first run's settings, through run_one
    python -m lab.claims_rerun run --jobs 2      # the rerun's
"""

import demo
from demo import DemoArgs
from lab import sweep
from lab.claims_plan import DATA, EPOCHS, RECIPE, SWEEP_VALUES, TRANSFER, WARMUP_EPOCHS


def demo_args(results, seed_methods, data=DATA, runs="runs/claims"):
    """A claims setting as the demo runs it: make demo's set and warm-up, the plan's branch length, every
    branch evaluated in-domain and on the transfer set; its finished settings in RESULTS/settings."""
    return DemoArgs(
        data=data,
        runs=runs,
        results=str(results),
        settings="settings",
        methods=seed_methods,
        warmup_epochs=WARMUP_EPOCHS,
        epochs=EPOCHS,
        eval_clips=RECIPE[
            "eval_clips"
        ],  # make demo's (lab/results/regime/PLAN.md); the paper's 10 is a named deviation
        trials=RECIPE["trials"],
        transfer=TRANSFER,
        figures=False,
        branch_jobs=1,  # one branch after another, with every thread, as the claims ran
    )


def run_one(data, runs, results, setting):
    """One setting of the plan: its warm-up and branches, then at 50% its sweeps' values from that warm-up."""
    seed, level, methods, knobs = setting
    demo.run_setting(demo_args(results, list(methods), data, runs), seed, level)
    for knob in knobs:
        swept = sweep.SweepArgs(**vars(demo_args(results, [], data, runs)), knob=knob, values=list(SWEEP_VALUES[knob]))
        sweep.run_point(swept, seed, level)
