"""The demo's names and tables: what a method is called (Table 2's rows, Table 1's targets, the delta rule),
the means ± SD and paired 95% intervals over seeds, the comparison with a committed reference, and
RESULTS/NAME.md and NAME.json. experiments/demo.py runs the settings; this writes what they gave.

    python -m experiments.demo      # writes runs/demo/demo.md and demo.json through write_results

Tests: tests/test_demo_report.py
"""

import json
import shutil
import sys
from pathlib import Path
from statistics import mean, stdev

from analysis import figures
from experiments.reuse import described
from losses import VARIANTS

COLUMNS = ("R@1", "R@5", "1-shot", "5-shot", "AUROC")
DELTA_RULES = {"": "the injected share (paper)", "shares": "natural + injected share (deviation)"}


def parse_method(method):
    """'weighted', 'soft:oracle' (soft targets of Table 1), 'weighted@shares' (delta rule) ->
    (loss, targets, rule)."""
    method, _, rule = method.partition("@")
    key, _, targets = method.partition(":")
    return key, targets, rule


def branch_folder(method):
    """A method's branch folder in a setting's run folder: 'soft:oracle' -> soft_oracle."""
    return method.replace(":", "_").replace("@", "_")


def shown_method(methods):
    """The branch whose evaluation pictures (Fig. 5's scores and weights, Fig. 11's retrievals) the demo
    shows: Weighted-xID's, as Fig. 5 is about the weights, else the last method's. Only it draws them."""
    return "weighted" if "weighted" in methods else methods[-1]


def method_name(method):
    key, targets, rule = parse_method(method)
    return (
        VARIANTS[key].name
        + (f" ({targets} targets)" if targets else "")
        + (f" (delta from the {DELTA_RULES[rule]})" if rule else "")
    )


def fmt(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    if len(values) == 1:
        return f"{100 * values[0]:.1f}"
    return f"{100 * mean(values):.1f} ± {100 * stdev(values):.1f}"  # the sample SD (ddof 1)


def fmt_diff(diffs):
    """Mean paired difference and its 95% CI over seeds, in points; '+' marks an interval above 0."""
    diffs = [d for d in diffs if d is not None]
    if not diffs:
        return "-"
    m, h = 100 * mean(diffs), 100 * figures.ci95(diffs)
    if len(diffs) == 1:
        return f"{m:+.1f}"
    return f"{m:+.1f} [{m - h:+.1f}, {m + h:+.1f}]"


def tables(results, faulty, methods, columns):
    """Mean +- std over seeds per method, then each method minus xID on the same seed."""
    show_soft = any(VARIANTS[parse_method(m)[0]].soft for m in methods)  # an all-✗ column says nothing
    last = {m: results[-1][faulty][m] for m in methods}  # a method's own settings are the same on every seed
    said = [f"{method_name(m)}: {described(r['ran_with'], r.get('delta'))}" for m, r in last.items() if "ran_with" in r]
    lines = [f"Each row's own settings (the rest are the command's): {'; '.join(said)}.\n"] if said else []
    lines += [
        "| Method | Weights | " + ("Soft targets | " if show_soft else "") + " | ".join(columns) + " |",
        "|---|:-:|" + (":-:|" if show_soft else "") + "---:|" * len(columns),
    ]
    for m in methods:
        key, targets, _ = parse_method(m)
        v = VARIANTS[key]
        soft = f"{(targets or 'ccp') if v.soft else '✗'} | " if show_soft else ""
        cells = [fmt([r[faulty][m][c] for r in results]) for c in columns]
        lines.append(
            f"| {method_name(m)} | {v.weights if v.weights != 'none' else '✗'} | {soft}" + " | ".join(cells) + " |"
        )
    capped = {  # demo.shot reads the capped shot's figure into the n-shot column: say so under the table
        (str(n), c)
        for r in results
        for m in methods
        for n, c in r[faulty][m].get("protocols", {}).get("fewshot", {}).get("capped", {}).items()
    }
    lines += [
        f"\n{n}-shot: the {c}-shot figure (the smallest class has {c} training videos)" for n, c in sorted(capped)
    ]
    base = methods[0]
    diff_cols = [c for c in columns if c != "AUROC"]
    spread = (
        f"mean [95% CI over {len(results)} seeds]"
        if len(results) > 1
        else "one seed, so no interval: run more seeds (--seeds) for one"
    )
    lines += [
        "",
        f"Paired differences against {method_name(base)} (same seed, same warm-up), in points: {spread}.",
        "",
        "| Method | " + " | ".join(f"Δ {c}" for c in diff_cols) + " |",
        "|---|" + "---:|" * len(diff_cols),
    ]
    for m in methods[1:]:
        cells = [
            fmt_diff([None if r[faulty][m][c] is None else r[faulty][m][c] - r[faulty][base][c] for r in results])
            for c in diff_cols
        ]
        lines.append(f"| {method_name(m)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def compare(results, reference, args, spread=None):
    """This run's means beside a reference's (a committed demo.json made with the same settings), then each
    method's difference from xID beside the range that difference took over the seeds of the committed settings
    files at this regime (`spread`: paired_spread's), and whether it lies outside it."""
    lines = [f"\nThis run beside the reference ({args.compare}), in %: this / reference (difference)."]
    for faulty in args.faulty:
        ref = [r[str(faulty)] for r in reference["results"] if str(faulty) in r]
        if not ref:
            lines.append(f"{faulty:.0%}: the reference has no such setting")
            continue
        lines += [
            f"\n{faulty:.0%} injected",
            "| Method | " + " | ".join(COLUMNS) + " |",
            "|---|" + "---:|" * len(COLUMNS),
        ]
        for m in args.methods:
            cells = []
            for c in COLUMNS:
                mine = [r[faulty][m][c] for r in results if r[faulty][m][c] is not None]
                theirs = [r[m][c] for r in ref if m in r and r[m][c] is not None]
                if not mine or not theirs:
                    cells.append("-")
                    continue
                a, b = 100 * mean(mine), 100 * mean(theirs)
                cells.append(f"{a:.1f} / {b:.1f} ({a - b:+.1f})")
            lines.append(f"| {method_name(m)} | " + " | ".join(cells) + " |")
    lines += noise(results, args, spread or {})
    lines.append(
        "\nThe same seed on another machine or thread count also differs by float rounding, which grows over "
        "training; the reference's demo.md has its command and timing. Over seeds: `python -m lab.sweep` (README)."
    )
    return "\n".join(lines)


# The committed settings the footer's ranges come from: R0's 8-seed check (seeds 1210-1217) and the claims
# rerun's (seeds 1500-1514, run on a8be88a, whose training code is today's). Both are make demo's regime; the
# first claims run (lab/results/claims/settings) and the branch-length screen (lab/results/demo_screen) ran older
# code and are superseded by these (SUPERSEDED: a test holds the footer off them).
SPREAD_FROM = ("lab/results/spread/check_r0/demo_settings", "lab/results/claims/rerun/settings")
SUPERSEDED = ("lab/results/claims/settings", "lab/results/demo_screen")
SAME_REGIME_BUT = {"transfer", "finetune_epochs", "train_args"}  # in a key, but not what sets the regime's noise
DIFF_COLUMNS = COLUMNS[:-1]  # AUROC aside: xID has no weights to compare
ROOT = Path(__file__).resolve().parents[1]


def regime(key):
    return {k: v for k, v in key.items() if k not in SAME_REGIME_BUT}


def paired_spread(keys, root=ROOT):
    """{(level, method, column): [method - xID, one per seed]} over the committed settings files (SPREAD_FROM)
    whose key is `keys[level]` but for SAME_REGIME_BUT, each seed once; and the folders they came from."""
    per_seed, sources = {}, set()
    for path in (p for folder in SPREAD_FROM for p in sorted(root.glob(f"{folder}/seed*_faulty*.json"))):
        saved = json.loads(path.read_text())
        key, rows = keys.get(saved["faulty"]), saved["rows"]
        if key is None or regime(saved["key"]) != regime(key) or "xid" not in rows:
            continue
        sources.add(str(path.parent.relative_to(root)))
        for m, row in rows.items():
            for c in DIFF_COLUMNS:
                if m != "xid" and row.get(c) is not None:
                    per_seed.setdefault((saved["faulty"], m, c), {}).setdefault(saved["seed"], row[c] - rows["xid"][c])
    return {k: list(v.values()) for k, v in per_seed.items()}, sorted(sources)


def seed_range(diffs):
    """Where 95% of the seeds' paired differences fall, from those measured: Student's prediction interval for
    one more seed, mean ± t SD sqrt(1 + 1/n) (figures.ci95 is t SD / sqrt(n)); None below two seeds."""
    if len(diffs) < 2:
        return None
    half = figures.ci95(diffs) * (len(diffs) + 1) ** 0.5
    return mean(diffs) - half, mean(diffs) + half


def noise(results, args, spread):
    """Lines: each method's difference from xID on this run, beside where the committed seeds put it."""
    measured, sources = spread or ({}, [])
    lines = []
    for faulty in args.faulty:
        methods = [m for m in args.methods if m != "xid" and any((faulty, m, c) in measured for c in DIFF_COLUMNS)]
        if "xid" not in args.methods or not methods:
            lines.append(f"\n{faulty:.0%}: no committed settings at this regime measure the seeds' spread")
            continue
        seeds = max(len(measured.get((faulty, m, c), [])) for m in methods for c in DIFF_COLUMNS)
        other = f" (they ran without this run's {' '.join(args.train_args)})" if args.train_args else ""
        lines += [
            f"\nEach method's difference from xID on this run, in points, beside the range that 95% of seeds' "
            f"differences fall in, from the (up to) {seeds} seeds at {faulty:.0%} in {', '.join(sources)}{other}: "
            "paired (same seed, same warm-up), a prediction interval (CLAIMS.md: the check and the claims rerun). "
            "Inside it, a difference is what seeds alone give.",
            "",
            "| Method - xID | " + " | ".join(DIFF_COLUMNS) + " |",
            "|---|" + "---:|" * len(DIFF_COLUMNS),
        ]
        for m in methods:
            cells = []
            for c in DIFF_COLUMNS:
                seen = measured.get((faulty, m, c), [])
                d = 100 * mean(r[faulty][m][c] - r[faulty]["xid"][c] for r in results)
                if (band := seed_range(seen)) is None:
                    cells.append("-")
                    continue
                lo, hi = 100 * band[0], 100 * band[1]
                where = "inside" if lo <= d <= hi else "OUTSIDE"
                cells.append(f"{d:+.1f}, {where} {lo:+.1f} … {hi:+.1f} ({len(seen)} seeds)")
            lines.append(f"| {method_name(m)} | " + " | ".join(cells) + " |")
    return lines


def write_results(args, results, deltas, root, minutes, argv, reused=0, shown=None):
    """RESULTS/NAME.md and NAME.json, and the pictures of the run folder ROOT (the last setting trained here), of
    which the branch folder `shown` (default: the shown method's) draws the evaluation's; NAME.md links them.
    Returns the files written: NAME.md, NAME.json, then the pictures."""
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    name = args.figure or "demo"
    last = root / (shown or branch_folder(shown_method(args.methods))) if root else None
    pictures = []
    for png in ("scores_weights.png", "retrievals.png"):  # plots of the last seed and level's run
        if last and (last / png).exists():
            pictures.append(Path(shutil.copy(last / png, out / f"{name}_{png}")))
    if root and args.figures:  # the mechanism as it trained: curves, and the scores under the weights
        for made in figures.run_pictures(root):
            pictures.append(Path(shutil.copy(made, out / f"{name}_{made.name}")))
    command = "python -m experiments.demo " + " ".join(argv if argv is not None else sys.argv[1:])
    total = len(args.seeds) * len(args.faulty)
    timing = (
        " in all" if not reused else f" for the {total - reused} of {total} settings not read from earlier runs' files"
    )
    text = [
        f"# {'Demo results' if name == 'demo' else 'Fig. 7: faulty positives vs transfer'}\n",
        f"`{command.strip()}`: seeds {args.seeds}; warm-up {args.warmup_epochs} epochs of xID, then "
        f"{args.epochs} epochs per method; {minutes:.1f} minutes{timing}. Metrics in %: test videos query "
        f"the train split (R@k, Euclidean distance on the last feature map), linear SVMs on n train videos "
        f"per class (n-shot, raw features), and the AUROC of the bank scores for the known faulty "
        f"positives (natural and injected). Mean ± std over seeds.\n",
    ]
    for faulty in args.faulty:
        text += [
            f"## {faulty:.0%} injected faulty positives (delta = {deltas[faulty]:.2f})\n",
            tables(results, faulty, args.methods, args.columns),
            "",
        ]
    if len(args.faulty) > 1:
        for metric, png in (("R@5", f"{name}.png"), ("5-shot", f"{name}_5shot.png")):
            curves = {
                method_name(m): {f: [r[f][m][metric] for r in results] for f in args.faulty} for m in args.methods
            }
            figures.noisy(args.faulty, curves, metric, out / png, baseline=method_name(args.methods[0]))
        text += [f"![{name}]({name}.png) ![{name} 5-shot]({name}_5shot.png)", ""]
        pictures += [out / f"{name}.png", out / f"{name}_5shot.png"]
    if own := [p for p in pictures if p.name not in (f"{name}.png", f"{name}_5shot.png")]:
        shown_name = method_name(shown_method(args.methods))
        text += [
            f"## Pictures of {root.name}, the last setting trained here\n",
            f"The training of each of its runs, and {shown_name}'s evaluation (its scores and weights, retrievals).\n",
            *(f"![{p.stem}]({p.name})\n" for p in own),
        ]
    (out / f"{name}.md").write_text("\n".join(text) + "\n")
    (out / f"{name}.json").write_text(
        json.dumps(
            {
                "args": {**vars(args), "columns": args.columns},
                "minutes": minutes,
                "deltas": {str(k): v for k, v in deltas.items()},
                "results": [{str(k): v for k, v in r.items()} for r in results],
            },
            indent=1,
        )
    )
    print("\n".join(text))
    return [out / f"{name}.md", out / f"{name}.json", *pictures]
