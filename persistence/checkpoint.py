"""What a train.py checkpoint holds, and how it is written and read: it describes itself, as nanoGPT's.

    format      CHECKPOINT_FORMAT
    model_args  AVModel(**model_args) rebuilds the encoders and heads (model.py)
    clip        the media/clip.py ClipSpec of the pre-training clips
    config      every config.Config field of the run
    model       the unwrapped model's state dict
    bank        the memory bank's buffers (memory_bank.py)
    instances   one entry per bank slot: path, label, faulty (ground truth or injected), injected,
                the file its audio was replaced by ('' if none), and the class names: what the
                analysis of the weights (Fig. 5) and of the injection need (data.AVDataset.instances)
    optimizer, scaler, epoch, step, rng   what a resumed run needs

Writes are atomic (a kill during the write leaves the previous file whole), the checkpoint before
the latest is kept as ckpt.pt.prev, and a failed or unreadable file raises CheckpointError naming it. A
checkpoint of another format (an older train.py) is refused with a message: retrain it.

    used by train.py (save, resume, --init, --save-every: keep_as) and evaluate.py (read_pretrained, write_atomically)
"""

import errno
import hashlib
import io
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import torch

from config import Config, config_from_dict
from memory_bank import MemoryBank
from model import AVModel

CHECKPOINT_FORMAT = 3  # 3: the bank's `valid` buffer (slots excluded for files that failed)


def model_args(cfg: Config) -> dict[str, Any]:
    """The AVModel arguments a Config asks for."""
    return {"video_depth": cfg.video_depth, "width": cfg.width}


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be written or read; the message names the file and what to do."""


def previous(path: str | Path) -> Path:
    """Where the checkpoint before PATH is kept: PATH.prev."""
    return Path(f"{path}.prev")


def save_checkpoint(path: str | Path, **state: Any) -> None:
    """Write PATH so that a crash at any moment leaves a whole checkpoint there: torch.save to
    PATH.tmp and fsync it, keep the current PATH as PATH.prev (a hard link, renamed into place),
    then rename PATH.tmp onto PATH. A failed write (full disk, no permission) removes PATH.tmp,
    leaves PATH and PATH.prev as they were, and raises CheckpointError naming the file and the
    free space."""
    path = Path(path)
    tmp, prev = Path(f"{path}.tmp"), previous(path)
    try:
        with open(tmp, "wb") as f:
            torch.save({"format": CHECKPOINT_FORMAT, **state}, f)
            f.flush()
            os.fsync(f.fileno())
    except (OSError, RuntimeError) as err:  # torch reports a short write as RuntimeError
        tmp.unlink(missing_ok=True)
        free = shutil.disk_usage(path.parent).free / 2**20
        why = (
            "no permission to write there"
            if isinstance(err, PermissionError)
            else "the disk is full"
            if getattr(err, "errno", None) == errno.ENOSPC or free < 1
            else str(err)
        )
        raise CheckpointError(
            f"could not write the checkpoint {path}: {why} ({free:.1f} MiB free on its "
            f"filesystem). The last good checkpoint, if any, is unchanged; free space or "
            f"choose another --out, then rerun the same command to resume"
        ) from err
    if path.exists():
        keep_as(path, prev)
    os.replace(tmp, path)


def keep_as(path: str | Path, kept: str | Path) -> None:
    """KEPT becomes the checkpoint PATH is now, whole or not at all: a hard link (no copy; PATH's next
    save renames a new file onto PATH and leaves this one), made under a temporary name and renamed
    into place. Keeps ckpt.pt.prev, and --save-every's OUT/ckpt_epochNNNN.pt."""
    link = Path(f"{kept}.tmp")
    link.unlink(missing_ok=True)
    try:
        os.link(path, link)
    except OSError:  # a filesystem without hard links: a copy, still renamed into place
        shutil.copyfile(path, link)
    os.replace(link, kept)


def kept_name(epoch: int) -> str:
    """The file --save-every keeps the checkpoint after `epoch` (log.jsonl's numbering) in."""
    return f"ckpt_epoch{epoch:04d}.pt"


def write_atomically(path: str | Path, write: Callable[[BinaryIO], None]) -> None:
    """PATH whole or not at all: `write` fills a temporary file beside it (named for this process, so
    that two writers do not share it), which is synced and renamed onto PATH. For the files evaluation
    leaves beside a checkpoint (feature caches, eval.json, exported features), which a run still training
    there, or another evaluation, may be reading."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_checkpoint(path: str | Path, raw: bytes | None = None, mmap: bool = False) -> dict[str, Any]:
    """The checkpoint's dict (from `raw`, the file's bytes, when the caller has read them; with `mmap`, its
    tensors left on disk until used). A file that cannot be read (truncated, corrupt) or was written in
    another format raises CheckpointError naming it."""
    path = Path(path)
    if raw is None and not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        source = io.BytesIO(raw) if raw is not None else path
        state = torch.load(source, map_location="cpu", weights_only=True, mmap=mmap and raw is None)
    except Exception as err:
        raise CheckpointError(
            f"the checkpoint {path} cannot be read ({type(err).__name__}: "
            f"{str(err).splitlines()[0][:120]}): it is truncated or corrupt"
        ) from err
    if "config" not in state or "model" not in state:
        raise ValueError(f"{path} is not a train.py checkpoint (it has no config or model)")
    if state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"the checkpoint {path} has format {state.get('format', 1)}, this train.py reads "
            f"format {CHECKPOINT_FORMAT}: it was written by an older version; retrain it, or "
            f"read it with the commit that wrote it"
        )
    return state


class Pretrained(NamedTuple):
    """What evaluation reads from a checkpoint. `epoch`: the last epoch it trained (log.jsonl's
    numbering); `stamp`: the file's (mtime_ns, size) when read; `digest`: the first 12 hex digits of the
    SHA-1 of the bytes read, naming that version of its content (evaluation records are keyed by it)."""

    cfg: Config
    model: AVModel
    bank: MemoryBank
    instances: dict[str, Any] | None
    epoch: int
    stamp: tuple[int, int]
    digest: str


def read_pretrained(path: str | Path) -> Pretrained:
    """The checkpoint for evaluation, read once into memory: its digest names the bytes loaded. A run
    still training may replace it while it is read (by a rename: the read file stays whole); the stamp is
    then taken again, so that it names the version read."""
    for _ in range(3):
        before = _stamp(path)
        raw = Path(path).read_bytes()
        if _stamp(path) == before:
            break
    state = load_checkpoint(path, raw)
    cfg = config_from_dict(state["config"], source=str(path))
    args = {k: v for k, v in state["model_args"].items() if not (k == "head" and v == "mlp")}  # a retired option
    model = AVModel(**args)
    model.load_state_dict(state["model"])
    bank = MemoryBank(state["bank"]["video"].shape[0], dim=state["bank"]["video"].shape[1], momentum=cfg.momentum)
    bank.load_state_dict(state["bank"])
    digest = hashlib.sha1(raw).hexdigest()[:12]
    return Pretrained(cfg, model, bank, state["instances"], state.get("epoch", -1), before, digest)


def _stamp(path: str | Path) -> tuple[int, int]:
    if not Path(path).is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size


def load_pretrained(path: str | Path) -> tuple[Config, AVModel, MemoryBank, dict[str, Any] | None]:
    """(config, model with the checkpoint's weights, memory bank, instances or None) for evaluation."""
    return read_pretrained(path)[:4]


def rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
