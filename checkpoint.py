"""Checkpoints, resuming and the run folder: how a train.py run survives faults.

A checkpoint describes itself, as nanoGPT's does: `format`, `model_args` (AVModel(**model_args)), `clip`
(augment.ClipSpec's fields), `config`, `model`, `bank`, `instances` (per slot: path, label, faulty, injected, its
audio's file; the classes), `optimizer`, `scaler`, `epoch`, `step`, `rng`, `log`. Written atomically (the one before
kept as ckpt.pt.prev), it resumes after the last whole epoch (Run), and stops in one line under settings that change
what its epochs computed (result_changes). One run per folder: a POSIX lock on OUT/run.lock.
Tests: tests/test_faults.py, tests/test_resume.py, tests/test_run_folder.py
"""

import errno
import fcntl
import io
import json
import os
import random
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from config import Config
from losses import VARIANTS

CHECKPOINT_FORMAT = 4  # 4: no bank `valid` buffer (a file that fails stops the run: data.py)


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be written or read; the message names the file and what to do."""


def model_args(cfg: Config) -> dict[str, Any]:
    return {"video_depth": cfg.video_depth, "width": cfg.width}


def previous(path: str | Path) -> Path:
    return Path(f"{path}.prev")


def save_checkpoint(path: str | Path, **state: Any) -> None:
    """torch.save to PATH.tmp, fsync, keep PATH as PATH.prev, rename PATH.tmp onto PATH. A failed write (a full
    disk, no permission) removes PATH.tmp, leaves PATH as it was and raises CheckpointError naming the file."""
    path, tmp = Path(path), Path(f"{path}.tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save({"format": CHECKPOINT_FORMAT, **state}, f)
            f.flush()
            os.fsync(f.fileno())
    except (OSError, RuntimeError) as err:  # torch reports a short write as RuntimeError
        tmp.unlink(missing_ok=True)
        free = shutil.disk_usage(path.parent).free / 2**20
        why = "the disk is full" if getattr(err, "errno", None) == errno.ENOSPC or free < 1 else err
        why = "no permission to write there" if isinstance(err, PermissionError) else why
        raise CheckpointError(
            f"could not write the checkpoint {path}: {why} ({free:.1f} MiB free on its filesystem). The last good "
            f"checkpoint, if any, is unchanged; free space or choose another --out, then rerun the same command"
        ) from err
    if path.exists():
        keep_as(path, previous(path))
    os.replace(tmp, path)


def keep_as(path: str | Path, kept: str | Path) -> None:
    """KEPT becomes the checkpoint PATH is now, whole or not at all: a hard link (PATH's next save renames a new
    file onto PATH and leaves this one), or a copy where links are not possible, renamed into place."""
    link = Path(f"{kept}.tmp")
    link.unlink(missing_ok=True)
    try:
        os.link(path, link)
    except OSError:
        shutil.copyfile(path, link)
    os.replace(link, kept)


def load_checkpoint(path: str | Path, raw: bytes | None = None, mmap: bool = False) -> dict[str, Any]:
    """The checkpoint's dict (from `raw`, its bytes, when read already). A truncated or corrupt file, or one of
    another format, raises CheckpointError naming it."""
    path = Path(path)
    if raw is None and not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        source = io.BytesIO(raw) if raw is not None else path
        state = torch.load(source, map_location="cpu", weights_only=True, mmap=mmap and raw is None)
    except Exception as err:
        first = str(err).splitlines()[0][:120]
        raise CheckpointError(
            f"the checkpoint {path} cannot be read ({type(err).__name__}: {first}): it is truncated or corrupt"
        ) from err
    if "config" not in state or "model" not in state:
        raise ValueError(f"{path} is not a train.py checkpoint (it has no config or model)")
    if state.get("format") == 3 and bool(state.get("bank", {}).get("valid", torch.ones(1)).all()):
        state["bank"].pop("valid", None)  # format 3 differs by the bank's `valid` alone, all True where no file failed
        state["format"] = CHECKPOINT_FORMAT
    if state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"the checkpoint {path} has format {state.get('format', 1)}, this train.py reads format "
            f"{CHECKPOINT_FORMAT}: an older version wrote it; retrain it, or read it with the commit that wrote it"
        )
    return state


PATHS = ("data", "annotations", "manifest", "faulty_pool")  # the dataset's files, as --data etc. name them
GONE = {"max_bad_fraction", "pin_workers"}  # engineering options retired at any value; why, as for RETIRED:
RETIRED = {"head": "mlp", "lr_ramp": 0, "bank_init": "random", "soft_guard": False}  # why: lab/results/HISTORY.md


def config_from_dict(saved: dict[str, Any], source: str = "checkpoint") -> Config:
    """A Config from a checkpoint's dict: newer fields take their defaults, a retired option at its only value
    is dropped, any other unknown field is an error naming it."""
    saved = {k: v for k, v in saved.items() if not (k in RETIRED and v == RETIRED[k]) and k not in GONE}
    if isinstance(saved.get("preload"), bool):  # written when preload was a switch
        saved["preload"] = "on" if saved["preload"] else "off"
    if unknown := sorted(set(saved) - {f.name for f in fields(Config)}):
        raise ValueError(f"{source}: unknown settings {unknown}; it was written by another version of train.py")
    return Config(**saved)


def absolute_paths(values: dict[str, Any]) -> dict[str, Any]:
    """A Config's dict with its dataset paths resolved: a checkpoint names its data wherever it is read from."""
    return values | {k: str(Path(values[k]).resolve()) for k in PATHS if values.get(k)}


# What a resume may change: where and whether the run goes on (out, init: read only without a checkpoint, ...),
# the loader (each item's draws are seeded by seed, epoch and index) and the device. Not preload (a preloaded
# clip's audio is cut from a whole-file decode, AAC's restart after a seek changes the samples) nor amp (rounding).
NOT_RESUMABLE = {"preload", "amp"}
ENGINEERING = {f.name for f in fields(Config) if f.metadata["group"] == "engineering"} - NOT_RESUMABLE | {"manifest"}
# What only the second stage reads (the warm-up is xID at a constant rate), and of it what only soft targets or
# eq. (6)'s weights read (losses.VARIANTS)
SOFT_ONLY, WEIGHTS_ONLY = {"soft_targets", "tau_s", "tau_t", "lam"}, {"kappa", "w_min", "delta"}
SECOND_STAGE = {"loss", "epochs", "lr_min"} | SOFT_ONLY | WEIGHTS_ONLY


def unread(cfg: Config, trained: int) -> set[str]:
    """The fields the first `trained` epochs of a run under cfg never read."""
    variant = VARIANTS[cfg.loss]
    stage = (set() if variant.soft else SOFT_ONLY) | (set() if variant.weights == "scores" else WEIGHTS_ONLY)
    return SECOND_STAGE if trained <= cfg.warmup_epochs else stage


def result_changes(old: Config, new: Config, trained: int | None = None) -> dict[str, tuple[Any, Any]]:
    """{field: (old, new)} of the non-ENGINEERING fields that differ; given the epochs a checkpoint of `old` has
    trained, only those its epochs read under both (another lam leaves a warm-up alone, a longer one extends it)."""
    a, b = absolute_paths(asdict(old)), absolute_paths(asdict(new))
    changed = {k: (a[k], b[k]) for k in a if k not in ENGINEERING and a[k] != b[k]}
    if trained is not None:
        same = unread(old, trained) & unread(new, trained)
        same |= {"warmup_epochs"} if trained <= min(old.warmup_epochs, new.warmup_epochs) else set()
        changed = {k: v for k, v in changed.items() if k not in same}
    return changed


def other_settings(state: dict[str, Any], cfg: Config, path: str | Path) -> str | None:
    """Why a checkpoint cannot resume under cfg (its trained epochs read other settings), or None."""
    if not (changed := result_changes(config_from_dict(state["config"], str(path)), cfg, state["epoch"] + 1)):
        return None
    words = ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in changed.items())
    return f"train.py: {path} was trained with other settings: {words}. Use another --out, or --allow-config-change"


def refuse_other_settings(cfg: Config) -> None:
    """other_settings of OUT/ckpt.pt before the data is read (its tensors left on disk); an unreadable file is left
    to Run, which falls back to the one before it."""
    ckpt = Path(cfg.out) / "ckpt.pt"
    if cfg.allow_config_change or not ckpt.is_file():
        return
    try:
        state = torch.load(ckpt, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001
        return
    refuse_partial(state, ckpt)
    try:
        refusal = other_settings(state, cfg, ckpt)
    except ValueError as err:  # a setting this version does not know (a retired option at another value)
        raise SystemExit(f"train.py: {err}") from None
    if refusal:
        raise SystemExit(refusal)


def refuse_partial(state: dict[str, Any], path: str | Path) -> None:
    """An older train.py's stop inside an epoch: mid-epoch weights under the epoch before's count."""
    if state.get("partial"):
        raise SystemExit(
            f"train.py: {path} was stopped inside an epoch by an older train.py; {previous(path)} holds the whole "
            f"epoch before it: move it onto {path} to resume from there, or retrain"
        )


def injection(c: Config) -> str:
    seed = c.seed if c.fault_seed < 0 else c.fault_seed
    return f"--faulty-fraction {c.faulty_fraction:g} --faulty-source {c.faulty_source}, injection seed {seed}"


def same_injection(
    state: dict[str, Any], injected: torch.Tensor, path: str | Path, allow: bool = False, cfg: Config | None = None
) -> None:
    """A run resumed or branched off must see the faulty positives its bank was trained with."""
    saved = state["instances"]["injected"]
    if saved is None or allow or torch.equal(saved.cpu(), injected):
        return
    theirs, mine = (injection(config_from_dict(state["config"])), injection(cfg)) if cfg else ("?", "?")
    said = f"its {theirs}, this run's {mine}" if theirs != mine else "the same settings: other data or an older draw"
    raise SystemExit(
        f"train.py: {path} was trained with other injected faulty positives ({said}). Give its values (--fault-seed "
        f"keeps its faults under another --seed) or another --out; --allow-config-change would train on faults its "
        f"bank never saw, a mismatched experiment"
    )


def branch_state(
    init: str, instances: dict[str, Any], allow: bool = False, cfg: Config | None = None
) -> dict[str, Any]:
    """The model and bank a second stage starts from (--init), refused for another training set or other faults."""
    try:
        state = load_checkpoint(init)
    except (FileNotFoundError, CheckpointError) as err:  # a path the user typed: one line
        raise SystemExit(f"train.py: --init {init}: {err}") from None
    refuse_partial(state, init)
    slots, num_items = state["bank"]["video"].shape[0], len(instances["paths"])
    if slots != num_items:
        raise SystemExit(
            f"train.py: --init {init}: its memory bank has {slots} slots, the training set {num_items} videos; "
            f"use the same data and manifest"
        )
    same_injection(state, instances["injected"], f"--init {init}", allow, cfg)
    return {"model": state["model"], "bank": state["bank"]}


def rng_state() -> dict[str, Any]:
    cuda = {"cuda": torch.cuda.get_rng_state_all()} if torch.cuda.is_available() else {}
    return {"torch": torch.get_rng_state(), "python": random.getstate(), **cuda}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class Run:
    """Around train.py's loop: made, it resumes OUT/ckpt.pt on every rank (`start`, `history`); end_epoch(epoch,
    record) checkpoints (rank 0 writes), then logs. `parts`: train.Parts. A killed run loses the epoch it was in."""

    def __init__(self, cfg: Config, parts: Any, instances: dict, clip: dict, steps: int, rank: int) -> None:
        self.cfg, self.parts, self.instances, self.clip, self.steps = cfg, parts, instances, clip, steps
        self.master = rank == 0
        self.out, self.ckpt = Path(cfg.out), Path(cfg.out) / "ckpt.pt"
        self.resumed = self.ckpt.exists()
        self.start, self.history = self.restore(rank) if self.resumed else (0, [])
        # the log as the checkpoint knows it (a kill between the two counts an epoch once); none for a fresh run
        if self.master and (self.history or (self.out / "log.jsonl").exists()):
            (self.out / "log.jsonl.tmp").write_text("".join(json.dumps(r) + "\n" for r in self.history))
            os.replace(self.out / "log.jsonl.tmp", self.out / "log.jsonl")
        self.began, self.timed = time.monotonic(), 0

    def restore(self, rank: int) -> tuple[int, list[dict[str, Any]]]:
        cfg = self.cfg
        state = self.readable(rank)
        refuse_partial(state, self.ckpt)
        if (refusal := other_settings(state, cfg, self.ckpt)) and not cfg.allow_config_change:
            raise SystemExit(refusal)
        same_injection(state, self.instances["injected"], self.ckpt, cfg.allow_config_change, cfg)
        self.parts.load_state_dict({k: state[k] for k in ("model", "bank", "optimizer", "scaler")})
        rngs = state["rng"]
        set_rng_state(rngs[rank] if rank < len(rngs) else rngs[0])
        total = cfg.warmup_epochs + cfg.epochs
        if self.master and state["epoch"] + 1 >= total:
            print(f"train.py: {self.out} has finished: all {total} epochs are in {self.ckpt}; nothing to train")
        elif self.master:
            print(f"resuming from {self.ckpt} after epoch {state['epoch']}")
        return state["epoch"] + 1, state["log"]

    def readable(self, rank: int) -> dict[str, Any]:
        """OUT/ckpt.pt, or where it cannot be read, OUT/ckpt.pt.prev: the bad file is named and moved aside."""
        try:
            return load_checkpoint(self.ckpt)
        except CheckpointError as err:
            prev = previous(self.ckpt)
            if not prev.is_file():
                why = f"there is no earlier checkpoint ({prev}): move it aside to start afresh or use another --out"
                raise SystemExit(f"train.py: {err}, and {why}") from err
            state = load_checkpoint(prev)
            if dist.is_initialized():
                dist.barrier()  # every rank has read it before rank 0 moves the bad file
            if rank == 0:
                aside = self.ckpt.with_name(self.ckpt.name + ".corrupt")
                os.replace(self.ckpt, aside)
                keep_as(prev, self.ckpt)  # a kill before the next save resumes from it again, not afresh
                print(
                    f"{err}. Moved it aside to {aside}; resuming from the previous checkpoint, {prev} "
                    f"(after epoch {state['epoch']})",
                    file=sys.stderr,
                )
            return state

    def end_epoch(self, epoch: int, record: dict[str, Any]) -> None:
        """Checkpoint (kept as OUT/ckpt_epochNNNN.pt after every --save-every'th), then rank 0's log line."""
        if dist.is_initialized():  # rank 0's record, the one logged, on every rank
            box = [record]
            dist.broadcast_object_list(box, src=0)
            record = box[0]
        self.history.append(record)
        keep = bool(self.cfg.save_every) and (epoch + 1) % self.cfg.save_every == 0
        try:  # the checkpoint first: the log never holds an epoch the checkpoint does not
            self.save(epoch, keep)
        except CheckpointError as err:  # raised on every rank together
            raise SystemExit(f"train.py, after epoch {epoch}: {err}") from err
        if self.master:
            self.timed += 1
            per = (time.monotonic() - self.began) / self.timed
            left = per * (self.cfg.warmup_epochs + self.cfg.epochs - epoch - 1)
            left = f"{left:.0f} s" if left < 90 else f"{left / 60:.0f} min"
            log_epoch(record, self.out, f" | {per:.1f} s/epoch, {left} left")

    def save(self, epoch: int, keep: bool) -> None:
        """Rank 0 writes the unwrapped model, every rank's RNG and the log so far; a failure raises on every rank."""
        rngs = [rng_state()]
        if dist.is_initialized():
            # each rank holds its own BatchNorm statistics: rank 0's are saved, and every replica takes them
            for buf in self.parts.unwrapped().buffers():
                dist.broadcast(buf, src=0)
            rngs = [None] * dist.get_world_size()
            dist.all_gather_object(rngs, rng_state())
        failed = None
        if self.master:
            try:
                save_checkpoint(
                    self.ckpt,
                    model_args=model_args(self.cfg),
                    clip=self.clip,
                    config=absolute_paths(asdict(self.cfg)),
                    **self.parts.state_dict(),
                    instances=self.instances,
                    epoch=epoch,
                    step=(epoch + 1) * self.steps,
                    rng=rngs,
                    log=self.history,
                )
                if keep:
                    keep_as(self.ckpt, self.out / f"ckpt_epoch{epoch:04d}.pt")  # log.jsonl's numbering
            except (CheckpointError, OSError) as err:
                failed = str(err)
        if dist.is_initialized():  # instead of a barrier: rank 0 says whether it wrote, so all stop together
            box = [failed]
            dist.broadcast_object_list(box, src=0)
            failed = box[0]
        if failed:
            raise CheckpointError(failed)


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """The records of a train.py log.jsonl, a dict per epoch, in order."""
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def log_epoch(record: dict[str, Any], out: Path, timing: str = "") -> None:
    """The epoch's line (its columns: TOUR.md, step 7), then its record in OUT/log.jsonl."""
    auroc = "-" if record["faulty_auroc"] is None else f"{record['faulty_auroc']:.3f}"
    line = "epoch {epoch:3d} | {stage:8s} | loss {loss:.4f} | w {weight:.3f} | mu {mu:.3f} sigma {sigma:.3f} | soft "
    line = line.format(**record) + f"{record['soft_mass']:.3f} | {record['clips_per_s']:.0f} clips/s, "
    line += f"{record['data_wait']:.0%} waiting for data | auroc {auroc}"
    if "knn_class" in record:  # a report's (the demo's: tools/bank_report.py)
        line += f" | 1-nn {record['knn_class']:.2f} xmodal {record['xmodal_class']:.2f}"
    if record.get("agreement") is not None:
        line += f" | agree {record['agreement']:.3f}"
    print(line + timing)
    with open(out / "log.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")


LOCK_NAME = "run.lock"
_HELD = {}  # lock file -> holder, for this process: a POSIX lock does not tell a process from itself


class FolderHeld(RuntimeError):
    """Another live process holds the run folder; the message names it."""


def _holder(text: str) -> str:
    try:
        h = json.loads(text or "{}")
        return f"{h['who']} on host {h['host']}, pid {h['pid']}, started {h['started']}"
    except (ValueError, KeyError):  # it holds the lock but has not written its name yet
        return "a run that is just starting"


@contextmanager
def hold_folder(out: str | Path, who: str = "train.py") -> Iterator[Path]:
    """Hold OUT while the block runs (two runs would interleave its log): the kernel's POSIX lock on OUT/run.lock
    (fcntl.lockf, honoured over NFS), this process's alone, gone with it however it ends, so a dead run never
    blocks the next. The file names the holder and stays (removing it would race with the next one), but for a
    folder this made and nothing else wrote in: a start that failed leaves nothing behind."""
    out, made = Path(out), not Path(out).exists()
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out} is a file; expected a run folder (a new one, or one train.py made)")
    out.mkdir(parents=True, exist_ok=True)
    path = (out / LOCK_NAME).resolve()
    if path in _HELD:  # opening and closing the file again would release this process's lock
        raise FolderHeld(f"the run folder {out} is in use by {_HELD[path]} (this process). Choose another --out")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = _holder(os.read(fd, 4096).decode(errors="replace"))
        os.close(fd)
        raise FolderHeld(
            f"the run folder {out} is in use by {holder}. Wait for it to end (the same command then resumes), "
            f"stop it, or choose another --out"
        ) from None
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    text = json.dumps({"who": who, "host": socket.gethostname(), "pid": os.getpid(), "started": started})
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode(), 0)
    _HELD[path] = _holder(text)
    try:
        yield path
    finally:
        del _HELD[path]
        if made and [p.name for p in out.iterdir()] == [LOCK_NAME]:
            path.unlink()
            out.rmdir()
        os.close(fd)  # releases the lock


@contextmanager
def hold_for_job(out: str | Path, master: bool, who: str = "train.py") -> Iterator[None]:
    """hold_folder under torchrun: rank 0 holds OUT and tells every rank whether it could, so all stop together."""
    with ExitStack() as stack:
        err = None
        if master:
            try:
                stack.enter_context(hold_folder(out, who))
            except (FolderHeld, OSError) as e:  # held, a file, no permission: every rank stops
                err = str(e)
        if dist.is_initialized():
            box = [err]
            dist.broadcast_object_list(box, src=0)
            err = box[0]
        if err:
            raise SystemExit(f"{who}: {err}")
        yield
