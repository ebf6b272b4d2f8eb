"""What make demo writes: Table 2's rows (mean ± SD over seeds, paired differences
against xID with 95% intervals), the comparison with a committed reference and the committed seeds' spread, demo.md
and demo.json, and where the minutes went. demo.py runs the settings; this says what they gave."""

import json
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from statistics import mean, stdev

import numpy as np
import torch

from losses import VARIANTS
from tools import figures

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("R@1", "R@5", "1-shot", "5-shot", "AUROC")
TRANSFER = ("transfer R@1", "transfer R@5", "transfer 1-shot", "transfer 5-shot")  # --transfer's columns


def method_name(method):
    """Table 2's name of 'weighted', 'soft:oracle' (Table 1's targets): Weighted-xID, Soft-xID (oracle targets)."""
    key, _, targets = method.partition(":")
    return VARIANTS[key].name + (f" ({targets} targets)" if targets else "")


def described(settings, delta=None):
    """A row's own settings in words, with eq. (6)'s delta where its weights read it; lr_min is the command's."""
    words = []
    for k, v in settings.items():
        words += [f"delta {delta:.2f}"] if k == "kappa" and delta is not None else []
        words += [f"{v} targets" if k == "soft_targets" else f"{k} {v:g}"] if k != "lr_min" else []
    return ", ".join(words) or "none"


def shown_method(methods):
    """The branch whose evaluation pictures demo.md shows (only it draws them): Weighted-xID's, Fig. 5's subject."""
    return "weighted" if "weighted" in methods else methods[-1]


@contextmanager
def timed(split, phase):
    """Add the seconds spent inside the block to split[phase]."""
    t0 = time.time()
    try:
        yield
    finally:
        split[phase] = split.get(phase, 0.0) + time.time() - t0


def ci95(values):
    """Half-width of the 95% confidence interval of the mean (Student's t), 0 for one value."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return 0.0
    from scipy import stats

    return float(stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values)))


def fmt(values):
    if len(values := [v for v in values if v is not None]) < 2:
        return f"{100 * values[0]:.1f}" if values else "-"
    return f"{100 * mean(values):.1f} ± {100 * stdev(values):.1f}"  # the sample SD (ddof 1)


def fmt_diff(diffs):
    """Mean paired difference and its 95% CI over seeds, in points."""
    if not (diffs := [d for d in diffs if d is not None]):
        return "-"
    m, h = 100 * mean(diffs), 100 * ci95(diffs)
    return f"{m:+.1f}" if len(diffs) == 1 else f"{m:+.1f} [{m - h:+.1f}, {m + h:+.1f}]"


def tables(results, faulty, methods, columns):
    """Mean ± SD over seeds per method, then each method minus the first on the same seed."""
    show_soft = any(VARIANTS[m.partition(":")[0]].soft for m in methods)  # an all-✗ column says nothing
    last = {m: results[-1][faulty][m] for m in methods}  # a method's own settings are the same on every seed
    said = [f"{method_name(m)}: {described(r['ran_with'], r.get('delta'))}" for m, r in last.items() if "ran_with" in r]
    lines = [f"Each row's own settings (the rest are the command's): {'; '.join(said)}.\n"] if said else []
    lines.append("| Method | Weights | " + ("Soft targets | " if show_soft else "") + " | ".join(columns) + " |")
    lines.append("|---|:-:|" + (":-:|" if show_soft else "") + "---:|" * len(columns))
    for m in methods:
        v, targets = VARIANTS[m.partition(":")[0]], m.partition(":")[2]
        soft = f"{(targets or 'ccp') if v.soft else '✗'} | " if show_soft else ""
        cells = " | ".join(fmt([r[faulty][m][c] for r in results]) for c in columns)
        lines.append(f"| {method_name(m)} | {v.weights if v.weights != 'none' else '✗'} | {soft}{cells} |")
    capped = {(str(n), c) for r in results for m in methods for n, c in capped_shots(r[faulty][m]).items()}
    lines += [
        f"\n{n}-shot: the {c}-shot figure (the smallest class has {c} training videos)" for n, c in sorted(capped)
    ]
    base, diff_cols, n = methods[0], [c for c in columns if c != "AUROC"], len(results)
    spread = f"mean [95% CI over {n} seeds]" if n > 1 else "one seed, so no interval: run more seeds (--seeds) for one"
    lines += ["", f"Paired differences against {method_name(base)} (same seed, same warm-up), in points: {spread}.", ""]
    lines += ["| Method | " + " | ".join(f"Δ {c}" for c in diff_cols) + " |", "|---|" + "---:|" * len(diff_cols)]
    for m in methods[1:]:
        pairs = [[(r[faulty][m][c], r[faulty][base][c]) for r in results] for c in diff_cols]
        cells = [fmt_diff([None if a is None else a - b for a, b in column]) for column in pairs]
        lines.append(f"| {method_name(m)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def capped_shots(row):
    """shot() reads the capped shot's figure into the n-shot column: {n: the shot it holds}, said under the table."""
    return row.get("protocols", {}).get("fewshot", {}).get("capped", {})


# The committed settings the footer's ranges come from: R0's 8-seed check and the claims rerun's, both at make demo's
# regime on today's training code (the first claims run and the branch-length screen ran older code)
SPREAD_FROM = ("lab/results/spread/check_r0/demo_settings", "lab/results/claims/rerun/settings")
SAME_REGIME_BUT = {"transfer", "finetune_epochs", "train_args"}  # in a key, but not what sets the seeds' noise
DIFF_COLUMNS = COLUMNS[:-1]  # AUROC aside: xID has no weights to compare


def regime(key):
    return {k: v for k, v in key.items() if k not in SAME_REGIME_BUT}


def paired_spread(keys, root=ROOT):
    """{(level, method, column): [method - xID, one per seed]} over the committed settings (SPREAD_FROM) whose key is
    `keys[level]` but for SAME_REGIME_BUT, each seed once; and the folders they came from."""
    per_seed, sources = {}, set()
    for path in (p for folder in SPREAD_FROM for p in sorted(root.glob(f"{folder}/seed*_faulty*.json"))):
        saved = json.loads(path.read_text())
        key, rows = keys.get(saved["faulty"]), saved["rows"]
        if key is None or regime(saved["key"]) != regime(key) or "xid" not in rows:
            continue
        sources.add(str(path.parent.relative_to(root)))
        for m, c in ((m, c) for m in rows if m != "xid" for c in DIFF_COLUMNS if rows[m].get(c) is not None):
            per_seed.setdefault((saved["faulty"], m, c), {}).setdefault(saved["seed"], rows[m][c] - rows["xid"][c])
    return {k: list(v.values()) for k, v in per_seed.items()}, sorted(sources)


def seed_range(diffs):
    """Where 95% of the seeds' paired differences fall: Student's prediction interval for one more seed, mean ± t SD
    sqrt(1 + 1/n); None below two seeds."""
    if len(diffs) < 2:
        return None
    half = ci95(diffs) * (len(diffs) + 1) ** 0.5
    return mean(diffs) - half, mean(diffs) + half


BESIDE = "## This run beside the reference, and the seeds' spread\n"  # demo.md's heading of compare's text


def compare(results, reference, args, spread=None):
    """This run's means beside a reference's (a committed demo.json of the same settings), then each method's
    difference from xID beside the range the committed seeds at this regime put it in (`spread`: paired_spread's)."""
    lines, (measured, sources) = (
        [f"\nThis run beside the reference ({args.compare}), in %: this / reference (difference)."],
        spread or ({}, []),
    )
    for faulty in args.faulty:
        if not (ref := [r[str(faulty)] for r in reference["results"] if str(faulty) in r]):
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
                a, b = (100 * mean(mine), 100 * mean(theirs)) if mine and theirs else (None, None)
                cells.append("-" if a is None else f"{a:.1f} / {b:.1f} ({a - b:+.1f})")
            lines.append(f"| {method_name(m)} | " + " | ".join(cells) + " |")
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
            "Inside it, a difference is what seeds alone give.\n",
            "| Method - xID | " + " | ".join(DIFF_COLUMNS) + " |",
            "|---|" + "---:|" * len(DIFF_COLUMNS),
        ]
        for m in methods:
            cells = []
            for c in DIFF_COLUMNS:
                seen, d = (
                    measured.get((faulty, m, c), []),
                    100 * mean(r[faulty][m][c] - r[faulty]["xid"][c] for r in results),
                )
                lo, hi = (100 * x for x in band) if (band := seed_range(seen)) else (None, None)
                where = "inside" if band and lo <= d <= hi else "OUTSIDE"
                cells.append(f"{d:+.1f}, {where} {lo:+.1f} … {hi:+.1f} ({len(seen)} seeds)" if band else "-")
            lines.append(f"| {method_name(m)} | " + " | ".join(cells) + " |")
    lines.append(
        f"\nThis run: {cpu_kind()}. The same seed on another CPU kind or thread count deals another table: its kernels "
        "(AVX2, AVX-512, AMX) and reduction orders round differently, and the difference grows over training (the "
        "reference's demo.md has its command and timing). Over seeds: `python -m lab.sweep` (README)."
    )
    return "\n".join(lines)


def write_results(args, results, deltas, root, minutes, argv, reused, shown):
    """RESULTS/demo.md and demo.json, and the pictures of the run folder ROOT (the last setting trained here), of which
    the branch `shown` (its folder, its method's name) draws the evaluation's; demo.md links them.
    -> [demo.md, demo.json, *pictures]"""
    out, pictures = Path(args.results), []
    out.mkdir(parents=True, exist_ok=True)
    for png in ("scores_weights.png", "retrievals.png") if root else ():
        if (made := root / shown[0] / png).exists():
            pictures.append(Path(shutil.copy(made, out / f"demo_{png}")))
    if root and args.figures:  # the mechanism as it trained: curves, and the scores under the weights
        pictures += [Path(shutil.copy(made, out / f"demo_{made.name}")) for made in figures.run_pictures(root)]
    command = " ".join(["python demo.py", *(argv if argv is not None else sys.argv[1:])])
    total = len(args.seeds) * len(args.faulty)
    timing = f" for the {total - reused} of {total} settings not read from earlier runs' files" if reused else " in all"
    text = [
        "# Demo results\n",
        f"`{command}`: seeds {args.seeds}; warm-up {args.warmup_epochs} epochs of xID, then {args.epochs} epochs per "
        f"method; {minutes:.1f} minutes{timing}. Metrics in %: test videos query the train split (R@k, Euclidean "
        "distance on the last feature map), linear SVMs on n train videos per class (n-shot, raw features), and the "
        "AUROC of the bank scores for the known faulty positives (natural and injected). Mean ± std over seeds.\n",
    ]
    for faulty in args.faulty:
        text += [f"## {faulty:.0%} injected faulty positives (delta = {deltas[faulty]:.2f})\n"]
        text += [tables(results, faulty, args.methods, args.columns), ""]
    if pictures:
        text += [f"## Pictures of {root.name}, the last setting trained here\n"]
        text += [
            f"The training of each of its runs, and {shown[1]}'s evaluation (its scores and weights, retrievals).\n"
        ]
        text += [f"![{p.stem}]({p.name})\n" for p in pictures]
    (out / "demo.md").write_text("\n".join(text).rstrip("\n") + "\n")  # one line ends it: sections follow (demo.py)
    numbers = {"args": {**vars(args), "columns": args.columns}, "minutes": minutes}
    numbers |= {
        "deltas": {str(k): v for k, v in deltas.items()},
        "results": [{str(k): v for k, v in r.items()} for r in results],
    }
    (out / "demo.json").write_text(json.dumps(numbers, indent=1))
    print("\n".join(text))
    return [out / "demo.md", out / "demo.json", *pictures]


def cpu_kind():
    """The CPU the minutes belong to: its model, torch's widest vector kernels (AVX2 or AVX512: the demo's time differs
    about 2x), AMX if it has it, and the threads."""
    found = {}
    for line in (Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else "").splitlines():
        found.setdefault(line.partition(":")[0].strip(), line.partition(":")[2].strip())
    amx = ", AMX" if "amx_tile" in found.get("flags", "").split() else ""
    cpu = found.get("model name", "unknown CPU")
    return f"{cpu}, {torch.backends.cpu.get_cpu_capability()}{amx}, {torch.get_num_threads()} threads"


def time_split(data_seconds, roots, total_seconds):
    """Where the demo's minutes went, each phase summed over the settings run (lab/BENCHMARKS.md's make demo rows)."""
    phases = {"data generation": data_seconds}
    for path in (Path(r) / "time_split.json" for r in roots):
        for phase, seconds in (json.loads(path.read_text()) if path.exists() else {}).items():
            phases[phase] = phases.get(phase, 0.0) + seconds
    phases["other (start-up, tables, figures)"] = max(0.0, total_seconds - sum(phases.values()))
    said = ", ".join(f"{phase} {seconds / 60:.1f} min" for phase, seconds in phases.items())
    return f"Time split: {said}; {total_seconds / 60:.1f} min in all, on {cpu_kind()}."
