"""The pictures of the mechanism for any run folder: train.py logs the bank scores' histogram every
epoch, and `python -m analysis.figures RUN_DIR` draws the training curves and the scores under the eq. (6)
weights at several epochs, and the share of CCP's soft-target mass on the anchor's class."""

import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch

from analysis.diagnostics import score_histogram
from test_train import ROOT, log, run


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
    run(tiny_data, tmp_path / "warmup", "--warmup-epochs", "3", "--epochs", "0", "--faulty-fraction", "0.25")
    run(
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
        [sys.executable, "-m", "analysis.figures", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    for png in ("curves.png", "scores_over_training.png", "soft_targets.png"):
        assert (tmp_path / png).stat().st_size > 10_000
    assert_legends_cover_no_axes(tmp_path)
    bad = subprocess.run(
        [sys.executable, "-m", "analysis.figures", str(tmp_path / "nothing")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and "not a run folder" in bad.stderr and "Traceback" not in bad.stderr


def test_figures_help_prints_the_usage_and_draws_nothing(capsys, tmp_path, monkeypatch):
    from analysis import figures

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        figures.main(["--help"])
    assert stop.value.code == 0 and "run_dir" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []  # not taken for a run folder


def assert_legends_cover_no_axes(run_dir):
    """Every figure analysis.figures draws for a run keeps its legends off every panel (a legend inside the
    axes once sat on the soft-target branches' late epochs)."""
    from analysis import figures

    checked = []

    def check(fig, path):
        figures.layout(fig)
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
