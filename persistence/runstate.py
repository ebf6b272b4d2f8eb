"""How a training run survives faults and resumes: the machinery around train.py's recipe.

    restore        resume OUT/ckpt.pt (or ckpt.pt.prev when ckpt.pt is unreadable), or branch off --init
    save_epoch     the checkpoint after an epoch (rank 0 writes; every rank's RNG; the log so far)
    rewrite_log    OUT/log.jsonl rebuilt from the checkpoint, so each epoch is logged once
    log_epoch      the epoch's line on the terminal and in log.jsonl
    read_log       the records of a log.jsonl, in order (for the tools that read runs)
    SigtermStop    SIGTERM stops the run at a step boundary; stop_requested makes the ranks agree
    hold_folder    one run per folder: a POSIX lock on OUT/run.lock, its holder named, gone with the process
    hold_for_job   the same under torchrun: rank 0 holds it for the job, every rank stops if it cannot

Checkpoints themselves (what they hold, atomic writes) are persistence/checkpoint.py's. Tests: tests/test_faults.py,
tests/test_train.py.
"""

import fcntl
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import torch
import torch.distributed as dist

from config import Config, config_from_dict, result_changes
from persistence import checkpoint

if TYPE_CHECKING:  # for annotations only: train.py and data.py import this module's callers
    from data import AVDataset
    from train import Parts


def same_injection(state: dict[str, Any], dataset: "AVDataset", path: str | Path, allow: bool = False) -> None:
    """A run resumed or branched off must see the faulty positives its bank was trained with."""
    saved = state["instances"]["injected"]
    if saved is not None and not allow and not torch.equal(saved.cpu(), dataset.injected):
        raise SystemExit(
            f"{path} was trained with other injected faulty positives than this run's (another "
            f"seed, share or data, or an older injection draw: data.INJECTION_STREAM); "
            f"use another --out, or --allow-config-change"
        )


def load_resumable(ckpt_path: Path, rank: int) -> dict[str, Any]:
    """OUT/ckpt.pt, or where it cannot be read (truncated, corrupt), OUT/ckpt.pt.prev: the unreadable
    file is named, moved aside as ckpt.pt.corrupt, and the run goes on from the checkpoint before it."""
    try:
        return checkpoint.load_checkpoint(ckpt_path)
    except checkpoint.CheckpointError as err:
        prev = checkpoint.previous(ckpt_path)
        if not prev.is_file():
            raise SystemExit(
                f"{err}, and there is no earlier checkpoint ({prev}) to fall back to: move it "
                f"aside to start afresh, or use another --out"
            ) from err
        state = checkpoint.load_checkpoint(prev)
        if dist.is_initialized():
            dist.barrier()  # every rank has read it before rank 0 moves the bad file
        if rank == 0:
            aside = ckpt_path.with_name(ckpt_path.name + ".corrupt")
            os.replace(ckpt_path, aside)
            print(
                f"{err}. Moved it aside to {aside}; resuming from the previous checkpoint, {prev} "
                f"(after epoch {state['epoch']})",
                file=sys.stderr,
            )
        return state


def restore(
    cfg: Config, parts: "Parts", ckpt_path: Path, rank: int, dataset: "AVDataset"
) -> tuple[int, list[dict[str, Any]], dict[str, Any] | None]:
    """Resume OUT/ckpt.pt (model, bank, optimizer, RNG, the log's history) or branch off --init (model
    and bank, a fresh optimizer). Returns the first epoch to run, the log records up to it, and how far
    a run stopped mid-epoch got into it (None if it did not)."""
    num_items = len(dataset)
    if ckpt_path.exists():  # rerunning the same command resumes
        state = load_resumable(ckpt_path, rank)
        changed = result_changes(config_from_dict(state["config"], str(ckpt_path)), cfg)
        if changed and not cfg.allow_config_change:
            raise SystemExit(
                f"{ckpt_path} was trained with other settings: "
                + ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in changed.items())
                + ". Use another --out, or --allow-config-change to resume under the new ones."
            )
        same_injection(state, dataset, ckpt_path, cfg.allow_config_change)  # same settings, older draw
        parts.model.load_state_dict(state["model"])
        parts.bank.load_state_dict(state["bank"])
        parts.optimizer.load_state_dict(state["optimizer"])
        if state["scaler"] and parts.scaler.is_enabled():  # empty when saved without fp16 (bf16 or fp32)
            parts.scaler.load_state_dict(state["scaler"])
        checkpoint.set_rng_state(state["rng"][rank] if rank < len(state["rng"]) else state["rng"][0])
        if rank == 0:
            print(f"resuming from {ckpt_path} after epoch {state['epoch']}")
        return state["epoch"] + 1, state["log"], state["partial"]  # partial: where a stopped epoch stopped
    if cfg.init:
        try:
            state = checkpoint.load_checkpoint(cfg.init)
        except (FileNotFoundError, checkpoint.CheckpointError) as err:  # a path the user typed: one line
            raise SystemExit(f"train.py: --init {cfg.init}: {err}") from None
        if state["bank"]["video"].shape[0] != num_items:
            raise SystemExit(
                f"--init {cfg.init}: its memory bank has {state['bank']['video'].shape[0]} slots, "
                f"the training set {num_items} videos; use the same data and manifest"
            )
        same_injection(state, dataset, cfg.init, cfg.allow_config_change)
        parts.model.load_state_dict(state["model"])
        parts.bank.load_state_dict(state["bank"])
    return 0, [], None


def stop_requested(stop: dict[str, bool], i: int, device: torch.device) -> bool:
    """Whether the run stops after step i: on SIGTERM, at once in one process; under DDP every 10th
    step, where the ranks agree on it (and sync anyway)."""
    if not dist.is_initialized():
        return stop["requested"]
    if i % 10:
        return False
    flag = torch.tensor(float(stop["requested"]), device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


class SigtermStop:
    """SIGTERM (torchrun, SLURM, a cloud's preemption) asks the run to stop at the next step boundary:
    `with SigtermStop() as stop:` sets stop["requested"]; the previous handler is restored on exit.
    Outside the main thread (a test calling main) no handler can be set, and nothing is."""

    def __enter__(self) -> dict[str, bool]:
        self.stop = {"requested": False}
        self.previous = (
            signal.signal(signal.SIGTERM, lambda *_: self.stop.update(requested=True))
            if (threading.current_thread() is threading.main_thread())
            else None
        )
        return self.stop

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


def exit_stopped(out: Path, epoch: int, stopped: dict[str, Any] | None, master_process: bool) -> NoReturn:
    """After the checkpoint of a stopped run: say where it stopped and exit with 128 + SIGTERM."""
    where = f"after step {stopped['steps']} of epoch {epoch}" if stopped else f"after epoch {epoch}"
    if master_process:
        print(
            f"train.py: stopped by SIGTERM {where}; {out / 'ckpt.pt'} holds it, and the same "
            f"command resumes from there",
            file=sys.stderr,
        )
    raise SystemExit(128 + signal.SIGTERM)


def save_epoch(
    parts: "Parts",
    raw_model: torch.nn.Module,
    cfg: Config,
    dataset: "AVDataset",
    epoch: int,
    steps: int,
    ckpt_path: Path,
    ddp: bool,
    world: int,
    master_process: bool,
    history: list[dict[str, Any]],
    partial: dict[str, Any] | None = None,
) -> None:
    """Checkpoint after an epoch: rank 0 writes the unwrapped model, every rank's RNG state, and the
    log records so far (the log file is rewritten from them on resume). After a stop mid-epoch,
    `epoch` is the last whole one and `partial` says how far the next one got."""
    rngs = [checkpoint.rng_state()]
    if ddp:
        # DDP broadcasts BatchNorm statistics before each forward, so after the last one each rank
        # holds its own; take rank 0's so that every replica equals the checkpoint.
        for buf in raw_model.buffers():
            dist.broadcast(buf, src=0)
        rngs = [None] * world
        dist.all_gather_object(rngs, checkpoint.rng_state())
    if master_process:
        checkpoint.save_checkpoint(
            ckpt_path,
            model_args=checkpoint.model_args(cfg),
            clip=asdict(dataset.spec),
            config=asdict(cfg),
            model=raw_model.state_dict(),
            bank=parts.bank.state_dict(),
            instances=checkpoint.instances_of(dataset),
            optimizer=parts.optimizer.state_dict(),
            scaler=parts.scaler.state_dict(),
            epoch=epoch,
            step=(epoch + 1) * steps,
            rng=rngs,
            log=history,
            partial=partial,
        )
    if ddp:
        dist.barrier()  # no rank starts the next epoch before the checkpoint is written


def rewrite_log(history: list[dict[str, Any]], out: Path, start_epoch: int) -> list[dict[str, Any]]:
    """OUT/log.jsonl as the checkpoint knows it: a run killed after its log line and before its
    checkpoint, or after the checkpoint and before the log line, resumes with each epoch once."""
    tmp = out / "log.jsonl.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in history))
    os.replace(tmp, out / "log.jsonl")
    return history


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """The records of a train.py log.jsonl (a dict per epoch, in order)."""
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def log_epoch(record: dict[str, Any], out: Path) -> None:
    print(
        "epoch {epoch:3d} | {stage:8s} | loss {loss:.4f} | w {weight:.3f} | mu {mu:.3f} sigma {sigma:.3f} "
        "| soft {soft_mass:.3f} | {clips_per_s:.0f} clips/s | auroc {auroc} | 1-nn {knn_class:.2f} "
        "xmodal {xmodal_class:.2f}{bad}".format(
            **record,
            auroc="-" if record["faulty_auroc"] is None else f"{record['faulty_auroc']:.3f}",
            bad=f" | skipped {record['skipped']} items, {record['excluded']} slots out" if record["excluded"] else "",
        )
    )
    with open(out / "log.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")


# ----------------------------------------------------------------------------- one run per folder

LOCK_NAME = "run.lock"


class FolderHeld(RuntimeError):
    """Another live process holds the run folder; the message names it and its holder."""


_HELD = {}  # lock file -> holder text, for this process: a POSIX lock does not tell a process from itself


def _holder(text: str) -> str:
    try:
        h = json.loads(text or "{}")
        return f"{h['who']} on host {h['host']}, pid {h['pid']}, started {h['started']}"
    except (ValueError, KeyError):  # it holds the lock but has not written its name yet
        return "a run that is just starting"


@contextmanager
def hold_folder(out: Path, who: str = "train.py") -> Iterator[None]:
    """Hold OUT for as long as the block runs: two runs on one folder would interleave its log and race
    on its checkpoint's temporary file. The lock is the kernel's POSIX record lock on OUT/run.lock
    (fcntl.lockf, also honoured over NFS): it belongs to this process alone, not to the loader workers
    it forks, and goes with it however it ends (kill -9, a crash, a power cut), so a dead run never
    blocks the next, which resumes. The file keeps who holds, or last held, the folder (host, pid,
    start time); it is left in place, since removing a lock file races with the next holder opening it."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = (out / LOCK_NAME).resolve()
    if path in _HELD:  # this process already holds it; opening and closing the file again would release it
        raise FolderHeld(f"the run folder {out} is in use by {_HELD[path]} (this process). Choose another --out")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # EACCES or EAGAIN: another process holds it
        holder = _holder(os.read(fd, 4096).decode(errors="replace"))
        os.close(fd)  # this process holds no lock on it, so closing releases nothing
        raise FolderHeld(
            f"the run folder {out} is in use by {holder}. Wait for it to end (the same command "
            f"then resumes), stop it, or choose another --out"
        ) from None
    text = json.dumps(
        {"who": who, "host": socket.gethostname(), "pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    )
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode(), 0)
    _HELD[path] = _holder(text)
    try:
        yield path
    finally:
        del _HELD[path]
        os.close(fd)  # releases the lock


@contextmanager
def hold_for_job(out: Path, master_process: bool, who: str = "train.py") -> Iterator[None]:
    """hold_folder for a job of one or many processes: rank 0 holds OUT (only it writes there), and
    tells every rank whether it could, so that all stop together instead of waiting in a collective."""
    with ExitStack() as stack:
        err = None
        if master_process:
            try:
                stack.enter_context(hold_folder(out, who))
            except FolderHeld as e:
                err = str(e)
        if dist.is_initialized():
            box = [err]
            dist.broadcast_object_list(box, src=0)
            err = box[0]
        if err:
            raise SystemExit(f"{who}: {err}")
        yield
