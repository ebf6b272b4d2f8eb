"""The demo's interface: DemoArgs, what one run of experiments/demo.py trains and evaluates, typed, with
`make demo`'s regime as its defaults; and parse_args, the command line that fills it. The lab's claims,
sweeps and screens build a DemoArgs of their own (lab/README.md).

    python -m experiments.demo --help      # every option, with its default: DemoArgs()'s

Tests: tests/test_demo.py, tests/test_setting_keys.py
"""

import argparse
import os
import sys
from dataclasses import dataclass, field, fields

from experiments.demo_report import COLUMNS, DELTA_RULES, parse_method
from losses import VARIANTS

TRANSFER = ("transfer R@1", "transfer R@5", "transfer 1-shot", "transfer 5-shot")  # --transfer's columns
FIGURES = {"noisy": dict(methods=["xid", "weighted", "oracle"], faulty=[0.0, 0.25, 0.5, 0.75], seeds=[0, 1, 2])}


@dataclass
class DemoArgs:
    """What a demo run trains and evaluates. The defaults are `make demo`'s regime: config.PRESETS["demo"]'s
    set and epochs, five methods, 2 clips per video in evaluation (the paper's 10 is a named deviation)."""

    data: str = "data/synth_src2p"  # generated when missing (experiments/sets.py), never into a user's folder
    runs: str = "runs/demo"  # the warm-ups and branches
    results: str = "runs/demo"  # demo.md, demo.json and the finished settings
    methods: list[str] = field(default_factory=lambda: ["xid", "weighted", "soft", "robust", "oracle"])
    seeds: list[int] = field(default_factory=lambda: [0])
    faulty: list[float] = field(default_factory=lambda: [0.5])  # shares of injected faulty positives
    warmup_epochs: int = 30
    epochs: int = 4  # of each branch
    eval_clips: int = 2  # clips per video for retrieval and few-shot
    finetune_epochs: int = 0  # a fine-tune column of this many epochs; 0: none
    trials: int = 50  # few-shot SVM trials
    transfer: str | None = None  # also evaluate each branch on this set of classes pre-training never saw
    preset: str = "demo"  # the train.py preset the runs start from
    train_args: list[str] = field(default_factory=list)  # passed on to train.py, e.g. ["--lr", "3e-4"]
    workers: int | None = None  # loader workers of training and evaluation (None: the preset's, and 1)
    jobs: int = 1  # settings side by side, as processes
    branch_jobs: int = 1  # a setting's branches side by side, as processes
    warmup_ranks: int = 1  # the warm-up as this many DDP processes (torchrun, gloo)
    figures: bool = True  # the per-run analysis plots
    figure: str | None = None  # the settings of a paper figure (FIGURES)
    settings: str = ""  # the finished settings' folder under `results` (default: FIGURE_settings)
    fresh: bool = False  # delete earlier runs and settings first (else they resume)
    compare: str = ""  # a committed demo.json to print this run's table beside

    @property
    def columns(self) -> tuple[str, ...]:
        """The metrics each method's row prints."""
        return COLUMNS + (("fine-tune",) if self.finetune_epochs else ()) + (TRANSFER if self.transfer else ())


def parse_args(argv=None, description=""):
    """The command line as DemoArgs; options it does not know go to train.py (train_args)."""
    d = DemoArgs()
    p = argparse.ArgumentParser(
        description="The demo: the paper's Table 2 and Fig. 7 on the synthetic dataset, where the truth is known."
    )
    p.add_argument(
        "--data",
        default=d.data,
        help="generated here when missing (never into a user's folder), with its SYNTH_SETS options; "
        "data/synth2000 is 10 classes x 200 training videos",
    )
    p.add_argument("--runs", default=d.runs)
    p.add_argument(
        "--results",
        default=d.results,
        help="where demo.md, demo.json and the finished settings go (default: beside the runs; the tracked "
        "results/ are remade only by `python -m lab.claims report`)",
    )
    p.add_argument("--figure", choices=sorted(FIGURES), help="the settings of a paper figure (methods, levels, seeds)")
    p.add_argument(
        "--methods",
        nargs="+",
        default=d.methods,
        help=f"first is the baseline; one of {list(VARIANTS)}, soft:STRATEGY (Table 1's targets) or "
        "weighted@shares (delta from the natural + injected share, a deviation)",
    )
    p.add_argument("--seeds", type=int, nargs="+", default=d.seeds)
    p.add_argument("--faulty", type=float, nargs="+", default=d.faulty, help="shares of injected faulty positives")
    p.add_argument("--warmup-epochs", type=int, default=d.warmup_epochs)
    p.add_argument("--epochs", type=int, default=d.epochs, help="epochs of each branch")
    p.add_argument(
        "--finetune-epochs",
        type=int,
        default=d.finetune_epochs,
        help="add a fine-tune column: the paper's recipe (evaluate.py) for this many epochs (paper: 200; "
        "on the demo's set it converges only with the full schedule, results/finetune_curve.md, about "
        "33 min a checkpoint on 2 cores); 0: none",
    )
    p.add_argument("--trials", type=int, default=d.trials)
    p.add_argument(
        "--eval-clips",
        type=int,
        default=d.eval_clips,
        help="clips per video for retrieval and few-shot (paper: 10; fewer is a named deviation)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=d.workers,
        help="DataLoader workers of training and evaluation (default: the demo preset's 0 for training, 1 for "
        "evaluation)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=d.jobs,
        help="settings run side by side as processes (a GPU box's cores, several GPUs); each keeps its own "
        "loader --workers",
    )
    p.add_argument(
        "--branch-jobs",
        type=int,
        default=None,
        help="a setting's branches trained and evaluated side by side, each a process with its share of the "
        "threads (default: all of them at once when there are 2 cores or more and --jobs is 1; 1: one after "
        "another with every thread)",
    )
    p.add_argument(
        "--warmup-ranks",
        type=int,
        default=d.warmup_ranks,
        help="train the warm-up as this many DDP processes (torchrun, gloo) of one share of the threads each: "
        "on 2 cores about 1.7x faster, but each rank's batch norm sees its share of the batch, so it changes the "
        "arithmetic; not the default until shown equal to 1 within seed noise (results/warmup_ranks/)",
    )
    p.add_argument("--no-figures", dest="figures", action="store_false", help="skip the per-run analysis plots")
    p.add_argument("--fresh", action="store_true", help="delete earlier runs under --runs and --results' settings")
    p.add_argument("--compare", default=d.compare, help="a committed demo.json to print this run's table beside")
    p.add_argument(
        "--transfer",
        default=d.transfer,
        help="also evaluate each branch (retrieval, few-shot) on this set, whose classes pre-training never "
        "saw, as the paper's transfer to UCF101/HMDB51; data/synth_transfer is generated when missing",
    )
    ns, train_args = p.parse_known_args(argv)
    given = {a.split("=")[0] for a in (argv if argv is not None else sys.argv[1:]) if a.startswith("--")}
    for k, v in FIGURES.get(ns.figure, {}).items():  # a figure's settings, unless given on the command line
        if f"--{k}" not in given:
            setattr(ns, k, v)
    for m in ns.methods:
        key, _, rule = parse_method(m)
        if key not in VARIANTS or rule not in DELTA_RULES:
            p.error(f"--methods {m}: expected one of {list(VARIANTS)}, soft:STRATEGY or weighted@shares")
    if ns.branch_jobs is None:  # 2 processes of 1 thread train 1.7x what 1 of 2 threads does (BENCHMARKS.md)
        ns.branch_jobs = len(ns.methods) if (os.cpu_count() or 1) >= 2 and ns.jobs == 1 else 1
    known = {f.name for f in fields(DemoArgs)}
    return DemoArgs(**{k: v for k, v in vars(ns).items() if k in known}, train_args=train_args)
