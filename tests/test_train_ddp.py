"""train.py under torchrun (gloo on the CPU): replicas stay identical, rank 0 alone logs and saves, a run
resumes across nodes and under another world size with its bank whole (Sec. 5.1's DDP training)."""

import os
import subprocess
import sys

import pytest
import torch

from memory_bank import MemoryBank
from test_train import ROOT, TINY, assert_same_state, log, run, weights


def torchrun_cmd(tiny_data, out, warmup, epochs, *more, launch=("--standalone", "--nproc_per_node=2"), script=None):
    """torchrun over the tests' DDP worker (or `script`) at the TINY recipe, on the tiny set."""
    script = script or ROOT / "tests" / "ddp_worker.py"
    cmd = [sys.executable, "-m", "torch.distributed.run", *launch, str(script), "--preset", "demo"]
    cmd += ["--data", str(tiny_data), "--out", str(out), "--warmup-epochs", str(warmup), "--epochs", str(epochs)]
    return cmd + [*more] + TINY


def test_torchrun_gloo_keeps_replicas_identical(tiny_data, tmp_path):
    cmd = torchrun_cmd(tiny_data, tmp_path, 1, 1)
    res = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    assert res.returncode == 0, res.stdout + res.stderr
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1))
    assert_same_state(r0, r1)
    assert not torch.equal(r0["bank"]["video"], MemoryBank(16, seed=0).video)  # the bank was updated
    assert len(log(tmp_path)) == 2  # only rank 0 logs


@pytest.mark.slow  # a minute; test_torchrun_gloo_keeps_replicas_identical covers torchrun in the default run
def test_two_nodes_through_torchrun_rendezvous_keep_replicas_identical_and_resume(tiny_data, tmp_path):
    """Multi-node as the README runs it, on one machine: two torchrun launches (--nnodes=2, one
    process each) meet at a c10d rendezvous on localhost, gloo; the run folder and data are shared.
    Only rank 0 writes the checkpoint and the log, and a relaunch of both resumes from it."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def launch(epochs, run_id, *more):
        rendezvous = ("--nnodes=2", "--nproc_per_node=1", "--rdzv-backend=c10d")
        rendezvous += (f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={run_id}")
        cmd = torchrun_cmd(tiny_data, tmp_path, epochs, 0, *more, launch=rendezvous)
        nodes = [
            subprocess.Popen(
                cmd,
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "OMP_NUM_THREADS": "1"},
            )
            for _ in range(2)
        ]
        texts = [p.communicate(timeout=300)[0] for p in nodes]
        assert all(p.returncode == 0 for p in nodes), "\n".join(texts)
        return "\n".join(texts)

    launch(1, "first")
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1))
    assert_same_state(r0, r1)
    assert_same_state(r0, weights(tmp_path))  # the checkpoint is the replicas' state
    assert [r["epoch"] for r in log(tmp_path)] == [0]  # one log line: rank 0 alone writes
    assert sorted(p.name for p in tmp_path.glob("ckpt.pt*")) == ["ckpt.pt"]  # no half-written files
    text = launch(2, "second", "--allow-config-change")  # one more epoch
    assert text.count("resuming from") == 1  # rank 0 says it, both resume
    assert [r["epoch"] for r in log(tmp_path)] == [0, 1]
    assert_same_state(*(torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)))


def test_a_run_resumes_under_another_world_size_with_each_epoch_logged_once_and_the_bank_whole(tiny_data, tmp_path):
    """2 processes -> 1 -> 2, at epoch boundaries: the global batch is the same, so is the bank."""

    def torchrun(epochs):
        cmd = torchrun_cmd(tiny_data, tmp_path, epochs, 0, "--allow-config-change")
        res = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"}
        )
        assert res.returncode == 0, res.stdout + res.stderr
        return res.stdout

    torchrun(1)
    text = run(tiny_data, tmp_path, "--warmup-epochs", "2", "--epochs", "0", "--allow-config-change")
    assert "resuming from" in text and "after epoch 0" in text
    text = torchrun(3)
    assert text.count("resuming from") == 1 and "after epoch 1" in text
    assert [r["epoch"] for r in log(tmp_path)] == [0, 1, 2]
    state = weights(tmp_path)
    assert state["epoch"] == 2
    bank = state["bank"]
    n = bank["video"].shape[0]
    assert set(bank) == {"video", "audio"} and n == 16
    torch.testing.assert_close(bank["video"].norm(dim=1), torch.ones(n))
    torch.testing.assert_close(bank["audio"].norm(dim=1), torch.ones(n))
    untouched = MemoryBank(n, seed=0)
    assert (bank["video"] != untouched.video).any(1).all()  # every slot was trained
    assert_same_state(*(torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)))


def test_a_file_that_fails_on_one_rank_stops_every_rank_in_one_line_naming_it(tiny_data, tmp_path):
    """Under torchrun the rank that meets the bad file stops with the line that names it, and the job ends
    together: torchrun stops the other rank, which would otherwise wait in the next all-reduce."""
    import shutil

    root = tmp_path / "data"
    shutil.copytree(tiny_data, root)
    bad = root / (root / "train.txt").read_text().split()[3]  # a training video, corrupted after the scan
    bad.write_bytes(b"\x00" * 4096)
    cmd = torchrun_cmd(root, tmp_path / "run", 1, 0, "--preload", "off", script=ROOT / "train.py")
    res = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=240, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    text = res.stdout + res.stderr
    assert res.returncode != 0, text
    assert f"train.py: data: {bad} failed to decode" in text, text
    assert "Traceback" not in res.stdout and not (tmp_path / "run" / "ckpt.pt").exists()
