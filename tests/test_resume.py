"""Resuming train.py: a killed run resumes to the same weights, a resume may change only the settings that leave
the result alone (judged on the epochs the checkpoint trained), a changed setting stops in one line before the data,
and a checkpoint of other injected positives, or of another amp, is refused or resumed as the rules say."""

import os
import re
import signal
import time
from dataclasses import replace

import pytest
import torch

import checkpoint
import data
import train
from checkpoint import result_changes
from config import Config, parse_config
from test_train import TINY, assert_same_state, log, run, weights


def restorer(cfg, parts, dataset):
    """The run management of cfg.out, which restores its checkpoint when made (one process)."""
    return checkpoint.Run(cfg, parts, dataset.instances(), {}, 1, rank=0)


def test_a_resume_may_change_only_the_settings_that_leave_the_result_alone():
    """preload and amp change the numbers (AAC's restart after a seek; rounding), so they are result
    settings a resume must keep; the rest of the engineering group is bookkeeping and speed."""

    base = parse_config(["--preset", "demo"])

    def changed(*opts):
        return set(result_changes(base, parse_config(["--preset", "demo", *opts])))

    assert changed("--preload", "off") == {"preload"} and changed("--amp", "bf16") == {"amp"}
    for opts in (
        ["--workers", "3"],
        ["--out", "elsewhere"],
        ["--init", "a.pt"],
        ["--no-channels-last"],
        ["--allow-config-change"],
        ["--device", "cpu"],
        ["--save-every", "3"],
    ):
        assert changed(*opts) == set(), opts


def test_killed_run_resumes_to_the_same_weights(tiny_data, tmp_path):
    args = ("--warmup-epochs", "2", "--epochs", "3")
    run(tiny_data, tmp_path / "full", *args)
    proc = run(tiny_data, tmp_path / "killed", *args, wait=False)
    ckpt = tmp_path / "killed" / "ckpt.pt"
    deadline = time.time() + 120
    while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(log(tmp_path / "killed")) < 5
    text = run(tiny_data, tmp_path / "killed", *args)
    assert "resuming from" in text
    assert [r["epoch"] for r in log(tmp_path / "killed")][-1] == 4
    assert_same_state(weights(tmp_path / "full"), weights(tmp_path / "killed"))


def test_a_longer_warm_up_resumes_and_a_changed_setting_stops_in_one_line_before_the_data(tiny_data, tmp_path):
    """Extending the warm-up resumes it (lam is not read by a warm-up either); a setting its trained epochs read
    stops the run in one train.py line, before the data is read, and the flag lets a user continue anyway. Each
    epoch line says the time per epoch and the time left."""
    first = run(tiny_data, tmp_path, "--warmup-epochs", "1", "--epochs", "0")
    assert re.search(r"s/epoch, \d+ s left", first)
    text = run(tiny_data, tmp_path, "--warmup-epochs", "2", "--epochs", "0", "--lam", "0.3")
    assert "resuming from" in text and len(log(tmp_path)) == 2
    proc = run(tiny_data, tmp_path, "--warmup-epochs", "3", "--epochs", "0", "--faulty-fraction", "0.25", wait=False)
    text, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0 and len(log(tmp_path)) == 2  # nothing was trained under the new settings
    last = text.strip().splitlines()[-1]
    assert last.startswith("train.py: ") and "faulty_fraction 0.0 -> 0.25" in last and "--allow-config-change" in last
    assert "warmup_epochs" not in last and "Traceback" not in text
    assert "data in memory" not in text and "scan" not in text  # refused before the data was read
    text = run(tiny_data, tmp_path, "--warmup-epochs", "3", "--epochs", "0", "--allow-config-change", "--workers", "0")
    assert "resuming from" in text and len(log(tmp_path)) == 3


def test_a_resume_is_refused_only_for_the_settings_its_trained_epochs_read():
    """config.result_changes given the epochs a checkpoint trained: a warm-up reads none of the second stage's
    settings and may grow; a branch reads only its variant's (soft targets: lam, tau_s...; weights: kappa...)."""
    warm = Config(warmup_epochs=2, epochs=0)
    assert result_changes(warm, replace(warm, lam=0.3, loss="soft", epochs=5, kappa=0.7), trained=2) == {}
    assert result_changes(warm, replace(warm, warmup_epochs=3), trained=2) == {}
    assert set(result_changes(warm, replace(warm, warmup_epochs=1), trained=2)) == {"warmup_epochs"}
    assert set(result_changes(warm, replace(warm, tau=0.1), trained=2)) == {"tau"}
    soft = Config(warmup_epochs=0, epochs=3, loss="soft")
    assert set(result_changes(soft, replace(soft, lam=0.3, kappa=0.7), trained=1)) == {"lam"}
    assert set(result_changes(soft, replace(soft, epochs=4), trained=1)) == {"epochs"}  # the cosine's length
    xid = replace(soft, loss="xid")
    assert result_changes(xid, replace(xid, lam=0.3, kappa=0.7, tau_s=0.05), trained=1) == {}
    weighted = replace(soft, loss="weighted")
    assert set(result_changes(weighted, replace(weighted, lam=0.3, kappa=0.7), trained=1)) == {"kappa"}
    assert set(result_changes(warm, replace(warm, lam=0.3))) == {"lam"}  # without the epochs: every field


def test_a_checkpoint_made_with_other_injected_positives_is_refused():
    """Resuming or branching off a bank trained on other faulty positives (an older injection draw)
    would mix two experiments silently."""

    injected = torch.tensor([True, False, False, True])
    checkpoint.same_injection({"instances": {"injected": injected.clone()}}, injected, "same.pt")  # no error
    with pytest.raises(SystemExit, match="other.pt was trained with other injected faulty positives"):
        checkpoint.same_injection(
            {"instances": {"injected": torch.tensor([False, True, False, True])}}, injected, "other.pt"
        )
    checkpoint.same_injection({"instances": {"injected": ~injected}}, injected, "other.pt", allow=True)


def test_a_checkpoint_without_fp16_resumes_under_fp16(tiny_data, tmp_path):
    """A bf16 or fp32 run saves an empty GradScaler state; resuming it in fp16 must not load it."""
    run(tiny_data, tmp_path, "--warmup-epochs", "1", "--epochs", "0", "--amp", "off")
    cfg = parse_config(
        [
            "--preset",
            "demo",
            "--data",
            str(tiny_data),
            "--out",
            str(tmp_path),
            "--amp",
            "fp16",
            "--warmup-epochs",
            "2",
            "--epochs",
            "0",
            "--allow-config-change",
        ]
        + TINY
        + ["--workers", "0"]
    )
    dataset = data.build_train_set(cfg)
    parts = train.build_parts(cfg, dataset, torch.device("cpu"))
    assert parts.scaler.is_enabled()
    assert restorer(cfg, parts, dataset).start == 1


def test_an_older_checkpoint_stopped_inside_an_epoch_is_refused_before_the_data_and_as_an_init(tmp_path):
    """The earlier train.py saved a SIGTERM stop mid-epoch (`partial`): mid-epoch weights under the last whole
    epoch's count. Resuming or branching from it would train that epoch's first steps twice: one line instead,
    naming ckpt.pt.prev, which holds the whole epoch before it."""
    from dataclasses import asdict

    cfg = parse_config(["--preset", "demo", "--out", str(tmp_path)])
    state = {"config": asdict(cfg), "model": {}, "epoch": 2, "partial": {"epoch": 3, "steps": 5}}
    torch.save({**state, "format": checkpoint.CHECKPOINT_FORMAT}, tmp_path / "ckpt.pt")
    with pytest.raises(SystemExit, match=r"stopped inside an epoch .*ckpt\.pt\.prev holds the whole epoch"):
        checkpoint.refuse_other_settings(cfg)
    with pytest.raises(SystemExit, match="stopped inside an epoch"):  # other settings allowed: still not mid-epoch
        checkpoint.refuse_other_settings(replace(cfg, allow_config_change=True))
    with pytest.raises(SystemExit, match="stopped inside an epoch"):
        checkpoint.branch_state(str(tmp_path / "ckpt.pt"), {"paths": [], "injected": None})
    state["partial"] = None  # a whole epoch's checkpoint of the same settings: resumable
    torch.save({**state, "format": checkpoint.CHECKPOINT_FORMAT}, tmp_path / "ckpt.pt")
    checkpoint.refuse_other_settings(cfg)


def test_a_branch_seed_keeps_the_warm_ups_faults_and_a_mismatch_names_both_values(tiny_data, tmp_path):
    """--fault-seed: a branch off a warm-up under another --seed (its shuffling, augmentations and negatives)
    keeps the warm-up's injected faults. A branch whose faults differ is refused naming both sides' settings,
    and its failed start leaves no run folder behind."""
    injected = ("--faulty-fraction", "0.25", "--workers", "0")
    run(tiny_data, tmp_path / "warm", *injected, "--warmup-epochs", "1", "--epochs", "0")
    branch = (*injected, "--init", tmp_path / "warm" / "ckpt.pt", "--warmup-epochs", "0", "--epochs", "1")
    run(tiny_data, tmp_path / "seed3", *branch, "--seed", "3", "--fault-seed", "0")
    warm, seed3 = (torch.load(tmp_path / f / "ckpt.pt", weights_only=True) for f in ("warm", "seed3"))
    assert torch.equal(warm["instances"]["injected"], seed3["instances"]["injected"])
    assert warm["instances"]["injected"].any() and seed3["config"]["seed"] == 3
    for extra, words in (
        (
            ("--seed", "3"),
            "injection seed 0, this run's --faulty-fraction 0.25 --faulty-source heldout, injection seed 3",
        ),
        (("--faulty-fraction", "0.5"), "its --faulty-fraction 0.25 --faulty-source heldout, injection seed 0, this"),
    ):
        proc = run(tiny_data, tmp_path / "refused", *branch, *extra, wait=False)
        text, _ = proc.communicate(timeout=300)
        assert proc.returncode != 0 and words in text and "--fault-seed keeps its faults" in text, text
        assert "mismatched experiment" in text and not (tmp_path / "refused").exists()
