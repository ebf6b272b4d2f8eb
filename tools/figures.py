"""The figures (matplotlib, PNG files): those of a run folder, drawn from its log (make demo's and any train.py
run's), and those tools/analyse.py draws of a checkpoint. Every figure names its method in its title (or, with
several, in its legend), labels every axis, draws clean positives blue and faulty ones red, and puts its legend
outside the axes, where no curve runs. The lab's Fig. 7 and sweeps are lab/figures.py's, in this style.

training_curves     the loss, the bank AUROC of the known faults and the class agreement per epoch, the warm-up
                    and each branch after it (a plain train.py log has no class agreement: that panel stays empty)
scores_over_training  the bank scores of clean and faulty positives at several epochs, under the eq. (6) weight
                    curve each epoch's mu and sigma give
soft_targets_over_training  per epoch, CCP's soft-target mass (eqs. (13)-(14)) on candidates of the anchor's
                    class, beside the oracle's targets and chance
scores_and_weights  Fig. 5: the bank scores after training, clean and faulty overlaid, under eq. (6)'s weights
per_class           Fig. 10: R@1 of each class
retrievals          Fig. 11: a test query's middle frame and its top-4 retrievals, with classes

The per-epoch numbers the first three draw are make demo's report (tools/bank_report.py).

    python -m tools.figures RUN_DIR      # RUN_DIR/curves.png, scores_over_training.png, soft_targets.png
"""

import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
import numpy as np

from losses import VARIANTS

# Okabe and Ito's palette, which the common colour-vision deficiencies still tell apart; a method keeps its colour
# in every figure. Clean positives blue, faulty ones vermillion: the faults are the alarm.
CLEAN, FAULTY = "#0072B2", "#D55E00"
METHOD_COLOURS = {"xID": "#E69F00", "Weighted-xID": "#56B4E9", "Soft-xID": "#009E73", "Robust-xID": "#D55E00"}
METHOD_COLOURS |= {"Oracle-xID": "#CC79A7", "xID warm-up": "black"}
OTHER_COLOURS = ("#0072B2", "#F0E442", "#999999")  # runs of no named method, in turn


def run_colour(label, i=0):
    """A run's colour from its method's name as run_label gives it ('Soft-xID (oracle)' is Soft-xID's)."""
    method = next((m for m in sorted(METHOD_COLOURS, key=len, reverse=True) if label.startswith(m)), None)
    return METHOD_COLOURS[method] if method else OTHER_COLOURS[i % len(OTHER_COLOURS)]


def setting_words(name):
    """A demo setting's folder in words: 'seed0_faulty25' -> '25% injected faulty positives, seed 0'."""
    found = re.fullmatch(r"seed(\d+)_faulty(\d+)", name)
    return f"{int(found[2])}% injected faulty positives, seed {found[1]}" if found else name


def method_name(cfg):
    """Table 2's name of the method a config (a Config or its dict) trains: 'Weighted-xID', 'Robust-xID
    (ccp targets)'."""
    get = cfg.get if isinstance(cfg, dict) else lambda key: getattr(cfg, key)
    variant = VARIANTS[get("loss")]
    return variant.name + (f" ({get('soft_targets')} targets)" if variant.soft else "")


def _method_of_folder(folder):
    """The method of the run whose folder a picture goes to, from its log's last stage ('' without one):
    evaluate.py draws Fig. 10 and 11 into the checkpoint's folder without naming the method."""
    log = Path(folder) / "log.jsonl"
    lines = log.read_text().splitlines() if log.exists() else []
    stage = json.loads(lines[-1]).get("stage") if lines else None
    return VARIANTS[stage].name if stage in VARIANTS else ""


def scores_and_weights(scores, w, faulty, cfg, path):
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    s, f = scores.cpu().numpy(), faulty.cpu().numpy()
    bins = np.linspace(s.min(), s.max(), 40)
    ax.hist(s[~f], bins=bins, color=CLEAN, alpha=0.55, label="clean positives")
    ax.hist(s[f], bins=bins, color=FAULTY, alpha=0.55, label="faulty positives (ground truth)")
    ax.set_xlabel(r"bank score $\bar v_i^T \bar a_i$")
    ax.set_ylabel("instances per bin (overlaid, not stacked)")
    ax2 = ax.twinx()
    order = np.argsort(s)
    ax2.plot(s[order], w.cpu().numpy()[order], "k-", label=r"weight $w_i$ of eq. (6)")
    ax2.set_ylim(0, 1.05)
    ax2.set_ylabel(rf"$w_i$, eq. (6) ($\delta$={cfg.delta:.2f}, $\kappa$={cfg.kappa}, $w_{{min}}$={cfg.w_min})")
    ax.set_title(f"{method_name(cfg)}: its bank scores after training, and its weights (Fig. 5)", fontsize=9)
    legend_below(fig, ax, ax2, ncol=3)
    _save(fig, path)


def per_class(values, classes, path, method=None):
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(range(len(values)), [100 * v for v in values])
    ax.set_xticks(range(len(values)), classes, rotation=60, ha="right", fontsize=7)
    ax.set_xlabel("class of the test query")
    ax.set_ylabel("R@1 (%)")
    method = _method_of_folder(Path(path).parent) if method is None else method
    ax.set_title(f"{method + ': ' if method else ''}retrieval R@1 of each class (Fig. 10)", fontsize=9)
    _save(fig, path)


def retrievals(query_set, gallery_set, nearest, classes, path, rows=6, k=4, method=None):
    """One row per query (the first test video of each of `rows` classes): its middle frame, then
    those of its k nearest train videos; a blue title is a correct class, vermillion a wrong one. `method`
    names the encoder's method in the title (default: the one the folder of `path` trained)."""
    labels = query_set.labels
    picks = [int(np.flatnonzero(labels.numpy() == c)[0]) for c in sorted(set(labels.tolist()))][:rows]
    fig, axes = plt.subplots(len(picks), k + 1, figsize=(1.6 * (k + 1), 1.7 * len(picks) + 0.5), squeeze=False)
    method = _method_of_folder(Path(path).parent) if method is None else method
    fig.suptitle(
        f"{method + ': ' if method else ''}test videos and their {k} nearest train videos (Fig. 11)\n"
        "blue: the query's class, vermillion: another",
        fontsize=8,
    )
    for r, q in enumerate(picks):
        shown = [(query_set, q, "query")] + [
            (gallery_set, int(j), f"top {n + 1}") for n, j in enumerate(nearest[q, :k])
        ]
        for c, (ds, i, title) in enumerate(shown):
            ax = axes[r, c]
            ax.imshow(_middle_frame(ds[i]["video"]))
            label = int(ds.labels[i])
            colour = "black" if c == 0 else (CLEAN if label == int(labels[q]) else FAULTY)
            ax.set_title(f"{title}\n{classes[label]}", fontsize=6, color=colour)
            ax.axis("off")
    _save(fig, path)


def _middle_frame(video):
    """(clips, 3, T, H, W) or (3, T, H, W) uint8 -> the middle clip's middle frame (H, W, 3)."""
    clip = video[video.shape[0] // 2] if video.dim() == 5 else video
    return clip[:, clip.shape[1] // 2].permute(1, 2, 0).numpy()


def legend_below(fig, *axes, fontsize=8, ncol=4):
    """One legend for the figure's panels, under them: outside every axes, so it covers no curve (inside,
    a legend sat on the soft-target branches' late epochs). Labels shared by several panels appear once."""
    seen = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    ncol = min(len(seen), ncol)
    fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=ncol, fontsize=fontsize)
    fig.legend_rows = -(-len(seen) // ncol)  # _save leaves this many lines free under the panels
    fig.legend_row_inches = fontsize / 40  # a line of the legend at this size


def layout(fig):
    """The panels laid out above the room their legend needs (legend_below)."""
    inches = 0.12 + getattr(fig, "legend_row_inches", 0.2) * getattr(fig, "legend_rows", 0)  # the legend's height
    fig.tight_layout(rect=(0, min(0.45, inches / fig.get_size_inches()[1]), 1, 1))


def _save(fig, path):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    layout(fig)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_label(name, records=()):
    """A run folder as the tables name its method: 'weighted' -> 'Weighted-xID', 'soft_oracle' -> 'Soft-xID
    (oracle)', 'warmup' -> 'xID warm-up'; any other folder by the stages its log went through."""
    if name == "warmup":
        return "xID warm-up"
    key, _, rest = name.partition("_")
    if key in VARIANTS:
        return VARIANTS[key].name + (f" ({rest})" if rest else "")
    stages = list(dict.fromkeys(VARIANTS[r["stage"]].name for r in records if r.get("stage") in VARIANTS))
    return f"{name} ({', then '.join(stages)})" if stages else name


def training_curves(runs, path, title=""):
    """`runs` {name: log records}, the warm-up first; a branch continues the warm-up's epoch axis. Each
    run's loss is its own objective's, so the losses of two methods are not compared: the panel says so."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.4))
    offset = 0
    for i, (name, records) in enumerate(runs.items()):
        x = [offset + r["epoch"] for r in records]
        label = run_label(name, records)
        style = dict(color=run_colour(label, i), lw=1.5 if name == "warmup" else 1.2)
        axes[0].plot(x, [r["loss"] for r in records], label=label, **style)
        axes[1].plot(x, [np.nan if r["faulty_auroc"] is None else 100 * r["faulty_auroc"] for r in records], **style)
        # a plain train.py log has no class agreement (make demo's report adds it): the panel stays empty
        axes[2].plot(x, [100 * r.get("knn_class", np.nan) for r in records], **style)
        axes[2].plot(x, [100 * r.get("xmodal_class", np.nan) for r in records], ls="--", **style)
        if name == "warmup":
            offset = len(records)
            for ax in axes:
                ax.axvline(offset - 0.5, color="grey", lw=0.8, ls=":")
    axes[1].axhline(50, color="grey", lw=0.8, label="chance (AUROC 50%)")
    axes[2].plot([], [], color="grey", label="class agreement: 1-NN of the video memories")
    axes[2].plot([], [], color="grey", ls="--", label="class agreement: cross-modal")
    axes[0].set_ylabel("loss of the run's own objective, eq. (17)")
    axes[0].set_title("each method's own objective: not comparable across methods", fontsize=9)
    axes[1].set_ylabel("bank AUROC of the known faults (%)")
    axes[1].set_title("how well the bank scores find the faulty positives", fontsize=9)
    axes[2].set_ylabel("class agreement (%)")
    axes[2].set_title("nearest neighbours of the same class", fontsize=9)
    for ax in axes:
        ax.set_xlabel("epoch (warm-up, then the branches)")
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=10)
    legend_below(fig, *axes)  # the runs in the first columns, chance and the two kinds of class agreement last
    _save(fig, path)


def scores_over_training(records, delta, kappa, w_min, path, panels=3, run="xID warm-up"):
    """Histograms of the logged bank scores (clean and faulty overlaid) at `panels` epochs spread over
    the run, on one score axis, each with the eq. (6) weight curve of that epoch's mu and sigma and the
    given delta. `run` names whose bank it is in the title. Three panels and large type: a slide's size."""
    import torch

    from losses import sample_weights

    logged = [r for r in records if r.get("score_hist")]
    if not logged:
        return False
    picks = sorted({logged[round(k * (len(logged) - 1) / max(1, panels - 1))]["epoch"] for k in range(panels)})
    shown = [r for r in logged if r["epoch"] in picks]
    fig, axes = plt.subplots(1, len(picks), figsize=(4.6 * len(picks), 4.6), squeeze=False, sharex=True, sharey=True)
    lo, hi = min(r["score_hist"]["lo"] for r in shown), max(r["score_hist"]["hi"] for r in shown)
    for k, (ax, r) in enumerate(zip(axes[0], shown)):
        h = r["score_hist"]
        edges = np.linspace(h["lo"], h["hi"], len(h["clean"]) + 1)
        mids = (edges[:-1] + edges[1:]) / 2
        ax.stairs(h["clean"], edges, fill=True, color=CLEAN, alpha=0.55, label="clean positives")
        ax.stairs(h["faulty"], edges, fill=True, color=FAULTY, alpha=0.55, label="faulty positives (ground truth)")
        w = sample_weights(torch.tensor(mids), r["mu"], max(r["sigma"], 1e-8), delta, kappa, w_min)  # (bins,)
        ax2 = ax.twinx()
        ax2.plot(mids, w.numpy(), "k-", lw=2, label=r"weight $w_i$ of eq. (6) at this epoch's $\mu$, $\sigma$")
        ax2.set_ylim(0, 1.05)
        if k < len(shown) - 1:
            ax2.tick_params(labelright=False)  # one weight scale, labelled on the last panel
        else:
            ax2.set_ylabel(r"weight $w_i$, eq. (6)", fontsize=12)
        auroc = "-" if r["faulty_auroc"] is None else f"{100 * r['faulty_auroc']:.0f}%"
        ax.set_title(f"epoch {r['epoch']}: AUROC {auroc}", fontsize=13)
        ax.set_xlabel("bank score", fontsize=12)
        for a in (ax, ax2):
            a.tick_params(labelsize=11)
    axes[0, 0].set_xlim(lo, hi)
    axes[0, 0].set_ylabel("instances per bin (overlaid)", fontsize=12)
    fig.suptitle(
        rf"{run}: its bank scores, and the weights eq. (6) gives them"
        "\n"
        rf"($\delta$={delta:.2f}, $\kappa$={kappa}, $w_{{min}}$={w_min}, as Weighted- and Robust-xID's)",
        fontsize=13,
    )
    legend_below(fig, axes[0, 0], ax2, ncol=3, fontsize=11)  # every panel's twin draws the same kind of curve
    _save(fig, path)
    return True


def soft_targets_over_training(runs, path):
    """`runs` {name: log records}, the warm-up first: the logged soft_share per epoch (CCP's mass on the
    anchor's class, the oracle's, chance), a branch continuing the warm-up's epoch axis. False when no
    record has it (logs from before it was logged)."""
    if not any(r.get("soft_share") for records in runs.values() for r in records):
        return False
    fig, ax = plt.subplots(figsize=(8, 5))
    offset = 0
    for i, (name, records) in enumerate(runs.items()):
        logged = [r for r in records if r.get("soft_share")]
        x = [offset + r["epoch"] for r in logged]
        warm, method = name == "warmup", run_label(name, records)
        ccp = [100 * r["soft_share"]["ccp"] for r in logged]
        ax.plot(x, ccp, color=run_colour(method, i), label=f"CCP from {method}'s bank")
        ax.plot(x, [100 * r["soft_share"]["oracle"] for r in logged], color="k", ls=":", lw=1)
        ax.plot(x, [100 * r["soft_share"]["chance"] for r in logged], color="grey", lw=0.8, ls="--")
        if warm:
            offset = len(records)
            ax.axvline(offset - 0.5, color="grey", lw=0.8, ls=":")
    ax.plot([], [], color="k", ls=":", lw=1, label="oracle targets (class labels)")
    ax.plot([], [], color="grey", ls="--", lw=0.8, label="chance (same-class share of the candidates)")
    ax.set_ylim(0, 105)
    ax.set_xlabel("epoch (warm-up, then the branches)")
    ax.set_ylabel("soft-target mass on the anchor's class (%)")
    ax.set_title(
        "CCP's soft targets (eqs. (13)-(14) at lam = 1, before Soft- and Robust-xID mix in the instance target),\n"
        "computed each epoch from every run's own memory bank: the share of S(j|i), j != i, on faulty negatives\n"
        "(candidates of the anchor's class), from 512 anchors; a run on another CPU kind draws other curves",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    legend_below(fig, ax, ncol=3)
    _save(fig, path)
    return True


def run_pictures(folder):
    """training_curves, scores_over_training and soft_targets_over_training of a run folder, or of a demo
    setting's folder (warmup/ and one folder per branch); delta from its Weighted- or Robust-xID branch if
    it has one."""
    from dataclasses import asdict

    from checkpoint import load_checkpoint, read_log
    from config import Config

    folder = Path(folder)
    if (folder / "log.jsonl").exists():
        runs = {folder.name: read_log(folder / "log.jsonl")}
        ckpts = [folder / "ckpt.pt"]
    else:
        found = sorted(p.parent for p in folder.glob("*/log.jsonl"))
        if not found:
            raise SystemExit(f"tools/figures.py: no log.jsonl in {folder} or its subfolders: not a run folder")
        found.sort(key=lambda p: p.name != "warmup")  # the warm-up first, then the branches
        runs = {p.name: read_log(p / "log.jsonl") for p in found}
        ckpts = [p / "ckpt.pt" for p in found if p.name.startswith(("weighted", "robust"))] + [found[0] / "ckpt.pt"]
    cfg = next((load_checkpoint(c)["config"] for c in ckpts if c.exists()), asdict(Config()))  # no checkpoint: defaults
    labels = [run_label(name, records) for name, records in runs.items()]
    branches = f", then a branch each: {', '.join(labels[1:])}" if len(labels) > 1 else ""
    training_curves(runs, folder / "curves.png", title=f"{setting_words(folder.name)}: {labels[0]}{branches}")
    first, name = next(iter(runs.values())), next(iter(runs))
    drawn = scores_over_training(
        first, cfg["delta"], cfg["kappa"], cfg["w_min"], folder / "scores_over_training.png", run=run_label(name, first)
    )
    soft = soft_targets_over_training(runs, folder / "soft_targets.png")
    return (
        [folder / "curves.png"]
        + ([folder / "scores_over_training.png"] if drawn else [])
        + ([folder / "soft_targets.png"] if soft else [])
    )


def main(argv: list[str] | None = None) -> None:
    import argparse

    p = argparse.ArgumentParser(prog="python -m tools.figures", description="a run folder's pictures")
    p.add_argument("run_dir", help="one run (OUT of train.py), or a demo setting: warmup/ and a folder per branch")
    args = p.parse_args(argv)
    for made in run_pictures(args.run_dir):
        print(made)


if __name__ == "__main__":
    main()
