"""The pictures of the mechanism for any run folder: train.py logs the bank scores' histogram every
epoch, and `python -m tools.figures RUN_DIR` draws the training curves and the scores under the eq. (6)
weights at several epochs, and the share of CCP's soft-target mass on the anchor's class. And every figure
tools.figures draws says what it shows: its method in the title or legend, a label on each axis whose
ticks show, clean positives blue and faulty red on one score axis, chance named, and a legend over no
curve (drawn from made-up logs, in seconds)."""

import json
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.colors import to_rgb

from lab import figures as lab_figures
from losses import sample_weights
from test_train import ROOT, log, reported, run
from tools import figures
from tools.bank_report import score_histogram
from tools.figures import layout


def test_the_score_histogram_counts_every_score_once_by_kind():
    scores = torch.cat([torch.randn(900) * 0.1 + 0.3, torch.randn(100) * 0.1])  # (1000,)
    faulty = torch.arange(1000) >= 900
    h = score_histogram(scores, faulty, bins=20)
    assert len(h["clean"]) == len(h["faulty"]) == 20 and h["lo"] < h["hi"]
    inside = (scores >= h["lo"]) & (scores <= h["hi"])
    assert sum(h["clean"]) == int((inside & ~faulty).sum()) and sum(h["faulty"]) == int((inside & faulty).sum())

    def centre(counts):
        return sum(i * c for i, c in enumerate(counts)) / sum(counts)

    assert centre(h["faulty"]) < centre(h["clean"])  # the faults score lower, so their bins lie lower


def test_a_run_folder_gets_its_curves_and_its_scores_over_training(tiny_data, tmp_path):
    reported(tiny_data, tmp_path / "warmup", "--warmup-epochs", "3", "--epochs", "0", "--faulty-fraction", "0.25")
    reported(
        tiny_data,
        tmp_path / "weighted",
        "--init",
        tmp_path / "warmup" / "ckpt.pt",
        "--warmup-epochs",
        "0",
        "--epochs",
        "1",
        "--loss",
        "weighted",
        "--delta",
        "-0.67",
        "--faulty-fraction",
        "0.25",
    )
    assert all("score_hist" in r and "soft_share" in r for r in log(tmp_path / "warmup"))
    res = subprocess.run(
        [sys.executable, "-m", "tools.figures", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    for png in ("curves.png", "scores_over_training.png", "soft_targets.png"):
        assert (tmp_path / png).stat().st_size > 10_000
    assert_legends_cover_no_axes(tmp_path)
    bad = subprocess.run(
        [sys.executable, "-m", "tools.figures", str(tmp_path / "nothing")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and "not a run folder" in bad.stderr and "Traceback" not in bad.stderr


def test_a_plain_train_py_run_gets_its_curves_without_the_reports_class_agreement(tiny_data, tmp_path):
    """python train.py logs no class agreement (make demo's report does): the figures still draw its run."""
    run(tiny_data, tmp_path / "warmup", "--warmup-epochs", "2", "--epochs", "0", "--faulty-fraction", "0.25")
    res = subprocess.run(
        [sys.executable, "-m", "tools.figures", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "curves.png").stat().st_size > 10_000


def test_figures_help_prints_the_usage_and_draws_nothing(capsys, tmp_path, monkeypatch):
    from tools import figures

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        figures.main(["--help"])
    assert stop.value.code == 0 and "run_dir" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []  # not taken for a run folder


def assert_legends_cover_no_axes(run_dir):
    """Every figure tools.figures draws for a run keeps its legends off every panel (a legend inside the
    axes once sat on the soft-target branches' late epochs)."""
    checked = []

    def check(fig, path):
        layout(fig)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        assert legends, f"{path}: no legend"
        for legend in legends:
            box = legend.get_window_extent(renderer)
            for ax in fig.axes:
                assert not box.overlaps(ax.get_window_extent(renderer)), f"{path}: a legend over a panel"
        checked.append(Path(path).name)
        plt.close(fig)

    real = figures._save
    figures._save = check
    try:
        figures.main([str(run_dir)])
    finally:
        figures._save = real
    assert {"curves.png", "scores_over_training.png", "soft_targets.png"} <= set(checked), checked


def made_up_log(epochs, stage, seed, rise=0.0):
    """Log records as train.py writes them, with the scores and CCP's mass rising over the epochs."""
    rng = np.random.default_rng(seed)
    out = []
    for e in range(epochs):
        hist = {"lo": -0.2 - 0.01 * e, "hi": 0.2 + 0.02 * e}
        hist |= {"clean": rng.integers(5, 60, 40).tolist(), "faulty": rng.integers(0, 20, 40).tolist()}
        share = {"ccp": min(0.1 + rise + 0.02 * e, 0.7), "oracle": 1.0, "chance": 0.1}
        auroc, knn = 0.5 + rise + 0.01 * e, 0.1 + rise + 0.02 * e
        out.append(
            {"epoch": e, "stage": stage, "loss": 12 - 0.1 * e, "faulty_auroc": auroc, "knn_class": knn}
            | {"xmodal_class": knn - 0.05, "mu": 0.02 * e, "sigma": 0.08, "score_hist": hist, "soft_share": share}
        )
    return out


@pytest.fixture
def drawn(monkeypatch):
    """The figures tools.figures draws, kept open after they are saved (it closes each)."""
    kept = []
    monkeypatch.setattr(figures.plt, "close", kept.append)
    return kept


def legends(fig):
    return [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]


def legend_over_data(fig):
    """Where a legend covers what is plotted: a line's points (and the segments between them) or a patch."""
    renderer = fig.canvas.get_renderer()
    found = []
    for legend in legends(fig):
        box = legend.get_window_extent(renderer)
        assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1)  # whole on the page
        for ax in fig.axes:
            for line in ax.get_lines():
                xy = np.asarray(line.get_xydata(), dtype=float)
                xy = xy[np.isfinite(xy).all(1)]
                if len(xy) > 1:  # twenty points along each segment
                    t = np.linspace(0, 1, 20)[:, None, None]
                    xy = (xy[:-1] * (1 - t) + xy[1:] * t).reshape(-1, 2)
                shown = [p for p in line.get_transform().transform(xy) if ax.bbox.contains(*p)]
                found += [(line.get_label(), tuple(p)) for p in shown if box.contains(*p)][:1]
            for patch in ax.patches:
                extent = patch.get_window_extent(renderer)
                if extent.width * extent.height > 0 and box.overlaps(extent):
                    found.append((patch.get_label(), "patch"))
    return found


def unlabelled_axes(fig):
    """Each axis whose tick labels show but which has no label."""
    missing = []
    for ax in fig.axes:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            ticks = [t for t in axis.get_majorticklabels() if t.get_visible() and t.get_text()]
            if ax.axison and axis.get_visible() and ticks and not axis.get_label_text():
                missing.append((ax.get_title(), name))
    return missing


def every_text(fig):
    texts = [fig.get_suptitle(), *(ax.get_title() for ax in fig.axes)]
    return " ".join(texts + [t.get_text() for legend in legends(fig) for t in legend.get_texts()])


def assert_says_what_it_shows(fig, *methods):
    assert legend_over_data(fig) == []
    assert unlabelled_axes(fig) == []
    assert all(m in every_text(fig) for m in methods), (methods, every_text(fig))


def colour_of(fig, label_start):
    handle = next(
        h
        for legend in legends(fig)
        for h, t in zip(legend.legend_handles, legend.get_texts())
        if t.get_text().startswith(label_start)
    )
    return to_rgb(handle.get_facecolor())


def test_the_run_pictures_name_their_methods_label_every_axis_and_keep_legends_off_the_curves(drawn, tmp_path):
    runs = {"warmup": made_up_log(30, "xid", 0)}
    runs |= {n: made_up_log(24, n, i, rise=0.3) for i, n in enumerate(["oracle", "robust", "soft", "weighted", "xid"])}
    figures.training_curves(runs, tmp_path / "curves.png", title="seed0_faulty25")
    assert figures.scores_over_training(runs["warmup"], -0.67, 0.5, 0.25, tmp_path / "scores.png", run="xID warm-up")
    assert figures.soft_targets_over_training(runs, tmp_path / "soft.png")
    curves, scores, soft = drawn
    names = ["Oracle-xID", "Robust-xID", "Soft-xID", "Weighted-xID"]
    for fig in drawn:
        assert_says_what_it_shows(fig, "xID warm-up", *([] if fig is scores else names))
    # the losses of five objectives are said not to compare, and the AUROC's chance line is named
    assert "not comparable" in curves.axes[0].get_title() and "chance (AUROC 50%)" in every_text(curves)
    # clean blue, faulty red, overlaid on one score axis that holds every panel's range
    clean, faulty = colour_of(scores, "clean"), colour_of(scores, "faulty")
    assert clean[2] > clean[0] and faulty[0] > max(faulty[1:])
    panels = [ax for ax in scores.axes if ax.get_xlabel() == "bank score"]
    assert len(panels) == 3 and len({ax.get_xlim() for ax in panels}) == 1
    assert min(ax.title.get_fontsize() for ax in panels) >= 12  # read at a slide's size
    lo, hi = panels[0].get_xlim()
    assert lo <= -0.2 - 0.01 * 29 and hi >= 0.2 + 0.02 * 29
    assert "overlaid" in " ".join(ax.get_ylabel() for ax in scores.axes)
    assert [ax.get_ylabel() for ax in scores.axes if ax.get_ylabel().startswith("weight")]  # the weight's axis


class Videos:
    """A dataset as retrievals reads one: labels, and items holding a (3, T, H, W) uint8 clip."""

    labels = torch.arange(12) % 3

    def __getitem__(self, i):
        return {"video": torch.full((3, 4, 8, 8), 20 * i, dtype=torch.uint8)}


def test_the_evaluation_pictures_name_the_method_they_show(drawn, tmp_path):
    """Fig. 5 names the method of its config; Fig. 10 and 11, drawn by evaluate.py into the run's folder,
    the method that folder's log trained."""
    from config import Config

    cfg = Config(loss="weighted", delta=-0.67)
    g = torch.Generator().manual_seed(0)
    scores, faulty = torch.randn(500, generator=g) * 0.1 + 0.2, torch.arange(500) % 4 == 0
    scores[faulty] -= 0.15
    w = sample_weights(scores, scores.mean(), scores.std(), cfg.delta, cfg.kappa, cfg.w_min)
    figures.scores_and_weights(scores, w, faulty, cfg, tmp_path / "scores_weights.png")
    (tmp_path / "log.jsonl").write_text(json.dumps({"epoch": 0, "stage": "weighted"}) + "\n")
    figures.per_class([0.5, 0.75, 1.0], ["a", "b", "c"], tmp_path / "per_class_r1.png")
    videos = Videos()
    figures.retrievals(videos, videos, torch.arange(48).view(12, 4) % 12, ["a", "b", "c"], tmp_path / "retrievals.png")
    for fig in drawn:
        assert_says_what_it_shows(fig, "Weighted-xID")
    clean, faulty = colour_of(drawn[0], "clean"), colour_of(drawn[0], "faulty")
    assert clean[2] > clean[0] and faulty[0] > max(faulty[1:])


def test_fig7_and_the_sweep_keep_their_legends_off_the_curves(drawn, tmp_path):
    curves = {m: {lv: [0.3 + lv / 4, 0.35 + lv / 4] for lv in (0.0, 0.25, 0.5)} for m in ("xID", "Robust-xID")}
    lab_figures.noisy([0.0, 0.25, 0.5], curves, "R@5", tmp_path / "fig7.png", baseline="xID")
    lab_figures.sweep(
        ["-1", "0"],
        {"25%": {"-1": [0.4, 0.5], "0": [0.45, 0.5]}},
        {"25%": [0.4, 0.45]},
        "R@1",
        tmp_path / "s.png",
        "delta",
    )
    for fig in drawn:
        assert_says_what_it_shows(fig, "R")
    assert "Robust-xID" in every_text(drawn[0])


# Machado, Oliveira and Fernandes (2009), severity 1: linear RGB as the three common colour-vision
# deficiencies see it
DEFICIENT = {
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.01182, 0.04294, 0.968881]],
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.3039]],
}


def seen_as(colour, deficiency):
    c = np.array(to_rgb(colour))
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    out = np.clip(np.array(DEFICIENT[deficiency]) @ linear, 0, 1)
    return np.where(out <= 0.0031308, 12.92 * out, 1.055 * out ** (1 / 2.4) - 0.055)


def closest_pair(colours, deficiency):
    seen = [seen_as(c, deficiency) for c in colours]
    return min(np.linalg.norm(a - b) for i, a in enumerate(seen) for b in seen[i + 1 :])


def test_every_method_keeps_a_colour_the_common_colour_blindnesses_tell_apart(drawn, tmp_path):
    """The warm-up and the five methods, as the curves draw them: no two closer than 0.15 (sRGB) as a
    deuteranope, protanope or tritanope sees them. matplotlib's default cycle, which drew Soft-xID's red
    beside xID's brown, fails this (0.10 for a protanope)."""
    runs = {"warmup": made_up_log(3, "xid", 0)}
    runs |= {n: made_up_log(2, n, i) for i, n in enumerate(["oracle", "robust", "soft", "weighted", "xid"])}
    figures.training_curves(runs, tmp_path / "curves.png")
    colours = [line.get_color() for line in drawn[0].axes[0].get_lines() if not line.get_label().startswith("_")]
    assert len(colours) == 6
    for deficiency in DEFICIENT:
        assert closest_pair(colours, deficiency) > 0.15, deficiency
    assert closest_pair(["C5", "C4", "C3", "C2", "C1", "k"], "protanopia") < 0.15  # the test can fail
    figures.soft_targets_over_training(runs, tmp_path / "soft.png")  # the same method, the same colour
    soft = {line.get_label(): line.get_color() for line in drawn[1].axes[0].get_lines()}
    assert soft["CCP from Soft-xID's bank"] == figures.run_colour("Soft-xID")


def test_a_demo_settings_pictures_are_titled_in_words_and_the_soft_targets_say_what_they_draw(drawn, tmp_path):
    setting = tmp_path / "seed3_faulty25"
    for name, stage in (("warmup", "xid"), ("soft", "soft")):
        (setting / name).mkdir(parents=True)
        lines = [json.dumps(r) for r in made_up_log(3, stage, 0)]
        (setting / name / "log.jsonl").write_text("\n".join(lines) + "\n")
    figures.run_pictures(setting)
    curves, _, soft = drawn
    assert curves.get_suptitle().startswith("25% injected faulty positives, seed 3: xID warm-up")
    assert "seed3_faulty25" not in every_text(curves)
    title = soft.axes[0].get_title()
    assert "lam = 1" in title and "every run's own memory bank" in title and "another CPU kind" in title
    assert figures.setting_words("my_run") == "my_run"
