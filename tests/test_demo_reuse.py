"""A demo rerun in the same --runs with other settings (demo.py): each run folder is reused only where
the settings that shape it are the same. A branch's own settings (lam, ...) do not shape the warm-up, so another
lam reuses the warm-up and trains the soft branch anew beside the old one, and the table says what each row ran
with; a setting that shapes the warm-up is refused in one line that names a new --runs."""

import pytest
import torch

import demo
from checkpoint import SECOND_STAGE
from demo import DemoArgs
from tools import synthetic

TINY = ["--warmup-epochs", "1", "--epochs", "1", "--trials", "2", "--workers", "0", "--no-figures", "--frames", "4"]
TINY += ["--size", "32", "--batch-size", "8", "--num-negatives", "15", "--width", "0.125", "--branch-jobs", "1"]
TINY += ["--eval-clips", "1"]


def saved_config(ckpt):
    return torch.load(ckpt, map_location="cpu", weights_only=True)["config"]


def test_another_lam_reuses_the_warm_up_and_trains_the_soft_branch_anew(tmp_path, capsys):
    data = tmp_path / "synth"
    synthetic.generate(
        data, classes=2, train_per_class=8, test_per_class=2, pool=0, faulty=0.25, size=32, seconds=(2.2, 2.4)
    )
    runs = tmp_path / "runs"
    argv = ["--data", str(data), "--runs", str(runs), "--methods", "xid", "soft", "--faulty", "0.5", *TINY]
    demo.main(argv + ["--results", str(tmp_path / "lam05")])
    setting = runs / "seed0_faulty50"
    warm = (setting / "warmup" / "ckpt.pt").stat().st_mtime_ns
    capsys.readouterr()

    demo.main(argv + ["--results", str(tmp_path / "lam03"), "--lam", "0.3"])
    out = capsys.readouterr().out
    assert (setting / "warmup" / "ckpt.pt").stat().st_mtime_ns == warm  # the warm-up never reads lam
    assert saved_config(setting / "soft_lam0.3" / "ckpt.pt")["lam"] == 0.3  # a branch of its own
    assert saved_config(setting / "soft" / "ckpt.pt")["lam"] == 0.5  # the lam 0.5 branch is left as it was
    assert "allow-config-change" not in out
    table = (tmp_path / "lam03" / "demo.md").read_text()
    assert "Soft-xID: ccp targets, lam 0.3, tau_s 0.02, tau_t 0.07" in table and "xID: none" in table
    assert "lam 0.5" not in table
    assert "Soft-xID: ccp targets, lam 0.5" in (tmp_path / "lam05" / "demo.md").read_text()

    with pytest.raises(SystemExit) as refused:  # tau shapes the warm-up: no reuse possible
        demo.main(argv + ["--results", str(tmp_path / "tau"), "--tau", "0.1"])
    message = str(refused.value.code)
    assert "\n" not in message and "tau 0.07 -> 0.1" in message and "a new --runs" in message
    assert "allow-config-change" not in message
    assert (setting / "warmup" / "ckpt.pt").stat().st_mtime_ns == warm


def test_a_branch_folder_is_named_by_its_own_settings_where_they_are_not_the_presets():
    """Only the settings the branch's variant reads name it; a warm-up's (tau) do not, they are refused."""
    args = DemoArgs(train_args=["--lam", "0.3", "--kappa", "0.7", "--tau", "0.1"])
    assert demo.branch_name(args, "soft") == "soft_lam0.3" and demo.branch_name(args, "weighted") == "weighted_kappa0.7"
    assert demo.branch_name(args, "robust") == "robust_lam0.3_kappa0.7" and demo.branch_name(args, "xid") == "xid"
    assert demo.branch_name(DemoArgs(), "soft:oracle") == "soft_oracle"  # the method's own targets: its name
    assert set(demo.OWN) == SECOND_STAGE - {"loss", "epochs", "delta"}
