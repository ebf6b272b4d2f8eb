"""Faults while training, each made real: a full disk at the checkpoint write, no permission, a
truncated checkpoint, a kill between the checkpoint and its log line. Nothing is lost or counted
twice, and every message names the file."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import checkpoint
from test_train import ROOT, log, run

STATE = {"config": {}, "model": {}}


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs where the machine lets a test mount one (root); else None."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True).returncode:
        yield None
        return
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def test_a_full_disk_names_the_file_and_the_free_space_and_keeps_the_last_good_checkpoint(
    small_disk, tmp_path, monkeypatch
):
    folder = small_disk or tmp_path
    ckpt = folder / "ckpt.pt"
    checkpoint.save_checkpoint(ckpt, **STATE, epoch=0, weights=torch.zeros(1000))  # 4 kB: fits
    good = ckpt.read_bytes()
    if small_disk is None:  # no tmpfs here: the write fails as a full disk does, with ENOSPC

        def full(obj, f):
            f.write(b"x" * 100)
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(checkpoint.torch, "save", full)
    with pytest.raises(checkpoint.CheckpointError) as err:
        checkpoint.save_checkpoint(ckpt, **STATE, epoch=1, weights=torch.zeros(2**20))  # 4 MiB: does not
    message = str(err.value)
    assert str(ckpt) in message and "the disk is full" in message and "MiB free" in message
    assert ckpt.read_bytes() == good and checkpoint.load_checkpoint(ckpt)["epoch"] == 0
    assert sorted(p.name for p in folder.iterdir()) == ["ckpt.pt"]  # no ckpt.pt.tmp left behind


def test_a_folder_that_cannot_be_written_is_named(tmp_path):
    """A real permission error: a read-only folder (chmod), or for root, whom chmod does not stop, an
    immutable one (chattr +i)."""
    folder = tmp_path / "locked"
    folder.mkdir()
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
            pytest.skip("root, and this filesystem has no immutable folders")
        unlock = ["chattr", "-i", str(folder)]
    else:
        folder.chmod(0o555)
        unlock = ["chmod", "755", str(folder)]
    try:
        with pytest.raises(checkpoint.CheckpointError, match="no permission to write there") as err:
            checkpoint.save_checkpoint(folder / "ckpt.pt", **STATE)
    finally:
        subprocess.run(unlock, check=True)
    assert str(folder / "ckpt.pt") in str(err.value) and not any(folder.iterdir())


def test_a_truncated_checkpoint_is_moved_aside_and_the_previous_one_resumes(tiny_data, tmp_path):
    run(tiny_data, tmp_path, "--warmup-epochs", "3", "--epochs", "0")
    ckpt = tmp_path / "ckpt.pt"
    assert checkpoint.load_checkpoint(checkpoint.previous(ckpt))["epoch"] == 1  # the one before is kept
    data = ckpt.read_bytes()
    ckpt.write_bytes(data[: len(data) // 2])
    # evaluation says what is wrong, with no traceback
    ev = subprocess.run(
        [sys.executable, str(ROOT / "evaluate.py"), "retrieval", str(ckpt)], cwd=ROOT, capture_output=True, text=True
    )
    assert ev.returncode != 0 and f"the checkpoint {ckpt} cannot be read" in ev.stderr
    assert "Traceback" not in ev.stderr
    # training names it, moves it aside and goes on from epoch 1's checkpoint
    text = run(tiny_data, tmp_path, "--warmup-epochs", "4", "--epochs", "0", "--allow-config-change")
    assert f"the checkpoint {ckpt} cannot be read" in text and "resuming from the previous checkpoint" in text
    assert (tmp_path / "ckpt.pt.corrupt").read_bytes() == data[: len(data) // 2]
    assert [r["epoch"] for r in log(tmp_path)] == [0, 1, 2, 3]  # epoch 2 again, once
    assert checkpoint.load_checkpoint(ckpt)["epoch"] == 3


def test_the_log_holds_each_epoch_once_whichever_side_of_the_checkpoint_a_kill_fell(tiny_data, tmp_path):
    """The two states a kill can leave: the log line of an epoch whose checkpoint was never written
    (the order before this fix), and a checkpoint whose log line was never written."""
    run(tiny_data, tmp_path, "--warmup-epochs", "2", "--epochs", "0")
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    phantom = json.dumps({**json.loads(lines[-1]), "epoch": 2})
    (tmp_path / "log.jsonl").write_text("\n".join(lines + [phantom]) + "\n")  # ahead of the checkpoint
    run(tiny_data, tmp_path, "--warmup-epochs", "3", "--epochs", "0", "--allow-config-change")
    assert [r["epoch"] for r in log(tmp_path)] == [0, 1, 2]
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    (tmp_path / "log.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # epoch 2 checkpointed, not logged
    run(tiny_data, tmp_path, "--warmup-epochs", "4", "--epochs", "0", "--allow-config-change")
    assert [r["epoch"] for r in log(tmp_path)] == [0, 1, 2, 3]


def test_sigterm_mid_epoch_loses_that_epoch_only_and_the_resume_ends_where_an_unstopped_run_does(tiny_data, tmp_path):
    """What torchrun, SLURM and the clouds send: the run dies inside an epoch, its last whole epoch's checkpoint
    stays, and the same command trains that epoch again in the same data order, to the same weights."""
    import signal
    import time

    from test_train import assert_same_state, weights

    args = ("--warmup-epochs", "2", "--epochs", "1", "--batch-size", "2", "--num-negatives", "7")  # 8 steps an epoch
    run(tiny_data, tmp_path / "whole", *args)
    proc = run(tiny_data, tmp_path / "stopped", *args, wait=False)
    ckpt = tmp_path / "stopped" / "ckpt.pt"
    deadline = time.time() + 120
    epoch_log = tmp_path / "stopped" / "log.jsonl"
    # epoch 0's log line is written after its checkpoint: once it is there the signal lands in epoch 1
    while not (epoch_log.exists() and epoch_log.read_text().strip()) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    for pid in [proc.pid, *map(int, children)]:  # as SLURM does: the run and its loader workers
        os.kill(pid, signal.SIGTERM)
    text, _ = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGTERM, text
    assert checkpoint.load_checkpoint(ckpt)["epoch"] == 0 and [r["epoch"] for r in log(tmp_path / "stopped")] == [0]
    assert "resuming from" in run(tiny_data, tmp_path / "stopped", *args)
    assert [r["epoch"] for r in log(tmp_path / "stopped")] == [0, 1, 2]
    assert_same_state(weights(tmp_path / "whole"), weights(tmp_path / "stopped"))
    whole, resumed = log(tmp_path / "whole"), log(tmp_path / "stopped")
    assert abs(whole[1]["loss"] - resumed[1]["loss"]) < 1e-5


def test_a_file_corrupted_after_the_scan_leaves_the_bank_whole(tiny_data, tmp_path):
    """The file decodes at the scan and fails in training: each epoch logs it as skipped, its slot is
    out of the bank (never trained, never a negative), and no other slot is harmed."""
    import shutil

    import train
    from config import parse_config
    from media import manifest
    from memory_bank import MemoryBank
    from test_train import TINY

    root = tmp_path / "data"
    shutil.copytree(tiny_data, root)
    records, _ = manifest.load_records("folder", root, "train", need_audio=True)  # the scan (manifest.csv)
    assert (root / "manifest.csv").exists()
    bad = 5
    Path(records[bad].path).write_bytes(b"\x00" * 4096)  # corrupted after the scan
    cfg = parse_config(
        [
            "--preset",
            "demo",
            "--data",
            str(root),
            "--out",
            str(tmp_path / "run"),
            "--preload",
            "off",
            "--warmup-epochs",
            "2",
            "--epochs",
            "0",
            "--max-bad-fraction",
            "0.2",
        ]
        + TINY
        + ["--workers", "0"]
    )
    sampled = []
    original = MemoryBank.sample
    MemoryBank.sample = lambda self, idx, k: sampled.append(original(self, idx, k)) or sampled[-1]
    try:
        _, bank = train.main(cfg)
    finally:
        MemoryBank.sample = original
    epochs = log(tmp_path / "run")
    assert [r["skipped"] for r in epochs] == [1, 1] and [r["excluded"] for r in epochs] == [1, 1]
    fresh = MemoryBank(len(records), momentum=cfg.momentum, seed=cfg.seed)
    assert not bank.valid[bad] and bank.valid.sum() == len(records) - 1
    assert torch.equal(bank.video[bad], fresh.video[bad]) and torch.equal(bank.audio[bad], fresh.audio[bad])
    assert not torch.equal(bank.video[bad + 1], fresh.video[bad + 1])  # the others trained
    torch.testing.assert_close(bank.video.norm(dim=1), torch.ones(len(records)))
    assert all((c != bad).all() for c in sampled[len(sampled) // 2 :])  # epoch 1: never a candidate
