"""The lab's figures: Fig. 7 over seeds (lab/claims_report.py) and the appendix's sweeps (lab/sweep.py), each with
its paired differences against the baseline; matplotlib, PNG files, in the style of evaluate.py's figures."""

import numpy as np

from tools.demo_report import ci95
from tools.figures import _save, legend_below, plt


def noisy(levels, curves, metric, path, chance=None, baseline=None):
    """Fig. 7. `curves` {method: {level: [value per seed]}}, seeds in the same order for every method;
    levels are shares of injected faults. With `baseline`, a second panel shows each method minus the
    baseline on the same seed: seed-to-seed spread that the methods share cancels there, which the
    overlapping bars of the first panel cannot show."""
    fig, axes = plt.subplots(1, 2 if baseline else 1, figsize=(10 if baseline else 5, 4.2), squeeze=False)
    ax = axes[0, 0]
    for method, per_level in curves.items():
        xs = [lv for lv in levels if per_level.get(lv)]
        means = [100 * np.mean(per_level[lv]) for lv in xs]
        errs = [100 * ci95(per_level[lv]) for lv in xs]
        ax.errorbar([100 * x for x in xs], means, yerr=errs, marker="o", capsize=3, label=method)
    if chance is not None:
        ax.axhline(100 * chance, color="grey", ls=":", label="chance")
    ax.set_ylabel(f"{metric} (%), mean and 95% CI")
    if baseline:
        ax = axes[0, 1]
        colours = {m: f"C{i}" for i, m in enumerate(curves)}  # the same colour as in the first panel
        for method, per_level in paired_differences(curves, baseline).items():
            xs = [lv for lv in levels if lv in per_level]
            ax.errorbar(
                [100 * x for x in xs],
                [100 * np.mean(per_level[lv]) for lv in xs],
                yerr=[100 * ci95(per_level[lv]) for lv in xs],
                marker="o",
                capsize=3,
                color=colours[method],
                label=f"{method} - {baseline}",
            )
        ax.axhline(0, color="grey", lw=1)
        ax.set_ylabel(f"method - {baseline} in {metric}, same seed (points)")
        ax.set_title(f"paired differences against {baseline}, mean and 95% CI", fontsize=9)
    axes[0, 0].set_title(f"{metric} of each method as the injected faults grow (Fig. 7)", fontsize=9)
    for ax in axes[0]:
        ax.set_xlabel("injected faulty positives (%)")
        ax.grid(alpha=0.3)
    legend_below(fig, axes[0, 0])  # the right panel's colours are the same
    _save(fig, path)


def sweep(values, curves, baselines, metric, path, xlabel, method=""):
    """`curves` {line: {value: [per seed]}}, `baselines` {line: [xID per seed, same seeds]}. Values
    are categories, in the given order ("known" is not a number). Left: mean and 95% CI per value, xID
    dashed in the line's colour; right: value minus xID on the same seed, mean and 95% CI. `method`, the
    one whose knob moves, heads the title."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    xs = np.arange(len(values))
    for i, (line, per_value) in enumerate(curves.items()):
        base = np.asarray(baselines[line])
        got = [v for v in values if per_value.get(v)]
        at = [values.index(v) for v in got]
        axes[0].errorbar(
            at,
            [100 * np.mean(per_value[v]) for v in got],
            yerr=[100 * ci95(per_value[v]) for v in got],
            marker="o",
            capsize=3,
            color=f"C{i}",
            label=line,
        )
        axes[0].axhline(100 * base.mean(), color=f"C{i}", ls="--", lw=1, label=f"{line}: xID")
        diffs = [np.asarray(per_value[v]) - base for v in got]
        axes[1].errorbar(
            at,
            [100 * d.mean() for d in diffs],
            yerr=[100 * ci95(d) for d in diffs],
            marker="o",
            capsize=3,
            color=f"C{i}",
            label=f"{line}: minus xID",
        )
    axes[0].set_ylabel(f"{metric} (%), mean and 95% CI")
    axes[0].set_title(f"{method + ': ' if method else ''}{metric} per {xlabel}; xID dashed", fontsize=9)
    axes[1].axhline(0, color="grey", lw=1)
    axes[1].set_ylabel(f"minus xID in {metric}, same seed (points)")
    axes[1].set_title("paired differences against xID, mean and 95% CI", fontsize=9)
    for ax in axes:
        ax.set_xticks(xs, values)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    legend_below(fig, axes[0])  # the right panel's colours are the same
    _save(fig, path)


def paired_differences(curves, baseline):
    """{method: {level: [method - baseline per seed]}} for every method but the baseline, at the
    levels both have."""
    base = curves[baseline]
    return {
        m: {lv: list(np.asarray(v) - np.asarray(base[lv])) for lv, v in per_level.items() if v and base.get(lv)}
        for m, per_level in curves.items()
        if m != baseline
    }
