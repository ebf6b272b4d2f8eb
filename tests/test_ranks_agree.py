"""What every rank of a torchrun job must decide together, on 2 gloo processes (conftest.on_ranks): the exit on a
non-finite loss that one rank alone sees, the exit on a checkpoint that rank 0 cannot write, the
--preload path chosen by rank 0's view of the memory, and where a killed job resumes. A rank left behind would
wait in a collective the others never reach (a hang under NCCL), or train alone."""

import math

import torch

import checkpoint
import train
from config import Config, parse_config
from conftest import on_ranks
from media import in_memory
from test_train import TINY, log

CPU = torch.device("cpu")


def tiny_run(rank, tiny_data, out, *more):
    """train.py's run on this rank of the group on_ranks made (train.main's, less the folder lock)."""
    argv = ["--preset", "demo", "--data", str(tiny_data), "--out", str(out), *map(str, more), *TINY, "--workers", "0"]
    return train.run(parse_config(argv), True, rank, 2, CPU)


def nan_on_rank_1(rank, tiny_data, out):
    real = train.train_step

    def step(*args):
        loss, stats = real(*args)
        return (loss * math.nan if rank == 1 else loss), stats

    train.train_step = step
    tiny_run(rank, tiny_data, out, "--warmup-epochs", "1", "--epochs", "0")


def test_a_non_finite_loss_on_one_rank_stops_every_rank_at_the_same_step(tiny_data, tmp_path):
    got = on_ranks(nan_on_rank_1, tiny_data, tmp_path)
    assert {r: how for r, (how, _) in got.items()} == {0: "exit", 1: "exit"}, got
    assert all("at or before step 0 (epoch 0)" in what for _, what in got.values()), got


def unwritable_checkpoint(rank, tiny_data, out):
    def full_disk(path, **state):
        raise checkpoint.CheckpointError(f"could not write the checkpoint {path}: the disk is full")

    checkpoint.save_checkpoint = full_disk  # called on rank 0 alone
    tiny_run(rank, tiny_data, out, "--warmup-epochs", "2", "--epochs", "0")


def test_a_checkpoint_rank_0_cannot_write_stops_every_rank_after_the_same_epoch(tiny_data, tmp_path):
    got = on_ranks(unwritable_checkpoint, tiny_data, tmp_path)
    assert {r: how for r, (how, _) in got.items()} == {0: "exit", 1: "exit"}, got
    assert all(what.startswith("train.py, after epoch 0: could not write") for _, what in got.values()), got


def preload_answer(rank, out):
    # each rank's own view of the memory would answer differently
    in_memory.choose = lambda *args: "on" if rank == 0 else "off"
    return in_memory.preload_path(Config(preload="auto", out=str(out)), [], None, CPU)


def test_every_rank_takes_the_preload_path_rank_0_chose(tmp_path):
    assert on_ranks(preload_answer, tmp_path) == {0: ("returned", "on"), 1: ("returned", "on")}


def killed_run(rank, tiny_data, out, kill_after):
    """A 2-rank run killed on every rank just after epoch `kill_after`'s checkpoint (None: run to the end). -> (the
    epochs this rank trained, the epochs of the log records it holds at its last epoch's end, its exit)."""
    real_end, trained, held = checkpoint.Run.end_epoch, [], []

    def end_epoch(self, epoch, record):
        trained.append(epoch)
        real_end(self, epoch, record)
        held[:] = [r["epoch"] for r in self.history]
        if epoch == kill_after:  # as a kill of the job between two epochs would
            raise SystemExit("killed")

    checkpoint.Run.end_epoch = end_epoch
    try:
        tiny_run(rank, tiny_data, out, "--warmup-epochs", "2", "--epochs", "2", "--loss", "weighted")
    except SystemExit as stop:
        return trained, held, stop.code
    return trained, held, 0


def test_a_killed_job_resumes_on_every_rank_after_the_same_whole_epoch_with_the_same_records(tiny_data, tmp_path):
    first = on_ranks(killed_run, tiny_data, tmp_path, 1)
    assert first[0] == first[1] == ("returned", ([0, 1], [0, 1], "killed")), first
    resumed = on_ranks(killed_run, tiny_data, tmp_path, None)
    assert resumed[0] == resumed[1] == ("returned", ([2, 3], [0, 1, 2, 3], 0)), resumed
    assert [r["epoch"] for r in log(tmp_path)] == [0, 1, 2, 3]
