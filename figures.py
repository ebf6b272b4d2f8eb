"""The paper's figures, drawn from evaluation results (matplotlib, PNG files).

    scores_and_weights  Fig. 5: histogram of bank scores vbar_i . abar_i, the known faulty positives
                        stacked in grey, and the weight function of eq. (6) over it
    per_class           Fig. 10: R@1 of each class
    retrievals          Fig. 11: a test query's middle frame and its top-4 retrievals, with classes
    noisy               Fig. 7: a metric against the share of injected faulty positives, one line
                        per method, mean and 95% confidence interval over seeds; beside it the paired
                        differences against the baseline, with their 95% intervals
    sweep               the appendix's "Effect of delta / lambda": a metric per value of one knob, one
                        line per noise level, xID dashed; beside it each value minus xID

    used by evaluate.py (analysis), demo.py (Fig. 7) and sweep.py (the appendix's sweeps)
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def scores_and_weights(scores, w, faulty, cfg, path):
    fig, ax = plt.subplots(figsize=(6, 3.5))
    s, f = scores.cpu().numpy(), faulty.cpu().numpy()
    bins = np.linspace(s.min(), s.max(), 40)
    ax.hist([s[~f], s[f]], bins=bins, stacked=True, color=["tab:red", "tab:gray"],
            label=["clean", "faulty positive (ground truth)"])
    ax.set_xlabel(r"bank score $\bar v_i^T \bar a_i$")
    ax.set_ylabel("instances")
    ax2 = ax.twinx()
    order = np.argsort(s)
    ax2.plot(s[order], w.cpu().numpy()[order], "k-", label="weight")
    ax2.set_ylim(0, 1.05)
    ax2.set_ylabel(rf"$w_i$, eq. (6) ($\delta$={cfg.delta:.2f}, $\kappa$={cfg.kappa}, $w_{{min}}$={cfg.w_min})")
    ax.legend(loc="upper left", fontsize=8)
    _save(fig, path)


def per_class(values, classes, path):
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(range(len(values)), values)
    ax.set_xticks(range(len(values)), classes, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("R@1")
    _save(fig, path)


def retrievals(query_set, gallery_set, nearest, classes, path, rows=6, k=4):
    """One row per query (the first test video of each of `rows` classes): its middle frame, then
    those of its k nearest train videos; a green title is a correct class, red a wrong one."""
    labels = query_set.labels
    picks = [int(np.flatnonzero(labels.numpy() == c)[0]) for c in sorted(set(labels.tolist()))][:rows]
    fig, axes = plt.subplots(len(picks), k + 1, figsize=(1.6 * (k + 1), 1.7 * len(picks)), squeeze=False)
    for r, q in enumerate(picks):
        shown = [(query_set, q, "query")] + [(gallery_set, int(j), f"top {n + 1}") for n, j in enumerate(nearest[q, :k])]
        for c, (ds, i, title) in enumerate(shown):
            ax = axes[r, c]
            ax.imshow(_middle_frame(ds[i]["video"]))
            label = int(ds.labels[i])
            colour = "black" if c == 0 else ("tab:green" if label == int(labels[q]) else "tab:red")
            ax.set_title(f"{title}\n{classes[label]}", fontsize=6, color=colour)
            ax.axis("off")
    _save(fig, path)


def _middle_frame(video):
    """(clips, 3, T, H, W) or (3, T, H, W) uint8 -> the middle clip's middle frame (H, W, 3)."""
    clip = video[video.shape[0] // 2] if video.dim() == 5 else video
    return clip[:, clip.shape[1] // 2].permute(1, 2, 0).numpy()


def noisy(levels, curves, metric, path, chance=None, baseline=None):
    """Fig. 7. `curves` {method: {level: [value per seed]}}, seeds in the same order for every method;
    levels are shares of injected faults. With `baseline`, a second panel shows each method minus the
    baseline on the same seed: seed-to-seed spread that the methods share cancels there, which the
    overlapping bars of the first panel cannot show."""
    fig, axes = plt.subplots(1, 2 if baseline else 1, figsize=(10 if baseline else 5, 3.5), squeeze=False)
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
            ax.errorbar([100 * x for x in xs], [100 * np.mean(per_level[lv]) for lv in xs],
                        yerr=[100 * ci95(per_level[lv]) for lv in xs], marker="o", capsize=3,
                        color=colours[method], label=f"{method} - {baseline}")
        ax.axhline(0, color="grey", lw=1)
        ax.set_ylabel(f"paired difference in {metric} (points)")
    for ax in axes[0]:
        ax.set_xlabel("injected faulty positives (%)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    _save(fig, path)


def sweep(values, curves, baselines, metric, path, xlabel):
    """`curves` {line: {value: [per seed]}}, `baselines` {line: [xID per seed, same seeds]}. Values
    are categories, in the given order ("known" is not a number). Left: mean and 95% CI per value, xID
    dashed in the line's colour; right: value minus xID on the same seed, mean and 95% CI."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    xs = np.arange(len(values))
    for i, (line, per_value) in enumerate(curves.items()):
        base = np.asarray(baselines[line])
        got = [v for v in values if per_value.get(v)]
        at = [values.index(v) for v in got]
        axes[0].errorbar(at, [100 * np.mean(per_value[v]) for v in got], yerr=[100 * ci95(per_value[v]) for v in got],
                         marker="o", capsize=3, color=f"C{i}", label=line)
        axes[0].axhline(100 * base.mean(), color=f"C{i}", ls="--", lw=1, label=f"{line}: xID")
        diffs = [np.asarray(per_value[v]) - base for v in got]
        axes[1].errorbar(at, [100 * d.mean() for d in diffs], yerr=[100 * ci95(d) for d in diffs], marker="o",
                         capsize=3, color=f"C{i}", label=f"{line}: minus xID")
    axes[0].set_ylabel(f"{metric} (%), mean and 95% CI")
    axes[1].axhline(0, color="grey", lw=1)
    axes[1].set_ylabel(f"paired difference in {metric} (points)")
    for ax in axes:
        ax.set_xticks(xs, values)
        ax.set_xlabel(xlabel)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    _save(fig, path)


def paired_differences(curves, baseline):
    """{method: {level: [method - baseline per seed]}} for every method but the baseline, at the
    levels both have."""
    base = curves[baseline]
    return {m: {lv: list(np.asarray(v) - np.asarray(base[lv])) for lv, v in per_level.items() if v and base.get(lv)}
            for m, per_level in curves.items() if m != baseline}


def ci95(values):
    """Half-width of the 95% confidence interval of the mean (Student's t), 0 for one value."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return 0.0
    from scipy import stats
    return float(stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values)))


def _save(fig, path):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
