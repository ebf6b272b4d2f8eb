"""Shared test set-up: every test seeded, generated media, and the two datasets several test files use
(pyproject.toml puts the repository root on the path)."""

import os
import shutil
import tempfile
import time
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import threadpoolctl
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import checkpoint
from config import Config
from lab import refactor_guard
from memory_bank import MemoryBank
from model import AVModel
from tools import scan, synthetic


def pytest_configure(config):
    # `make test` runs the files in pytest-xdist workers (2 on a 2-core CI machine): each worker's torch, NumPy's
    # BLAS and the programs it starts share out the cores, so that the workers do not contend for them all.
    if workers := int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")):
        threads = max(1, len(os.sched_getaffinity(0)) // workers)
        os.environ["OMP_NUM_THREADS"] = str(threads)
        torch.set_num_threads(threads)
        threadpoolctl.threadpool_limits(threads)  # NumPy's OpenBLAS pool was made when conftest imported it


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


RATE = 22050  # sample rate of the generated test files


def clicks(seconds, at):
    """Silence with 50 ms 1 kHz bursts starting at the times `at`."""
    t = np.arange(int(RATE * seconds)) / RATE
    wav = np.zeros_like(t, dtype=np.float32)
    for s in at:
        on = (t >= s) & (t < s + 0.05)
        wav[on] = 0.5 * np.sin(2 * np.pi * 1000 * t[on])
    return wav


def counter_frames(seconds, fps, size=32):
    """Frame k is uniformly grey at level 3k: the decoded level tells which source frame it is."""
    return np.stack([np.full((size, size, 3), 3 * k, np.uint8) for k in range(int(round(seconds * fps)))])


# Module-scoped: each test file that asks for one gets its own, made once.
@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    synthetic.main(["--out", str(out), *refactor_guard.TINY])  # the guard's tiny set, one list
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("clips")
    out = {}
    out["25fps"] = d / "c25.mp4"
    synthetic.write_mp4(out["25fps"], counter_frames(3.0, 25), clicks(3.0, (0.5, 1.5, 2.5)), 25, RATE)
    out["10fps"] = d / "c10.mp4"
    synthetic.write_mp4(out["10fps"], counter_frames(3.0, 10), clicks(3.0, (1.0,)), 10, RATE)
    for k in range(6):  # a pool of 6 silent files: each injected instance needs one of its own
        out["silent_pool"] = d / "pool" / f"silent{k}.mp4"
        out["silent_pool"].parent.mkdir(exist_ok=True)
        synthetic.write_mp4(out["silent_pool"], None, np.zeros(RATE * 4, np.float32), 25, RATE)
    return out


UCF_SILENT = "v_silent_g01_c01.mp4"  # in the first class; fold 1's test split holds it


def ucf_layout(root):
    """A tiny UCF101 layout from the generator under `root`: class folders and ucfTrainTestlist/
    (classInd.txt and three folds; a third of each class's videos is fold k's test split), with one
    silent video, which the generator's manifest (a scan that requires audio) leaves out, as
    tools/prepare.py's scan once did."""
    synthetic.generate(
        root, classes=2, train_per_class=6, test_per_class=0, heldout=0, pool=0, size=32, seconds=(2.2, 2.4), workers=1
    )
    classes = sorted(d.name for d in root.iterdir() if d.is_dir() and d.name[0] not in "_.")
    synthetic.write_mp4(root / classes[0] / UCF_SILENT, np.full((40, 32, 32, 3), 128, np.uint8), None, 16, RATE)
    lists = root / "ucfTrainTestlist"
    lists.mkdir()
    (lists / "classInd.txt").write_text("".join(f"{k + 1} {c}\n" for k, c in enumerate(classes)))
    per_class = [[f"{c}/{p.name}" for p in sorted((root / c).glob("*.mp4"))] for c in classes]
    for fold in (1, 2, 3):  # the i-th video of its class is in fold k's test split when i % 3 == k - 1
        test = [v for vs in per_class for i, v in enumerate(vs) if i % 3 == fold - 1]
        train = [f"{v} {k + 1}" for k, vs in enumerate(per_class) for i, v in enumerate(vs) if i % 3 != fold - 1]
        (lists / f"testlist0{fold}.txt").write_text("".join(f"{v}\n" for v in test))
        (lists / f"trainlist0{fold}.txt").write_text("".join(f"{v}\n" for v in train))
    return root


@pytest.fixture(scope="module")
def ucf_data(tmp_path_factory):
    return ucf_layout(tmp_path_factory.mktemp("ucf101"))


# ----------------------------------------------------------------------------- evaluation
# A tiny checkpoint and the tiny UCF101 layout, evaluated as a user runs evaluate.py
# (tests/test_eval_records.py, tests/test_finetune_records.py).

TUNE = ["--finetune-epochs", "4", "--finetune-batch", "4"]  # a fine-tune of 4 epochs, batches of 4
FAST = ["--clips", "2", "--workers", "0", "--device", "cpu"]  # 2 clips per video: the same code, a fifth of it


def save_version(path, epoch, seed=0):
    """An untrained tiny checkpoint (evaluation reads it as any other): its numbers are not the point.
    Another epoch and seed: another version of the file, as a run that goes on training saves it."""
    cfg = Config(frames=4, size=32, n_mels=40, n_time=40, width=0.125)
    torch.manual_seed(seed)
    checkpoint.save_checkpoint(
        path,
        model_args=checkpoint.model_args(cfg),
        clip={},
        config=asdict(cfg),
        model=AVModel(**checkpoint.model_args(cfg)).state_dict(),
        bank=MemoryBank(16, seed=0).state_dict(),
        instances=None,
        epoch=epoch,
    )
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return save_version(tmp_path_factory.mktemp("run") / "ckpt.pt", 7)


@pytest.fixture
def ckpt(trained, tmp_path):
    """The checkpoint in a folder of this test's own, so that its eval.json starts empty."""
    return Path(shutil.copy(trained, tmp_path / "ckpt.pt"))


@pytest.fixture(scope="module")
def video_manifest(ucf_data, tmp_path_factory):
    """A manifest of ucf_data scanned as the error message says: without requiring audio."""
    out = tmp_path_factory.mktemp("scan") / "manifest.csv"
    scan.main([str(ucf_data), "--video-only", "--jobs", "1", "--out", str(out)])
    return out


def ucf(ucf_data, *args):
    return ["--data", str(ucf_data), "--layout", "ucf101", *map(str, args), *FAST]


# ----------------------------------------------------------------------------- several ranks
# What each of several processes in one gloo group does, for the exits and choices every rank must take
# together (tests/test_ranks_agree.py, tests/test_train_ddp.py).


def _rank_main(rank, world, init_file, collective_s, fn, args, box):
    torch.set_num_threads(1)  # two ranks on a CPU or two
    # a timeout on every collective: ranks that part ways then fail the test instead of hanging it
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world, timeout=timedelta(seconds=collective_s)
    )
    try:
        outcome = ("returned", fn(rank, *args))
    except SystemExit as stop:
        outcome = ("exit", stop.code)
    except Exception as err:  # noqa: BLE001 -- what the rank met is the test's evidence
        outcome = ("error", f"{type(err).__name__}: {str(err)[:300]}")
    box.put((rank, outcome))
    if dist.is_initialized():  # train.py's way out destroys the group; a plain function leaves it
        dist.destroy_process_group()


def on_ranks(fn, *args, world=2, collective_s=30, limit_s=300):
    """fn(rank, *args) in each of `world` spawned processes of one gloo group (fn and args picklable: a test
    module's function, paths). -> {rank: (how, what)}: ("returned", value), ("exit", SystemExit's code) or
    ("error", the exception in one line); a rank that died without saying is missing."""
    spawn = mp.get_context("spawn")
    box = spawn.SimpleQueue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [
            spawn.Process(target=_rank_main, args=(r, world, f"{tmp}/init", collective_s, fn, args, box))
            for r in range(world)
        ]
        for p in procs:
            p.start()
        deadline = time.time() + limit_s
        for p in procs:
            p.join(max(1.0, deadline - time.time()))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    outcomes = {}
    while not box.empty():
        rank, outcome = box.get()
        outcomes[rank] = outcome
    return outcomes
