"""The demo's interface: DemoArgs, what one run of experiments/demo.py trains and evaluates, typed, with
`make demo`'s regime as its defaults; and parse_args, the command line built from it. Each default and
its help are stated once, on the field; the set and the epochs are config.PRESETS["demo"]'s. The lab's
claims, sweeps and screens build a DemoArgs of their own (lab/README.md).

    python -m experiments.demo --help      # every option, with its default: DemoArgs()'s

Tests: tests/test_demo.py, tests/test_setting_keys.py
"""

import argparse
import os
import sys
from dataclasses import dataclass, field, fields

from config import PRESETS
from experiments.demo_report import COLUMNS, DELTA_RULES, parse_method
from losses import VARIANTS

TRANSFER = ("transfer R@1", "transfer R@5", "transfer 1-shot", "transfer 5-shot")  # --transfer's columns
FIGURES = {"noisy": dict(methods=["xid", "weighted", "oracle"], faulty=[0.0, 0.25, 0.5, 0.75], seeds=[0, 1, 2])}
DEMO = PRESETS["demo"]  # train.py --preset demo: the set and epochs make demo runs
# The demo at 50% injected, beyond 2 cores' minutes (lab/results/faults_screen/): the larger regime on 2000
# independent videos, whose 44-epoch warm-ups found the faults (lab/results/HISTORY.md), 24-epoch branches as the
# claims'. The README's command for a GPU; `make gpu-check` part e times it.
AT_50 = [
    "--faulty",
    "0.5",
    "--preset",
    "demo2000",
    "--data",
    "data/synth2000",
    "--warmup-epochs",
    "44",
    "--epochs",
    "24",
]


def opt(default, text, **argparse_kwargs):
    """A DemoArgs field: its one default, and the help and argparse options of its command-line flag."""
    meta = {"help": text, **argparse_kwargs}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class DemoArgs:
    """What a demo run trains and evaluates. The defaults are `make demo`'s regime: config.PRESETS["demo"]'s
    set and epochs, five methods at 25% injected, 2 clips per video in evaluation (the paper's 10 is a named
    deviation). How the regime was chosen: lab/results/demo_screen/."""

    data: str = opt(
        DEMO["data"],
        "generated here when missing (never into a user's folder), with its SYNTH_SETS options; "
        "data/synth2000 is 10 classes x 200 training videos",
    )
    runs: str = opt("runs/demo", "the warm-ups and branches")
    results: str = opt(
        "runs/demo",
        "where demo.md, demo.json and the finished settings go (default: beside the runs; the tracked "
        "lab/results/ are remade only by `python -m lab.claims report`)",
    )
    methods: list[str] = opt(
        ["xid", "weighted", "soft", "robust", "oracle"],
        f"first is the baseline; one of {list(VARIANTS)}, soft:STRATEGY (Table 1's targets) or "
        "weighted@shares (delta from the natural + injected share, a deviation)",
        nargs="+",
    )
    seeds: list[int] = opt([0], "one setting per seed and share", type=int, nargs="+")
    faulty: list[float] = opt(
        [0.25], "shares of injected faulty positives (make demo: 25%%, lab/results/demo_screen/)", type=float, nargs="+"
    )
    warmup_epochs: int = opt(DEMO["warmup_epochs"], "epochs of the xID warm-up every branch starts from", type=int)
    epochs: int = opt(DEMO["epochs"], "epochs of each branch", type=int)
    eval_clips: int = opt(
        2, "clips per video for retrieval and few-shot (paper: 10; fewer is a named deviation)", type=int
    )
    finetune_epochs: int = opt(
        0,
        "add a fine-tune column: the paper's recipe (evaluate.py) for this many epochs (paper: 200; on the "
        "demo's set it converges only with the full schedule, lab/results/finetune_curve.md, about 33 min a "
        "checkpoint on 2 cores); 0: none",
        type=int,
    )
    trials: int = opt(50, "few-shot SVM trials", type=int)
    transfer: str | None = opt(
        None,
        "also evaluate each branch (retrieval, few-shot) on this set, whose classes pre-training never saw, as "
        "the paper's transfer to UCF101/HMDB51; data/synth_transfer is generated when missing",
    )
    preset: str = opt("demo", "the train.py preset the runs start from")
    workers: int | None = opt(
        None,
        "DataLoader workers of training and evaluation (default: the preset's for training, 1 for evaluation)",
        type=int,
    )
    jobs: int = opt(
        1,
        "settings run side by side as processes (a GPU box's cores, several GPUs); each keeps its own loader --workers",
        type=int,
    )
    branch_jobs: int | None = opt(
        None,
        "a setting's branches trained and evaluated side by side, each a process with its share of the threads "
        "(default: all of them at once when there are 2 cores or more and --jobs is 1; 1: one after another "
        "with every thread)",
        type=int,
    )
    warmup_ranks: int = opt(
        1,
        "train the warm-up as this many DDP processes (torchrun, gloo) of one share of the threads each: on 2 "
        "cores about 1.7x faster, but each rank's batch norm sees its share of the batch, so it changes the "
        "arithmetic; not the default until shown equal to 1 within seed noise (lab/results/warmup_ranks/)",
        type=int,
    )
    figures: bool = opt(True, "skip the per-run analysis plots", flag="--no-figures", action="store_false")
    figure: str | None = opt(
        None, "the settings of a paper figure (methods, levels, seeds), unless given", choices=sorted(FIGURES)
    )
    settings: str = opt("", "the finished settings' folder under --results (default: FIGURE_settings)")
    fresh: bool = opt(False, "delete earlier runs under --runs and --results' settings", action="store_true")
    compare: str = opt("", "a committed demo.json to print this run's table beside")
    train_args: list[str] = field(default_factory=list)  # what the command line does not know, for train.py

    @property
    def columns(self) -> tuple[str, ...]:
        """The metrics each method's row prints."""
        return COLUMNS + (("fine-tune",) if self.finetune_epochs else ()) + (TRANSFER if self.transfer else ())

    def side_by_side_branches(self) -> int:
        """branch_jobs, where None (the default) is every branch at once on 2 cores or more when settings
        run one at a time: 2 processes of 1 thread train 1.7x what 1 of 2 threads does (BENCHMARKS.md)."""
        if self.branch_jobs is not None:
            return self.branch_jobs
        return len(self.methods) if (os.cpu_count() or 1) >= 2 and self.jobs == 1 else 1


def parser(description=""):
    """The command line, one flag per DemoArgs field (train_args: whatever it does not know)."""
    p = argparse.ArgumentParser(description=description)
    for f in fields(DemoArgs):
        if f.name != "train_args":
            meta = dict(f.metadata)
            flag = meta.pop("flag", "--" + f.name.replace("_", "-"))
            p.add_argument(flag, dest=f.name, default=getattr(DemoArgs(), f.name), **meta)
    return p


def parse_args(argv=None, description=""):
    """The command line as DemoArgs; options it does not know go to train.py."""
    p = parser(description)
    ns, train_args = p.parse_known_args(argv)
    given = {a.split("=")[0] for a in (argv if argv is not None else sys.argv[1:]) if a.startswith("--")}
    for k, v in FIGURES.get(ns.figure, {}).items():  # a figure's settings, unless given on the command line
        if f"--{k}" not in given:
            setattr(ns, k, v)
    for m in ns.methods:
        key, _, rule = parse_method(m)
        if key not in VARIANTS or rule not in DELTA_RULES:
            p.error(f"--methods {m}: expected one of {list(VARIANTS)}, soft:STRATEGY or weighted@shares")
    return DemoArgs(**vars(ns), train_args=train_args)
