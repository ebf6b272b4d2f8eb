"""DataLoaders and their workers on the CPU: how every loader is made (`loader`), what a worker does when it
starts, and the bar shown over a loader on a terminal (`progress`). By default a process gets a worker per core
it has to itself, at most BEST_WORKERS (workers_per_process). Used by train.py, evaluate.py and lab/bench.py.
Tests: tests/test_data.py, tests/test_loader_workers.py
"""

import os
import sys
from collections.abc import Iterable
from typing import Any

import torch
from tqdm import tqdm

PROCESS_SLOT = (0, 1)  # (this process, processes) sharing the machine, when torchrun does not say
# The most workers a process gets by default: in lab/results/gpu.md's loader table (prepared files, an H200
# box with 16 cores), 16 workers delivered the most, 4998 clips/s, against 3036 at 8 and 1246 at 4.
BEST_WORKERS = 16


def process_slot() -> tuple[int, int]:
    """(this process, processes) sharing the machine: torchrun's LOCAL_RANK and LOCAL_WORLD_SIZE, else
    PROCESS_SLOT, which make demo's side-by-side branches set."""
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


def worker_init(worker_id: int) -> None:
    """A loader worker: one torch thread (the main process keeps the cores). SIGTERM ends it, as it ends the
    main process (a run resumes after its last whole epoch: checkpoint.py), and so does the main process's exit."""
    torch.set_num_threads(1)


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
        worker_init_fn=worker_init,
        generator=torch.Generator().manual_seed(seed),
    )


def progress(iterable: Iterable[Any], desc: str, **kwargs: Any) -> Iterable[Any]:
    """A tqdm bar over a loader on a terminal, nothing in a log file or a test (as train.py's bar)."""
    return tqdm(iterable, desc=desc, disable=not sys.stderr.isatty(), leave=False, **kwargs)
