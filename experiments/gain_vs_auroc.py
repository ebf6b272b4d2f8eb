"""Measurement beyond the paper: what Weighted-xID and Oracle-xID gain over xID, against how well the
bank scores find the faulty positives (their AUROC), over every finished setting the project kept.

Eq. (6) weights a positive by its bank score, so Weighted-xID can only help as far as the scores
rank the faulty positives low; Oracle-xID, which is told which they are, shows what weighting could
gain. Each point is one run (a seed and noise level): its gain is paired (same seed, same warm-up),
its x the xID run's bank AUROC at the end of training (the warm-up continued for the branch's
epochs; the warm-up's own last value is not kept in the settings). Runs that several sweeps share
(one warm-up, one xID row) count once. The line is a least-squares fit over all the points with
injected faults; its slope comes with a 95% interval (Student's t), but the points are not
independent draws (several come from one warm-up recipe), so read it as a description.

    python -m experiments.gain_vs_auroc     # -> results/gain_vs_auroc.{md,png}
"""
import argparse
import json
from pathlib import Path

import numpy as np
from scipy import stats

import figures

METRICS = ("R@1", "5-shot")
WEIGHTED_ROWS = ("weighted", "known")  # the delta sweep's "known" is Weighted-xID at the paper's delta


def recipe(key):
    """A short name for the training recipe behind a setting."""
    args = " ".join(key.get("train_args", []))
    return f"{Path(key['data']).name}, {key['warmup_epochs']}+{key['epochs']} ep" + (f", {args}" if args else "")


def collect(root="results"):
    """One record per distinct run with injected faults: recipe, seed, faulty, AUROC and the gains."""
    runs = {}
    for path in sorted(Path(root).glob("**/*_settings/seed*_faulty*.json")):
        s = json.loads(path.read_text())
        rows, key = s["rows"], s["key"]
        if s["faulty"] == 0 or "xid" not in rows:  # at 0% nothing is faulty: no AUROC, Oracle = xID
            continue
        ident = (key["data"], key.get("manifest_sha1"), key["warmup_epochs"], key["epochs"],
                 tuple(key.get("train_args", [])), s["seed"], s["faulty"], round(rows["xid"]["R@1"], 6),
                 round(rows["xid"]["AUROC"], 6))
        run = runs.setdefault(ident, {"recipe": recipe(key), "seed": s["seed"], "faulty": s["faulty"],
                                      "auroc": rows["xid"]["AUROC"], "files": [], "gain": {}, "rank": {}})
        run["files"].append(str(path))
        for method, names in (("weighted", WEIGHTED_ROWS), ("oracle", ("oracle",))):
            rank = next((i for i, n in enumerate(names) if n in rows), None)
            if rank is not None and rank < run["rank"].get(method, len(names)):  # a "weighted" row wins
                run["gain"][method] = {m: rows[names[rank]][m] - rows["xid"][m] for m in METRICS}
                run["rank"][method] = rank
    return [r for r in runs.values() if r["gain"]]  # a sweep without either method has no pair


def fit(x, y):
    """Least squares y = a + b x; b's 95% half-width (Student's t), Pearson's r and its p."""
    f = stats.linregress(x, y)
    half = stats.t.ppf(0.975, len(x) - 2) * f.stderr
    return {"a": f.intercept, "b": f.slope, "b_ci": half, "r": f.rvalue, "p": f.pvalue, "n": len(x)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", default="results")
    p.add_argument("--out", default="results/gain_vs_auroc")
    args = p.parse_args(argv)
    runs = collect(args.results)
    recipes = sorted({r["recipe"] for r in runs})
    fits, lines = {}, []
    for method in ("weighted", "oracle"):
        have = [r for r in runs if method in r["gain"]]
        x = np.array([100 * r["auroc"] for r in have])  # (runs,) AUROC in points
        for m in METRICS:
            y = np.array([100 * r["gain"][method][m] for r in have])  # (runs,) gain in points
            fits[method, m] = fit(x, y)

    out = Path(args.out)
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(METRICS), figsize=(6 * len(METRICS), 5.5))
    markers = {"weighted": "o", "oracle": "^"}
    colours = {name: plt.cm.tab10(i) for i, name in enumerate(recipes)}
    for ax, m in zip(axes, METRICS):
        for method in ("weighted", "oracle"):
            for name in recipes:
                pts = [(100 * r["auroc"], 100 * r["gain"][method][m]) for r in runs
                       if r["recipe"] == name and method in r["gain"]]
                if pts:
                    ax.scatter(*zip(*pts), marker=markers[method], color=colours[name], alpha=0.75,
                               label=f"{method}: {name}", facecolors="none" if method == "oracle" else None)
            f = fits[method, m]  # the fitted line over every recipe's runs
            xs = np.linspace(45, 100, 2)
            ax.plot(xs, f["a"] + f["b"] * xs, "--" if method == "oracle" else "-", color="k", lw=1,
                    label=f"{method} fit: {10 * f['b']:+.2f} per 10 AUROC points")
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel("xID's bank AUROC of the faulty positives (%)")
        ax.set_ylabel(f"method - xID, {m} (points)")
        ax.set_title(m)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=2)
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out.with_suffix(".png"), dpi=120)
    plt.close(fig)

    lines += [f"# Weighted-xID and Oracle-xID against xID, by the bank scores' AUROC",
              "", f"`python -m experiments.gain_vs_auroc` over every finished setting under `{args.results}/` "
              f"with injected faults: {len(runs)} distinct runs (a run kept by several sweeps counts once). "
              "Gains are paired (same seed, same warm-up); x is the xID run's bank AUROC at its end. "
              f"Figure: `{out.with_suffix('.png').name}`.", "",
              "| recipe | runs | injected | AUROC (mean, range) | Weighted - xID R@1 | Weighted - xID 5-shot "
              "| Oracle - xID R@1 | Oracle - xID 5-shot |", "|---|---:|---|---|---:|---:|---:|---:|"]
    for name in recipes:
        at = [r for r in runs if r["recipe"] == name]
        a = np.array([100 * r["auroc"] for r in at])
        cells = []
        for method in ("weighted", "oracle"):
            for m in METRICS:
                g = [100 * r["gain"][method][m] for r in at if method in r["gain"]]
                cells.append(f"{np.mean(g):+.1f} ± {figures.ci95(g):.1f} ({len(g)})" if g else "-")
        levels = ", ".join(f"{int(100 * v)}%" for v in sorted({r["faulty"] for r in at}))
        lines.append(f"| {name} | {len(at)} | {levels} | {a.mean():.1f} ({a.min():.1f}-{a.max():.1f}) | "
                     + " | ".join(cells) + " |")
    lines += ["", "Cells: mean ± 95% half-width (runs). Fitted relation, gain = a + b AUROC, over all runs "
              "(points per point of AUROC; the slope's 95% interval assumes independent points, which runs "
              "of one recipe are not):", ""]
    for (method, m), f in fits.items():
        lines.append(f"- {method} - xID, {m}: gain = {f['a']:+.1f} {f['b']:+.3f} x AUROC; b in "
                     f"[{f['b'] - f['b_ci']:+.3f}, {f['b'] + f['b_ci']:+.3f}], r = {f['r']:.2f} (p = {f['p']:.3f}), "
                     f"{f['n']} runs; at AUROC 60: {f['a'] + 60 * f['b']:+.1f}, at 90: {f['a'] + 90 * f['b']:+.1f}")
    lines += ["", "Within one recipe (runs of one set and schedule, differing in seed and noise level), the same fit:", ""]
    for name in recipes:
        at = [r for r in runs if r["recipe"] == name]
        for method in ("weighted", "oracle"):
            have = [r for r in at if method in r["gain"]]
            if len(have) < 5:
                continue
            x = np.array([100 * r["auroc"] for r in have])  # (runs,)
            cells = []
            for m in METRICS:
                f = fit(x, np.array([100 * r["gain"][method][m] for r in have]))
                cells.append(f"{m} b = {f['b']:+.3f} [{f['b'] - f['b_ci']:+.3f}, {f['b'] + f['b_ci']:+.3f}] "
                             f"(r = {f['r']:.2f})")
            lines.append(f"- {name}, {method} - xID ({len(have)} runs): " + "; ".join(cells))
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
