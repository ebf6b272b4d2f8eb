"""How a training run survives faults and resumes: the machinery around train.py's recipe.

    Run            the run management around train.py's loop, one object: restore, the epochs left,
                   and at each epoch's end the checkpoint, the log line and a stop
      .restore     resume OUT/ckpt.pt (or ckpt.pt.prev when ckpt.pt is unreadable)
      .save        the checkpoint after an epoch (rank 0 writes; every rank's RNG; the log so far)
      .stop_requested   whether SIGTERM asked for a stop; under DDP the ranks agree on it
    refuse_other_settings  a resume under settings that change what OUT/ckpt.pt trained: one line, before the data
    rewrite_log    OUT/log.jsonl rebuilt from the checkpoint, so each epoch is logged once
    log_epoch      the epoch's line on the terminal and in log.jsonl
    read_log       the records of a log.jsonl, in order (for the tools that read runs)
    branch_state   the model and bank a second stage starts from (--init), checked against this run's data
    SigtermStop    SIGTERM stops the run at a step boundary
    hold_folder, hold_for_job, held_by   one run per folder: persistence/folder_lock.py's, re-exported here

Checkpoints themselves (what they hold, atomic writes) are persistence/checkpoint.py's. Tests: tests/test_faults.py,
tests/test_train.py, tests/test_resume.py.
"""

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn, Protocol

import torch
import torch.distributed as dist

from config import Config, absolute_paths, config_from_dict, result_changes
from machinery.devices import any_rank
from machinery.tally import duration
from media import in_memory
from persistence import checkpoint
from persistence.folder_lock import FolderHeld, held_by, hold_folder, hold_for_job  # noqa: F401  (re-exported)


def same_injection(state: dict[str, Any], injected: torch.Tensor, path: str | Path, allow: bool = False) -> None:
    """A run resumed or branched off must see the faulty positives its bank was trained with."""
    saved = state["instances"]["injected"]
    if saved is not None and not allow and not torch.equal(saved.cpu(), injected):
        raise SystemExit(
            f"train.py: {path} was trained with other injected faulty positives than this run's (another "
            f"seed, share or data, or an older injection draw: data.INJECTION_STREAM); "
            f"use another --out, or --allow-config-change"
        )


def other_settings(state: dict[str, Any], cfg: Config, path: str | Path) -> str | None:
    """Why a checkpoint cannot resume under cfg (the settings its trained epochs read differ: another lam does
    not stop a warm-up, a longer --warmup-epochs extends one), or None."""
    trained = state["epoch"] + 1 + bool(state.get("partial"))  # a stopped epoch has begun
    changed = result_changes(config_from_dict(state["config"], str(path)), cfg, trained)
    if not changed:
        return None
    return (
        f"train.py: {path} was trained with other settings: "
        + ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in changed.items())
        + ". Use another --out, or --allow-config-change to resume under the new ones."
    )


def refuse_other_settings(cfg: Config) -> None:
    """other_settings of OUT/ckpt.pt, before the data is read: one line and exit. An unreadable checkpoint is
    left to Run.restore, which falls back to the one before it."""
    ckpt = Path(cfg.out) / "ckpt.pt"
    if cfg.allow_config_change or not ckpt.is_file():
        return
    try:  # mmap: the tensors stay on disk
        state = torch.load(ckpt, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001 -- truncated or corrupt: Run.restore names it
        return
    if refusal := other_settings(state, cfg, ckpt):
        raise SystemExit(refusal)


def load_resumable(ckpt_path: Path, rank: int) -> dict[str, Any]:
    """OUT/ckpt.pt, or where it cannot be read (truncated, corrupt), OUT/ckpt.pt.prev: the unreadable
    file is named, moved aside as ckpt.pt.corrupt, and the run goes on from the checkpoint before it."""
    try:
        return checkpoint.load_checkpoint(ckpt_path)
    except checkpoint.CheckpointError as err:
        prev = checkpoint.previous(ckpt_path)
        if not prev.is_file():
            raise SystemExit(
                f"train.py: {err}, and there is no earlier checkpoint ({prev}) to fall back to: move it "
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


def branch_state(init: str, instances: dict[str, Any], allow: bool = False) -> dict[str, Any]:
    """The model and bank of the checkpoint a second stage branches off (--init): refused if its bank
    was trained on another training set or other injected faulty positives."""
    try:
        state = checkpoint.load_checkpoint(init)
    except (FileNotFoundError, checkpoint.CheckpointError) as err:  # a path the user typed: one line
        raise SystemExit(f"train.py: --init {init}: {err}") from None
    slots, num_items = state["bank"]["video"].shape[0], len(instances["paths"])
    if slots != num_items:
        raise SystemExit(
            f"train.py: --init {init}: its memory bank has {slots} slots, "
            f"the training set {num_items} videos; use the same data and manifest"
        )
    same_injection(state, instances["injected"], init, allow)
    return {"model": state["model"], "bank": state["bank"]}


def preload_path(cfg: Config, records: list, spec: Any, device: torch.device) -> str:
    """--preload as this run applies it (data.build_train_set): on or off as given; auto, the path taken by the
    checkpoint a resume restores (load_resumable's: OUT/ckpt.pt, or OUT/ckpt.pt.prev where ckpt.pt cannot be
    read), which a resume keeps, as config.NOT_RESUMABLE asks, whatever memory is free now; else rank 0's
    answer for the memory it sees, on every rank (each reading its own while the others preload could split them)."""
    if cfg.preload != "auto":
        return in_memory.choose(cfg.preload, records, spec, device)
    saved, ckpt = None, Path(cfg.out) / "ckpt.pt"
    for path in (ckpt, checkpoint.previous(ckpt)) if ckpt.exists() else ():
        try:  # read as the restore reads it, its tensors left on disk: the config is all this needs
            saved = checkpoint.load_checkpoint(path, mmap=True)["config"].get("preload")
            break
        except checkpoint.CheckpointError:  # unreadable: the restore falls back to the one before it
            continue
        except (OSError, ValueError):  # no checkpoint before it, or not one of train.py's: the restore says so
            break
    saved = {True: "on", False: "off"}.get(saved, saved)
    if saved in ("on", "off"):
        return saved
    rank0 = not dist.is_initialized() or dist.get_rank() == 0
    choice = [in_memory.choose("auto", records, spec, device) if rank0 else None]
    if dist.is_initialized():
        dist.broadcast_object_list(choice, src=0)
    return choice[0]


class Trainable(Protocol):
    """What a run saves and restores (train.Parts): the model, bank, optimizer and scaler as one state."""

    def state_dict(self) -> dict[str, Any]: ...  # {"model", "bank", "optimizer", "scaler"}

    def load_state_dict(self, state: dict[str, Any]) -> None: ...  # also {"model", "bank"} alone

    def buffers(self) -> Iterator[torch.Tensor]: ...  # the unwrapped model's


class Run:
    """Run management around train.py's loop, in one object. Entering it restores the state (resumes
    OUT/ckpt.pt if there is one), rewrites the log to match, and lets SIGTERM ask for a stop;
    `epochs()` yields the epochs left, each with how far a stopped run got into it; `end_epoch`
    checkpoints, logs, and exits if a stop was asked for:

        with runstate.Run(cfg, parts, dataset.instances(), clip, steps, rank, device) as run:
            for epoch, resume in run.epochs():
                record, stopped = train_epoch(..., run.stop_requested, resume)
                run.end_epoch(epoch, record, stopped)

    `instances` and `clip` are the training set's facts the checkpoint keeps (persistence/checkpoint.py)."""

    def __init__(
        self,
        cfg: Config,
        parts: Trainable,
        instances: dict[str, Any],
        clip: dict[str, Any],
        steps_per_epoch: int,
        rank: int,
        device: torch.device,
        on_epoch: Callable[[int], None] | None = None,
    ) -> None:
        self.cfg, self.parts, self.instances, self.clip = cfg, parts, instances, clip
        self.steps, self.rank, self.device, self.on_epoch = steps_per_epoch, rank, device, on_epoch
        self.out = Path(cfg.out)
        self.ckpt = self.out / "ckpt.pt"
        self.master = rank == 0

    def __enter__(self) -> "Run":
        self.start, history, self.resume = self.restore()
        # every rank holds the run's records (each restored the same checkpoint): --soft-guard's stage is read
        # from them (train.stage_at), and a rank without them would train another objective after a resume
        self.history = rewrite_log(history, self.out, self.start) if self.master else history
        self.sigterm = SigtermStop()  # SIGTERM stops the run at a step boundary, resumably
        self.stop = self.sigterm.__enter__()
        self.began, self.timed = time.monotonic(), 0  # this process's epochs: the time per epoch and left
        return self

    def __exit__(self, *exc: object) -> None:
        self.sigterm.__exit__(*exc)

    def epochs(self) -> Iterator[tuple[int, dict[str, Any] | None]]:
        """(epoch, how far a stopped run got into it, or None) for each epoch left to train."""
        for epoch in range(self.start, self.cfg.warmup_epochs + self.cfg.epochs):
            resume, self.resume = self.resume, None  # only the first epoch resumes mid-way
            yield epoch, resume

    def end_epoch(self, epoch: int, record: dict[str, Any] | None, stopped: dict[str, Any] | None) -> None:
        """After an epoch, or a part of one that a stop ended (`stopped`: how far it got): checkpoint
        (and keep it as OUT/ckpt_epochNNNN.pt after every --save-every'th), then log the epoch's record
        (rank 0; on_epoch), then exit if a stop was asked for."""
        if record is not None:
            if dist.is_initialized():  # rank 0's, the one logged, on every rank (each timed its own epoch)
                box = [record]
                dist.broadcast_object_list(box, src=0)
                record = box[0]
            self.history.append(record)
        every = self.cfg.save_every
        keep = record is not None and bool(every) and (epoch + 1) % every == 0
        try:  # the checkpoint first: the log never holds an epoch that the checkpoint does not
            self.save(epoch if record else epoch - 1, partial=stopped, keep=keep)
        except checkpoint.CheckpointError as err:  # raised on every rank together (save)
            raise SystemExit(f"train.py, after epoch {epoch}: {err}") from err
        if self.master and record is not None:
            self.timed += 1
            per = (time.monotonic() - self.began) / self.timed
            left = per * (self.cfg.warmup_epochs + self.cfg.epochs - epoch - 1)
            log_epoch(record, self.out, f" | {per:.1f} s/epoch, {duration(left)} left")
            if self.on_epoch is not None:
                self.on_epoch(epoch)
        if stopped or self.stop_requested(0):
            exit_stopped(self.out, epoch, stopped, self.master)

    def restore(self) -> tuple[int, list[dict[str, Any]], dict[str, Any] | None]:
        """Resume OUT/ckpt.pt if there is one (model, bank, optimizer, RNG, the log's history). Returns
        the first epoch to run, the log records up to it, and how far a run stopped mid-epoch got into
        it (None if it did not). Whether it resumed: `self.resumed`."""
        cfg, ckpt_path, injected = self.cfg, self.ckpt, self.instances["injected"]
        self.resumed = ckpt_path.exists()
        if self.resumed:  # rerunning the same command resumes
            state = load_resumable(ckpt_path, self.rank)
            if (refusal := other_settings(state, cfg, ckpt_path)) and not cfg.allow_config_change:
                raise SystemExit(refusal)
            same_injection(state, injected, ckpt_path, cfg.allow_config_change)  # same settings, older draw
            # the scaler's state is empty when saved without fp16 (bf16 or fp32): load_state_dict skips it
            self.parts.load_state_dict({k: state[k] for k in ("model", "bank", "optimizer", "scaler")})
            rngs = state["rng"]
            checkpoint.set_rng_state(rngs[self.rank] if self.rank < len(rngs) else rngs[0])
            total = cfg.warmup_epochs + cfg.epochs
            if self.master and state["epoch"] + 1 >= total and not state["partial"]:
                print(f"train.py: {self.out} has finished: all {total} epochs are in {ckpt_path}; nothing to train")
            elif self.master:
                print(f"resuming from {ckpt_path} after epoch {state['epoch']}")
            return state["epoch"] + 1, state["log"], state["partial"]  # partial: where a stopped epoch stopped
        return 0, [], None

    def save(self, epoch: int, partial: dict[str, Any] | None = None, keep: bool = False) -> None:
        """Checkpoint after an epoch: rank 0 writes the unwrapped model, every rank's RNG state, and the
        log records so far (the log file is rewritten from them on resume), and with `keep` a copy named
        for the epoch (--save-every). After a stop mid-epoch, `epoch` is the last whole one and `partial`
        says how far the next one got. A write that fails raises CheckpointError on every rank."""
        rngs = [checkpoint.rng_state()]
        if dist.is_initialized():
            # DDP broadcasts BatchNorm statistics before each forward, so after the last one each rank
            # holds its own; take rank 0's so that every replica equals the checkpoint.
            for buf in self.parts.buffers():
                dist.broadcast(buf, src=0)
            rngs = [None] * dist.get_world_size()
            dist.all_gather_object(rngs, checkpoint.rng_state())
        failed = None
        if self.master:
            try:
                checkpoint.save_checkpoint(
                    self.ckpt,
                    model_args=checkpoint.model_args(self.cfg),
                    clip=self.clip,
                    config=absolute_paths(asdict(self.cfg)),  # the data wherever the checkpoint is read from
                    **self.parts.state_dict(),
                    instances=self.instances,
                    epoch=epoch,
                    step=(epoch + 1) * self.steps,
                    rng=rngs,
                    log=self.history,
                    partial=partial,
                )
                if keep:
                    checkpoint.keep_as(self.ckpt, self.out / checkpoint.kept_name(epoch))
            except (checkpoint.CheckpointError, OSError) as err:
                failed = str(err)
        if dist.is_initialized():
            # in place of a barrier (no rank starts the next epoch before the checkpoint is written), rank 0
            # says whether it was: a failure raised on rank 0 alone would let its way out (end_distributed's
            # barrier) pair with this one, and the others train on into a collective rank 0 never reaches
            box = [failed]
            dist.broadcast_object_list(box, src=0)
            failed = box[0]
        if failed:
            raise checkpoint.CheckpointError(failed)

    def stop_requested(self, i: int) -> bool:
        """Whether the run stops after step i: on SIGTERM, at once in one process; under DDP every 10th
        step, where the ranks agree on it (and sync anyway)."""
        if dist.is_initialized() and i % 10:
            return False
        return any_rank(self.stop["requested"], self.device)


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


def log_epoch(record: dict[str, Any], out: Path, timing: str = "") -> None:
    """The epoch's line (its columns: TOUR.md, step 7), then its record in OUT/log.jsonl; `timing`, the
    time per epoch and the time left, is only shown."""
    print(
        "epoch {epoch:3d} | {stage:8s} | loss {loss:.4f} | w {weight:.3f} | mu {mu:.3f} sigma {sigma:.3f} "
        "| soft {soft_mass:.3f} | {clips_per_s:.0f} clips/s{wait} | auroc {auroc} | 1-nn {knn_class:.2f} "
        "xmodal {xmodal_class:.2f}{agree}{bad}{timing}".format(
            **record,
            wait=f", {record['data_wait']:.0%} waiting for data" if "data_wait" in record else "",
            agree=f" | agree {record['agreement']:.3f}" if record.get("agreement") is not None else "",
            auroc="-" if record["faulty_auroc"] is None else f"{record['faulty_auroc']:.3f}",
            bad=f" | skipped {record['skipped']} items, {record['excluded']} slots out" if record["excluded"] else "",
            timing=timing,
        )
    )
    with open(out / "log.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
