"""One run per folder: a POSIX lock on OUT/run.lock whose holder is named, gone with the process.

    hold_folder    hold OUT while a block runs; another live holder stops it with FolderHeld, naming it
    hold_for_job   the same under torchrun: rank 0 holds it for the job, every rank stops if it cannot
    held_by        who else holds a folder now (evaluate.py says so, and evaluates the checkpoint as it is)

persistence/runstate.py re-exports these for train.py and evaluate.py. Tests: tests/test_run_folder.py.
"""

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import torch.distributed as dist

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
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out} is a file; expected a run folder (a new one, or one train.py made)")
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


def held_by(out: Path) -> str | None:
    """Who else holds OUT now (hold_folder), or None. Another process's hold is tested by taking the
    lock for a moment; this process's own is not (closing a second descriptor would release it)."""
    path = (Path(out) / LOCK_NAME).resolve()
    if path in _HELD or not path.exists():
        return None
    fd = os.open(path, os.O_RDWR)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return _holder(os.read(fd, 4096).decode(errors="replace"))
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


@contextmanager
def hold_for_job(out: Path, master_process: bool, who: str = "train.py") -> Iterator[None]:
    """hold_folder for a job of one or many processes: rank 0 holds OUT (only it writes there), and
    tells every rank whether it could, so that all stop together instead of waiting in a collective."""
    with ExitStack() as stack:
        err = None
        if master_process:
            try:
                stack.enter_context(hold_folder(out, who))
            except (FolderHeld, NotADirectoryError) as e:
                err = str(e)
        if dist.is_initialized():
            box = [err]
            dist.broadcast_object_list(box, src=0)
            err = box[0]
        if err:
            raise SystemExit(f"{who}: {err}")
        yield
