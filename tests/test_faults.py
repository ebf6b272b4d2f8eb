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


def test_a_file_corrupted_after_the_scan_stops_training_in_one_line_naming_it(tiny_data, tmp_path):
    """The file decodes at the scan and fails in training, read by a loader worker: the run stops with one line
    that names the file (a bank slot is never left untrained), and no checkpoint claims the epoch."""
    import shutil

    from media import manifest

    root = tmp_path / "data"
    shutil.copytree(tiny_data, root)
    records, _ = manifest.load_records("folder", root, "train", need_audio=True)
    Path(records[5].path).write_bytes(b"\x00" * 4096)  # corrupted after the scan
    proc = run(root, tmp_path / "run", "--preload", "off", "--warmup-epochs", "1", "--epochs", "0", wait=False)
    text, _ = proc.communicate(timeout=300)
    last = text.strip().splitlines()[-1]
    assert (
        proc.returncode == 1 and last.startswith("train.py: data: ") and f"{records[5].path} failed to decode" in last
    )
    assert "Traceback" not in text and not (tmp_path / "run" / "ckpt.pt").exists()
