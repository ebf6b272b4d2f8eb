"""One run per folder, made real with processes: a second train.py (or a torchrun job) on a folder that a
live run holds stops within seconds and names the holder, while an evaluation of its checkpoint runs;
a run killed by SIGKILL leaves nothing that blocks the next, which resumes."""

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

import checkpoint as folder_lock
import evaluate
from test_train import ROOT, log, run
from test_train_ddp import torchrun_cmd

LONG = ("--warmup-epochs", "400", "--epochs", "0")  # outlives the checks below, killed after them


def wait_until(condition, proc, seconds=120):
    deadline = time.time() + seconds
    while not condition():
        assert proc.poll() is None, proc.communicate()[0]
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def holder_pid(out):
    try:
        found = re.search(r", pid (\d+),", (out / folder_lock.LOCK_NAME).read_text())
    except FileNotFoundError:
        return None
    return int(found.group(1)) if found else None


def test_the_same_process_cannot_hold_a_folder_twice_and_a_released_one_is_free(tmp_path):
    probe = [
        sys.executable,
        "-c",
        "import sys; sys.path.insert(0, '.'); import checkpoint as folder_lock\n"
        f"with folder_lock.hold_folder({str(tmp_path)!r}, who='other'): pass",
    ]
    with folder_lock.hold_folder(tmp_path, who="first"):
        with pytest.raises(SystemExit, match=f"first on host {socket.gethostname()}, pid {os.getpid()}"):
            with folder_lock.hold_folder(tmp_path, who="second"):
                pass
        # the refused second try did not release the first: another process is still kept out
        other = subprocess.run(probe, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert other.returncode != 0 and f"pid {os.getpid()}" in other.stderr, other.stderr
    with folder_lock.hold_folder(tmp_path, who="third"):
        assert (tmp_path / folder_lock.LOCK_NAME).read_text().startswith(f"third on host {socket.gethostname()}")
        # reading run.lock in the holding process (its own open and close) leaves the lock held
        other = subprocess.run(probe, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert other.returncode != 0 and "third on host" in other.stderr, other.stderr


def test_a_second_run_on_a_held_folder_stops_naming_the_holder_and_the_first_logs_each_epoch_once(tiny_data, tmp_path):
    # LONG: the first must still hold the folder when the second has started up (15 epochs of the tiny
    # set once ended first, on a quiet machine with the faster loader, and the second simply resumed)
    first = run(tiny_data, tmp_path, *LONG, wait=False)
    try:
        wait_until(lambda: holder_pid(tmp_path) == first.pid, first)
        t0 = time.time()
        second = run(tiny_data, tmp_path, *LONG, wait=False)
        text, _ = second.communicate(timeout=120)
        assert second.returncode != 0 and time.time() - t0 < 30, text
        assert f"run folder {tmp_path} is in use by train.py on host {socket.gethostname()}, pid {first.pid}" in text
        assert "Traceback" not in text, text
        wait_until(
            lambda: (tmp_path / "log.jsonl").exists() and len(log(tmp_path)) >= 2, first
        )  # goes on training after the refusal ...
        first.send_signal(signal.SIGTERM)  # training after the refusal, then killed (its 400 epochs took 90 s)
        out, _ = first.communicate(timeout=120)
        assert first.returncode == -signal.SIGTERM and "Traceback" not in out, out
    finally:
        first.kill()
    epochs = [r["epoch"] for r in log(tmp_path)]
    assert epochs == list(range(len(epochs))) and len(epochs) >= 2  # each epoch once, none lost to the second


def test_a_run_killed_by_sigkill_does_not_block_the_next_which_resumes(tiny_data, tmp_path):
    first = run(tiny_data, tmp_path, *LONG, wait=False)
    wait_until(lambda: (tmp_path / "log.jsonl").exists() and (tmp_path / "log.jsonl").read_text().strip(), first)
    os.kill(first.pid, signal.SIGKILL)  # no handler runs: only the kernel releases the lock
    first.communicate(timeout=60)
    assert holder_pid(tmp_path) == first.pid  # its name stays in the file, the lock does not
    text = run(tiny_data, tmp_path, "--warmup-epochs", "3", "--epochs", "0", "--allow-config-change")
    assert "resuming from" in text
    epochs = [r["epoch"] for r in log(tmp_path)]
    assert epochs == sorted(set(epochs)) and epochs[-1] == 2 and epochs[0] == 0


def test_evaluating_a_checkpoint_whose_run_still_trains_writes_its_own_record_and_leaves_the_run_alone(
    tiny_data, tmp_path
):
    """Evaluation writes only its own files (feature caches, eval.json under a lock of its own), so a run
    training in the folder does not stop it, and its record names the epoch it evaluated."""
    first = run(tiny_data, tmp_path, *LONG, wait=False)
    try:
        wait_until(lambda: (tmp_path / "ckpt.pt").exists() and holder_pid(tmp_path) == first.pid, first)
        ev = subprocess.run(
            [sys.executable, str(ROOT / "evaluate.py"), "retrieval", str(tmp_path / "ckpt.pt"), "--workers", "0"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        assert ev.returncode == 0, ev.stderr
        (rec,) = evaluate.load(tmp_path / "eval.json")
        assert rec["task"] == "retrieval" and rec["checkpoint_epoch"] >= 0 and 0 <= rec["results"]["R@1"] <= 1
        assert first.poll() is None and holder_pid(tmp_path) == first.pid  # the run trains on, holding its folder
    finally:
        first.kill()
        first.communicate()


def test_every_torchrun_rank_stops_when_the_folder_is_held(tiny_data, tmp_path):
    """Rank 0 holds the folder for the job; when it cannot, it tells the others, and none waits in a
    collective for a rank that left."""
    cmd = torchrun_cmd(tiny_data, tmp_path, 1, 0, script=ROOT / "train.py")
    with folder_lock.hold_folder(tmp_path, who="a test"):
        res = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"}
        )
    text = res.stdout + res.stderr
    assert res.returncode != 0, text
    assert f"in use by a test on host {socket.gethostname()}, pid {os.getpid()}" in text, text
    assert not (tmp_path / "log.jsonl").exists()
