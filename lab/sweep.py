"""The appendix's parametric studies on the synthetic set: one knob of one method swept, every value
trained from the same xID warm-up as xID itself and as the method at its default, so each point is a
paired difference over seeds with a 95% t-interval.

    delta   Weighted-xID's shape parameter of eq. (6) (Appendix, "Effect of shape parameter delta";
            paper: not very sensitive): the weights' midpoint sits at mu + delta sigma of the bank
            scores. -2, -1, 0, 1 and "known", the paper's rule and demo.py's branch (delta = Phi^-1
            of the known injected share), at 25% and 50% injected faulty positives.
    lambda  Soft-xID's mixing coefficient of eqs. (8)-(9), cycle-consistent targets (Appendix, "Effect
            of mixing coefficient lambda"; paper: best between 0.25 and 0.5, pre-training fails
            completely above 0.65). 0, 0.25, 0.5 (default), 0.65, 0.8, 0.9, 1 at 50%.

    python -m lab.sweep delta                        # seeds 0-2: runs/demo/delta.md, delta.png
    python -m lab.sweep lambda
    python -m lab.sweep delta --values -2 0 known --faulty 0.5 --seeds 0 1 2 3 4
    python -m lab.sweep lambda --values 0.3 0.5 --faulty 0.25 --runs runs/make_demo --results runs/lam03
                                     # make demo's seed 0 reused: lam 0.3 against 0.5 and xID, seeds 0-2

Warm-ups and default branches are demo.py's, in the same runs/ folder, whose regime (set, epochs) is the
default: after `make demo` or `python demo.py` a sweep trains only its new
values. Finished points are kept in RESULTS/KNOB_settings/seedS_faultyF.json as they finish, like demo.py's
settings (RESULTS is runs/demo unless --results says otherwise), and a later run adds only what is missing.
Other options go to train.py, as in demo.py.
"""

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import demo
import evaluate
from demo import DemoArgs
from lab import figures
from losses import VARIANTS
from tools import demo_report, synthetic


@dataclass(frozen=True)
class Knob:
    method: str  # the branch's --loss
    flag: str  # train.py's option for it
    values: tuple  # the grid, as written on the command line ("known": delta from the known share)
    default: str  # the value of demo.py's branch of that method, which the sweep shares
    faulty: tuple  # shares of injected faulty positives
    label: str


KNOBS = {
    "delta": Knob(
        "weighted",
        "--delta",
        ("-2", "-1", "0", "1", "known"),
        "known",
        (0.25, 0.5),
        r"shape parameter $\delta$ of eq. (6)",
    ),
    "lambda": Knob(
        "soft",
        "--lam",
        ("0", "0.25", "0.5", "0.65", "0.8", "0.9", "1"),
        "0.5",
        (0.5,),
        r"mixing coefficient $\lambda$ of eqs. (8)-(9), CCP targets",
    ),
}
COLUMNS = ("R@1", "R@5", "1-shot", "5-shot")


@dataclass
class SweepArgs(DemoArgs):
    """A sweep's runs: the demo's (its warm-ups and default branches are shared), one knob and its values."""

    knob: str = "delta"
    values: list[str] = field(default_factory=list)


def branch(knob, name, value, delta):
    """(folder, train.py options) of one value's branch. The default's options are exactly demo.py's
    for that method, so its branch (and a finished Fig. 7 or Table 2 run) is shared, not retrained."""
    options = ["--loss", knob.method, "--delta", f"{delta:.4f}"]  # demo.py's, the paper's delta
    if value == knob.default:
        return knob.method, options
    if value == "known":
        raise ValueError(f"--values known: only delta has a known-share value, not {name}")
    return f"{knob.method}_{name}{value}", options + [knob.flag, value]  # argparse: the last --delta wins


def points_file(args, seed, faulty):
    return Path(args.results) / f"{args.knob}_settings" / f"{demo.setting_name(seed, faulty)}.json"


def run_point(args, seed, faulty):
    """xID and every value at one (seed, level), each from the warm-up; a finished value is read from
    the points file. Returns {"delta": known-share delta, "rows": {"xid" | value: metrics}}."""
    knob = KNOBS[args.knob]
    path = points_file(args, seed, faulty)
    key = demo.setting_key(args, faulty) | {"knob": args.knob}
    saved = json.loads(path.read_text()) if path.exists() else None
    if saved is None or saved["key"] != key:
        if saved is not None:
            print(f"[sweep] {path} was made with other settings: running it again")
        saved = {"key": key, "seed": seed, "faulty": faulty, "delta": None, "rows": {}}
    missing = [v for v in ["xid", *args.values] if v not in saved["rows"]]
    if not missing:
        print(f"[sweep] seed {seed} faulty {faulty:.0%}: done, from {path}")
        return saved | {"reused": True}
    root, common, delta = demo.warm_up(args, seed, faulty)
    saved["delta"] = delta
    for value in missing:
        name, options = (
            ("xid", ["--loss", "xid", "--delta", f"{delta:.4f}"])
            if value == "xid"
            else branch(knob, args.knob, value, delta)
        )
        saved["rows"][value] = demo.run_branch(args, root, common, name, options)
        print(
            f"[sweep] seed {seed} faulty {faulty:.0%} {args.knob} {value}: "
            + json.dumps({k: saved["rows"][value][k] for k in COLUMNS})
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(saved, indent=1))
        tmp.replace(path)  # after every value: a killed sweep keeps what finished
    return saved


def tables(points, knob_name, values, faulty):
    """Means over seeds per value, then each value minus xID and minus the default, paired by seed."""
    knob = KNOBS[knob_name]
    rows = [p["rows"] for p in points]
    deltas = [p["delta"] for p in points]

    def plain(v):
        return f"known, {sum(deltas) / len(deltas):+.2f}" if v == "known" else v

    def show(v):
        return plain(v) + (" (default)" if v == knob.default else "")

    lines = [
        f"| {knob_name} | " + " | ".join(COLUMNS) + " | AUROC | mean w faulty | mean w clean |",
        "|---|" + "---:|" * (len(COLUMNS) + 3),
    ]
    for v in ["xid", *values]:
        name = "xID" if v == "xid" else show(v)
        cells = [demo_report.fmt([r[v][c] for r in rows]) for c in (*COLUMNS, "AUROC", "weight_faulty", "weight_clean")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for base, what in (("xid", "xID"), (knob.default, f"the default ({knob_name} {plain(knob.default)})")):
        lines += [
            "",
            f"Paired differences against {what}, same seed and warm-up, in points: mean [95% CI over "
            f"{len(rows)} seeds].",
            "",
            f"| {knob_name} | " + " | ".join(f"Δ {c}" for c in COLUMNS) + " |",
            "|---|" + "---:|" * len(COLUMNS),
        ]
        for v in values:
            if v != base:
                cells = [demo_report.fmt_diff([r[v][c] - r[base][c] for r in rows]) for c in COLUMNS]
                lines.append(f"| {show(v)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m lab.sweep",
        description=__doc__.split("\n\n")[0],
        epilog="Other options go to train.py, as in demo.py. Examples: python -m lab.sweep lambda; "
        "python -m lab.sweep delta --values -2 0 known --faulty 0.5 --seeds 0 1 2 3 4",
    )
    each = "; ".join
    p.add_argument(
        "knob",
        choices=sorted(KNOBS),
        help=each(f"{k}: {VARIANTS[v.method].name}'s {v.flag}" for k, v in KNOBS.items()),
    )
    grids = each(f"{k}: {' '.join(v.values)}" for k, v in KNOBS.items())
    p.add_argument(
        "--values",
        nargs="+",
        help=f"the grid, the appendix's by default ({grids}); 'known' is delta from the known injected share, "
        "the paper's rule and the demo's default",
    )
    levels = each(f"{k}: {' '.join(str(f) for f in v.faulty)}" for k, v in KNOBS.items())
    p.add_argument("--faulty", type=float, nargs="+", help=f"shares of injected faulty positives (default {levels})")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one paired point per seed (default 0 1 2)")
    demo_is = DemoArgs()  # make demo's regime, so that its warm-ups and default branches are reused
    p.add_argument("--data", default=demo_is.data, help=f"the demo's set (default {demo_is.data})")
    reused = "demo.py's, whose warm-ups and branches are reused (default runs/demo; make demo's: runs/make_demo)"
    p.add_argument("--runs", default="runs/demo", help=reused)
    p.add_argument(
        "--results",
        default="runs/demo",
        help="where KNOB.md, KNOB.png and KNOB_settings/ go (default: beside the runs, never the tracked "
        "lab/results/; the claims' sweeps are `python -m lab.claims run`'s)",
    )
    warm, each_branch = demo_is.warmup_epochs, demo_is.epochs
    p.add_argument("--warmup-epochs", type=int, default=warm, help=f"the xID warm-up's (default {warm}, make demo's)")
    p.add_argument("--epochs", type=int, default=each_branch, help=f"a branch's (default {each_branch}, make demo's)")
    p.add_argument("--trials", type=int, default=50, help="few-shot SVM trials (default 50)")
    p.add_argument("--workers", type=int, default=1, help="DataLoader workers (default 1)")
    ns, train_args = p.parse_known_args(argv)
    knob = KNOBS[ns.knob]
    ns.values = ns.values or list(knob.values)
    ns.faulty = ns.faulty or list(knob.faulty)
    if ns.knob != "delta" and "known" in ns.values:
        p.error("--values known: only delta has a known-share value")
    # the paper's 10 clips per video in evaluation, no per-run plots
    args = SweepArgs(**vars(ns), train_args=train_args, eval_clips=evaluate.CLIPS, figures=False)
    t0 = time.time()
    synthetic.ensure(args.data)
    points = {f: [run_point(args, s, f) for s in args.seeds] for f in args.faulty}
    write_results(args, points, (time.time() - t0) / 60, argv)


def write_results(args, points, minutes, argv):
    knob = KNOBS[args.knob]
    out = Path(args.results)
    command = "python -m lab.sweep " + " ".join(argv if argv is not None else sys.argv[1:])
    reused = sum(p.get("reused", False) for pts in points.values() for p in pts)
    total = sum(len(pts) for pts in points.values())
    timing = (
        f"{minutes:.1f} minutes"
        + ("" if not reused else f" for the {total - reused} of {total} (seed, level)s not read from their files")
        if reused < total
        else f"every (seed, level) read from {args.knob}_settings/"
    )
    text = [
        f"# Effect of {args.knob} in {VARIANTS[knob.method].name} (appendix, parametric studies)\n",
        f"`{command.strip()}`: seeds {args.seeds}; each value {args.epochs} epochs from the same "
        f"{args.warmup_epochs}-epoch xID warm-up as xID and the default (demo.py's runs); {timing}. Metrics in %, "
        f"as in demo.md; mean ± std over seeds. mean w: the weights of eq. "
        f"(6) on the known faulty and clean positives, with the branch's delta (xID's row: those that the "
        f"default delta would give; xID does not use them).\n",
    ]
    for f, pts in points.items():
        text += [f"## {f:.0%} injected faulty positives\n", tables(pts, args.knob, args.values, f), ""]
    for metric, png in (("R@5", f"{args.knob}.png"), ("5-shot", f"{args.knob}_5shot.png")):
        curves = {
            f"{f:.0%}": {v: [p["rows"][v][metric] for p in pts] for v in args.values} for f, pts in points.items()
        }
        base = {f"{f:.0%}": [p["rows"]["xid"][metric] for p in pts] for f, pts in points.items()}
        figures.sweep(args.values, curves, base, metric, out / png, knob.label)
    text += [f"![{args.knob}]({args.knob}.png) ![{args.knob} 5-shot]({args.knob}_5shot.png)", ""]
    (out / f"{args.knob}.md").write_text("\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main()
