"""DataLoaders and their workers on the CPU: how every loader is made (`loader`), which core each worker
is held to, what it does when it starts, and the bar shown over a loader on a terminal (`progress`).

On a GPU workstation each loader worker gets a core of its own, the main processes keep theirs
(MAIN_CORES each); on a small machine nothing is pinned. By default a process gets a worker per core
it has to itself, at most BEST_WORKERS (workers_per_process). Used by train.py, evaluate.py and
lab/bench.py through `loader` and worker_init_fn. Tests: tests/test_data.py
"""

import functools
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

import torch
from tqdm import tqdm

MAIN_CORES = 2  # cores left to each main process when workers are held to cores ("auto")
PROCESS_SLOT = (0, 1)  # (this process, processes) sharing the machine, when torchrun does not say
# The most workers a process gets by default: in lab/results/gpu.md's loader table (prepared files, an H200
# box with 16 cores), 16 workers delivered the most, 4998 clips/s, against 3036 at 8 and 1246 at 4.
BEST_WORKERS = 16


def process_slot() -> tuple[int, int]:
    """(this process, processes) sharing the machine: torchrun's LOCAL_RANK and LOCAL_WORLD_SIZE, else
    PROCESS_SLOT, which demo.py --jobs sets."""
    env = os.environ
    return (int(env["LOCAL_RANK"]), int(env["LOCAL_WORLD_SIZE"])) if "LOCAL_RANK" in env else PROCESS_SLOT


def workers_per_process(requested: int, cores: int | None = None, processes: int | None = None) -> int:
    """--workers as asked, or for a negative request (the default) the cores available to each of the
    processes sharing the machine (`cores`: the affinity mask's; `processes`: process_slot's), at
    least 1 and at most BEST_WORKERS."""
    if requested >= 0:
        return requested
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(BEST_WORKERS, cores // (processes or process_slot()[1])))


def worker_cores(
    workers: int, policy: str = "auto", cores: list[int] | None = None, slot: tuple[int, int] | None = None
) -> list[int] | None:
    """The core each DataLoader worker of this process is held to, or None to leave them free.
    `cores`: the allowed cores (default: the affinity mask); `slot`: (this process, processes) among
    those sharing the machine, each with `workers` workers (default: torchrun's LOCAL_RANK and
    LOCAL_WORLD_SIZE, else PROCESS_SLOT, which demo.py --jobs sets). "auto" holds workers only where
    every process keeps MAIN_CORES cores beside them (a GPU workstation), "on" always, "off" never.
    Workers take the last cores, each process's its own; the main processes keep their masks."""
    if policy not in ("auto", "on", "off"):
        raise ValueError(f"--pin-workers {policy!r}: expected auto, on or off")
    if cores is None:
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else []
    rank, processes = slot or process_slot()
    if (
        policy == "off"
        or workers == 0
        or not cores
        or (policy == "auto" and len(cores) < processes * (workers + MAIN_CORES))
    ):
        return None
    spare = len(cores) - processes * MAIN_CORES
    spare = spare if spare > 0 else len(cores)
    return [cores[-1 - (rank * workers + k) % spare] for k in range(workers)]


def worker_init(worker_id: int, cores: list[int] | None = None) -> None:
    """A loader worker: one torch thread (the main process keeps the cores), held to cores[worker_id].
    SIGTERM ends it, as it ends the main process (a run resumes after its last whole epoch: checkpoint.py),
    and so does the main process's exit, whichever way it leaves."""
    torch.set_num_threads(1)
    if cores:
        os.sched_setaffinity(0, {cores[worker_id]})


def worker_init_fn(workers: int, policy: str = "auto") -> Callable[[int], None]:
    """DataLoader's worker_init_fn for `workers` workers under the pinning policy (worker_cores)."""
    return functools.partial(worker_init, cores=worker_cores(workers, policy))


def loader(
    dataset: torch.utils.data.Dataset,
    batch_size: int,
    workers: int,
    shuffle: bool = False,
    seed: int = 0,
    sampler: torch.utils.data.Sampler | None = None,
    drop_last: bool | None = None,
    pin_memory: bool = False,
    persistent: bool = False,
    pin_workers: str = "auto",
) -> torch.utils.data.DataLoader:
    """Every DataLoader of training and evaluation: workers set up by worker_init_fn, and a
    generator of its own, so that the loader's draws leave the global RNG alone. drop_last defaults
    to `shuffle` (a training pass drops its incomplete batch, an evaluation keeps every video)."""
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle,
        sampler=sampler,
        num_workers=workers,
        drop_last=shuffle if drop_last is None else drop_last,
        pin_memory=pin_memory,
        persistent_workers=persistent and workers > 0,
        worker_init_fn=worker_init_fn(workers, pin_workers),
        generator=torch.Generator().manual_seed(seed),
    )


def progress(iterable: Iterable[Any], desc: str, **kwargs: Any) -> Iterable[Any]:
    """A tqdm bar over a loader on a terminal, nothing in a log file or a test (as train.py's bar)."""
    return tqdm(iterable, desc=desc, disable=not sys.stderr.isatty(), leave=False, **kwargs)
