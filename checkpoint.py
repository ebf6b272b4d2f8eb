"""Checkpoints, resuming and the run folder: how a train.py run survives faults.

A checkpoint describes itself, as nanoGPT's does: format, model_args (AVModel(**model_args)), clip (augment.ClipSpec),
config (every Config field), model, bank, instances (per slot: path, label, faulty, injected, audio; the classes),
optimizer, scaler, epoch, step, rng (per rank), log. It is written atomically, the one before kept as ckpt.pt.prev;
the same command resumes after the last whole epoch (Run), from ckpt.pt.prev where ckpt.pt cannot be read, and stops
in one line under settings that change what its epochs computed (result_changes). One run per folder: hold_folder.

    used by train.py (Run, hold_folder, branch_state), evaluation and the figures (load_checkpoint, read_log)
    tests: tests/test_faults.py, tests/test_resume.py, tests/test_run_folder.py
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
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from config import Config, shown
from losses import VARIANTS

CHECKPOINT_FORMAT = 4  # 4: no bank `valid` buffer (a file that fails stops the run: data.py)


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be written or read; the message names the file and what to do."""


def model_args(cfg: Config) -> dict[str, Any]:
    return {"video_depth": cfg.video_depth, "width": cfg.width}


def previous(path: str | Path) -> Path:
    return Path(f"{path}.prev")


def save_checkpoint(path: str | Path, **state: Any) -> None:
    """To PATH.tmp, fsync, PATH kept as PATH.prev, then the rename: a killed write never leaves a torn PATH. A
    failed one (a full disk, no permission) leaves PATH as it was and raises CheckpointError naming the file."""
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
        said = f"could not write the checkpoint {path}: {why} ({free:.1f} MiB free on its filesystem)."
        then = "The last good checkpoint, if any, is unchanged; free space or choose another --out, then rerun"
        raise CheckpointError(f"{said} {then}") from err
    if path.exists():
        keep_as(path, previous(path))
    os.replace(tmp, path)


def keep_as(path: str | Path, kept: str | Path) -> None:
    """KEPT becomes PATH's checkpoint, whole or not at all: a hard link (a save renames a new file onto PATH)."""
    link = Path(f"{kept}.tmp")
    link.unlink(missing_ok=True)
    try:
        os.link(path, link)
    except OSError:  # a filesystem without hard links
        shutil.copyfile(path, link)
    os.replace(link, kept)


def load_checkpoint(path: str | Path, raw: bytes | None = None, mmap: bool = False) -> dict[str, Any]:
    """The checkpoint's dict (from `raw`, its bytes, when read already); CheckpointError naming it where it is
    truncated, corrupt or of another format."""
    path = Path(path)
    if raw is None and not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {shown(path)}")
    try:
        source = io.BytesIO(raw) if raw is not None else path
        state = torch.load(source, map_location="cpu", weights_only=True, mmap=mmap and raw is None)
    except Exception as err:
        first = str(err).partition("\n")[0][:120]
        why = f"({type(err).__name__}: {first}): it is truncated or corrupt"
        raise CheckpointError(f"the checkpoint {path} cannot be read {why}") from err
    if "config" not in state or "model" not in state:
        raise ValueError(f"{path} is not a train.py checkpoint (it has no config or model)")
    if state.get("format") == 3 and bool(state.get("bank", {}).get("valid", torch.ones(1)).all()):
        state["bank"].pop("valid", None)  # format 3 differs by the bank's `valid` alone, all True where no file failed
        state["format"] = CHECKPOINT_FORMAT
    if (made := state.get("format", 1)) != CHECKPOINT_FORMAT:
        why = f"this train.py reads format {CHECKPOINT_FORMAT}; retrain it, or read it with the commit that wrote it"
        raise CheckpointError(f"the checkpoint {path} has format {made}, {why}")
    return state


# ----------------------------------------------------------------------------- a checkpoint's settings

PATHS = ("data", "annotations", "manifest", "faulty_pool")  # the dataset's files, as --data etc. name them
GONE = {"max_bad_fraction", "pin_workers"}  # retired at any value (why, for these and RETIRED: lab/results/HISTORY.md)
RETIRED = {"head": "mlp", "lr_ramp": 0, "bank_init": "random", "soft_guard": False}  # retired at their only value


def config_from_dict(saved: dict[str, Any], source: str = "checkpoint") -> Config:
    """A Config from a checkpoint's dict: newer fields take their defaults, retired options are dropped, any other
    unknown field is an error naming it."""
    saved = {k: v for k, v in saved.items() if not (k in RETIRED and v == RETIRED[k]) and k not in GONE}
    if isinstance(saved.get("preload"), bool):  # written when preload was a switch
        saved["preload"] = "on" if saved["preload"] else "off"
    if unknown := sorted(set(saved) - {f.name for f in fields(Config)}):
        raise ValueError(f"{source}: unknown settings {unknown}; it was written by another version of train.py")
    return Config(**saved)


def absolute_paths(values: dict[str, Any]) -> dict[str, Any]:
    """A Config's dict with its dataset paths resolved: a checkpoint names its data wherever it is read from."""
    return values | {k: str(Path(values[k]).resolve()) for k in PATHS if values.get(k)}


# A resume may change the engineering group (where and whether the run goes on; the loader, as each item's draws
# are seeded by seed, epoch and index; the device), but not preload (a preloaded clip's audio is cut from a
# whole-file decode, and AAC restarts after a seek) nor amp (rounding). A warm-up (xID at a constant rate) reads
# none of SECOND_STAGE; a second stage reads SOFT_ONLY with soft targets, WEIGHTS_ONLY with eq. (6)'s weights.
NOT_RESUMABLE = {"preload", "amp"}
ENGINEERING = {f.name for f in fields(Config) if f.metadata["group"] == "engineering"} - NOT_RESUMABLE | {"manifest"}
SOFT_ONLY, WEIGHTS_ONLY = {"soft_targets", "tau_s", "tau_t", "lam"}, {"kappa", "w_min", "delta"}
SECOND_STAGE = {"loss", "epochs", "lr_min"} | SOFT_ONLY | WEIGHTS_ONLY


def unread(cfg: Config, trained: int) -> set[str]:
    """The fields the first `trained` epochs of a run under cfg never read (losses.VARIANTS)."""
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


def refuse_partial(state: dict[str, Any], path: str | Path) -> None:
    """An older train.py's stop inside an epoch: mid-epoch weights under the epoch before's count."""
    if state.get("partial"):
        said = f"train.py: {path} was stopped inside an epoch by an older train.py"
        then = f"{previous(path)} holds the whole epoch before it: move it onto {path} to resume from there, or retrain"
        raise SystemExit(f"{said}; {then}")


def refuse_other_settings(cfg: Config, state: dict[str, Any] | None = None) -> None:
    """One line where OUT/ckpt.pt (`state`, or read with its tensors left on disk, before the data) may not resume
    under cfg: stopped inside an epoch, a setting this version does not know, or (unless --allow-config-change) other
    settings that its trained epochs read. An unreadable file is left to Run, which falls back to the one before."""
    ckpt = Path(cfg.out) / "ckpt.pt"
    try:
        state = state or torch.load(ckpt, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001  none, or unreadable
        return
    refuse_partial(state, ckpt)
    try:
        changed = result_changes(config_from_dict(state["config"], str(ckpt)), cfg, state["epoch"] + 1)
    except ValueError as err:  # a retired option at another value
        raise SystemExit(f"train.py: {err}") from None
    if changed and not cfg.allow_config_change:
        words = ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in changed.items())
        said = f"train.py: {ckpt} was trained with other settings: {words}"
        raise SystemExit(f"{said}. Use another --out, or --allow-config-change to resume under the new ones.")


def injection(c: Config) -> str:
    return (
        f"--faulty-fraction {c.faulty_fraction:g} --faulty-source {c.faulty_source}, injection seed {c.injection_seed}"
    )


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
    if (slots := state["bank"]["video"].shape[0]) != (items := len(instances["paths"])):
        said = f"train.py: --init {init}: its memory bank has {slots} slots, the training set {items} videos"
        raise SystemExit(f"{said}; use the same data and manifest")
    same_injection(state, instances["injected"], f"--init {init}", allow, cfg)
    return {"model": state["model"], "bank": state["bank"]}


# ----------------------------------------------------------------------------- the run around train.py's loop


def from_rank0(value: Any) -> Any:
    """Rank 0's value on every rank of a torchrun job, so that all take the same way."""
    if dist.is_initialized():
        box = [value]
        dist.broadcast_object_list(box, src=0)
        value = box[0]
    return value


def rng_state() -> dict[str, Any]:
    cuda = {"cuda": torch.cuda.get_rng_state_all()} if torch.cuda.is_available() else {}
    return {"torch": torch.get_rng_state(), "python": random.getstate(), **cuda}


class Run:
    """Around train.py's loop: made, it resumes OUT/ckpt.pt on every rank (`start`, `history`); end_epoch(epoch,
    record) checkpoints (rank 0 writes), then logs. `parts`: train.Parts. A killed run loses the epoch it was in."""

    def __init__(self, cfg: Config, parts: Any, instances: dict, clip: dict, steps: int, rank: int) -> None:
        self.cfg, self.parts, self.instances, self.clip, self.steps = cfg, parts, instances, clip, steps
        self.master, self.out, self.ckpt = rank == 0, Path(cfg.out), Path(cfg.out) / "ckpt.pt"
        self.resumed = self.ckpt.exists()
        self.start, self.history = self.restore(rank) if self.resumed else (0, [])
        # the log as the checkpoint knows it (a kill between the two counts an epoch once); none for a fresh run
        if self.master and (self.history or (self.out / "log.jsonl").exists()):
            (self.out / "log.jsonl.tmp").write_text("".join(json.dumps(r) + "\n" for r in self.history))
            os.replace(self.out / "log.jsonl.tmp", self.out / "log.jsonl")
        self.began = time.monotonic()

    def restore(self, rank: int) -> tuple[int, list[dict[str, Any]]]:
        """OUT/ckpt.pt, or where it cannot be read, OUT/ckpt.pt.prev (the bad file named and moved aside) into parts."""
        try:
            state = load_checkpoint(self.ckpt)
        except CheckpointError as err:
            if not (prev := previous(self.ckpt)).is_file():
                why = f"there is no earlier checkpoint ({prev}): move it aside to start afresh or use another --out"
                raise SystemExit(f"train.py: {err}, and {why}") from err
            state = load_checkpoint(prev)
            if dist.is_initialized():
                dist.barrier()  # every rank has read it before rank 0 moves the bad file
            if rank == 0:
                os.replace(self.ckpt, aside := self.ckpt.with_name(self.ckpt.name + ".corrupt"))
                keep_as(prev, self.ckpt)  # a kill before the next save resumes from it again, not afresh
                said = f"resuming from the previous checkpoint, {prev} (after epoch {state['epoch']})"
                print(f"{err}. Moved it aside to {aside}; {said}", file=sys.stderr)
        refuse_other_settings(self.cfg, state)
        same_injection(state, self.instances["injected"], self.ckpt, self.cfg.allow_config_change, self.cfg)
        self.parts.load_state_dict({k: state[k] for k in ("model", "bank", "optimizer", "scaler")})
        rng = state["rng"][rank] if rank < len(state["rng"]) else state["rng"][0]  # a job of another size: rank 0's
        torch.set_rng_state(rng["torch"])
        random.setstate(rng["python"])
        if "cuda" in rng and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        total = self.cfg.warmup_epochs + self.cfg.epochs
        if self.master and state["epoch"] + 1 >= total:
            print(f"train.py: {self.out} has finished: all {total} epochs are in {self.ckpt}; nothing to train")
        elif self.master:
            print(f"resuming from {self.ckpt} after epoch {state['epoch']}")
        return state["epoch"] + 1, state["log"]

    def end_epoch(self, epoch: int, record: dict[str, Any]) -> None:
        """Checkpoint (kept as OUT/ckpt_epochNNNN.pt after every --save-every'th), then rank 0's log line."""
        self.history.append(record := from_rank0(record))  # rank 0's record, the one logged, on every rank
        try:  # the checkpoint first: the log never holds an epoch the checkpoint does not
            self.save(epoch, bool(self.cfg.save_every) and (epoch + 1) % self.cfg.save_every == 0)
        except CheckpointError as err:  # raised on every rank together
            raise SystemExit(f"train.py, after epoch {epoch}: {err}") from err
        if self.master:
            per = (time.monotonic() - self.began) / (epoch + 1 - self.start)
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
        try:
            if self.master:
                cfg, step = self.cfg, (epoch + 1) * self.steps
                state = {"model_args": model_args(cfg), "clip": self.clip, "config": absolute_paths(asdict(cfg))}
                state |= self.parts.state_dict() | {"instances": self.instances, "epoch": epoch, "step": step}
                save_checkpoint(self.ckpt, **state, rng=rngs, log=self.history)
                if keep:
                    keep_as(self.ckpt, self.out / f"ckpt_epoch{epoch:04d}.pt")  # log.jsonl's numbering
        except (CheckpointError, OSError) as err:
            failed = str(err)
        if failed := from_rank0(failed):  # instead of a barrier: rank 0 says whether it wrote, so all stop together
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


# ----------------------------------------------------------------------------- one run per folder

LOCK_NAME = "run.lock"


@contextmanager
def hold_folder(out: str | Path, master: bool = True, who: str = "train.py") -> Iterator[None]:
    """Hold OUT while the block runs (two runs would interleave its log); under torchrun rank 0 holds it and tells
    every rank whether it could, so all stop together, in one line naming the holder. flock on OUT/run.lock locks
    that open file (NFS too, on Linux): a second hold fails in this process as in another, and the kernel drops it
    with the process however it ends. The file names the holder and stays (removing it would race with the next),
    but in a folder this made and nothing else wrote in: a start that failed leaves nothing behind."""
    out, f, err = Path(out), None, None
    made = master and not out.exists()
    if master and out.exists() and not out.is_dir():
        err = f"--out {out} is a file; expected a run folder (a new one, or one train.py made)"
    elif master:
        try:
            out.mkdir(parents=True, exist_ok=True)
            f = open(out / LOCK_NAME, "a+")  # open while the block runs: the lock
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
            f.truncate(0)
            f.write(f"{who} on host {socket.gethostname()}, pid {os.getpid()}, started {started}")
            f.flush()
        except BlockingIOError:  # held
            f.seek(0)
            holder = f.read().strip() or "a run that is just starting"  # it holds the lock but has not written its name
            f.close()
            what = "Wait for it to end (the same command then resumes), stop it, or choose another --out"
            err = f"the run folder {out} is in use by {holder}. {what}"
        except OSError as e:  # no permission
            err = str(e)
    if err := from_rank0(err):
        raise SystemExit(f"{who}: {err}")
    with f or nullcontext():
        try:
            yield
        finally:
            if made and [p.name for p in out.iterdir()] == [LOCK_NAME]:
                (out / LOCK_NAME).unlink()
                out.rmdir()
