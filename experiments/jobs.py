"""Work side by side: `--jobs N` of experiments/demo.py and lab/claims.py runs N independent
(seed, noise level) settings at a time, and demo.py runs one setting's branches (each trained, then
evaluated) at once; each a process with an equal share of the CPU threads (and, with several GPUs, one
of them). On 2 cores two processes of one thread train 1.7x as much as one of two threads
(BENCHMARKS.md, "The training step on a CPU"). with_progress relays the processes' progress events to
one progress line in this process.
"""

import multiprocessing
import os
import signal
import threading
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import torch

from media import loader_workers


def side_by_side(fn, calls, jobs):
    """[fn(*call) for call in calls], `jobs` at a time in processes when jobs > 1 (independent settings:
    the cores, and GPUs, shared out among them), in order."""
    if jobs <= 1:
        return [fn(*call) for call in calls]
    context = multiprocessing.get_context("spawn")  # no forked torch state in the children
    slots = context.Value("i", 0)
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_job_init, initargs=(slots, jobs)) as pool:
        return list(pool.map(fn, *zip(*calls)))


def _job_init(slots, jobs):
    """A process of --jobs: an equal share of the CPU threads and, with several GPUs, one of them. Ctrl-C, which
    reaches every process of the terminal's group, ends it without a traceback: the parent says what to do."""
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))  # checkpoints are written atomically: none is torn
    with slots.get_lock():
        slot, slots.value = slots.value, slots.value + 1
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // jobs))
    loader_workers.PROCESS_SLOT = (slot, jobs)  # loader workers of side-by-side settings are held to other cores
    if "fork" in multiprocessing.get_all_start_methods():  # a spawned child inherits 'spawn', which
        multiprocessing.set_start_method("fork", force=True)  # cannot pickle the loader's dataset
    if torch.cuda.device_count() > 1:
        torch.cuda.set_device(slot % torch.cuda.device_count())


class Relay:
    """experiments.progress.Progress's calls made in a side-by-side process, sent to the one in the parent."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue

    def skipped(self, epochs: int = 0, evals: int = 0) -> None:
        self.queue.put(("skipped", (), {"epochs": epochs, "evals": evals}))

    def trained(self, stage: str) -> None:
        self.queue.put(("trained", (stage,), {}))

    def evaluating(self, name: str) -> None:
        self.queue.put(("evaluating", (name,), {}))

    def evaluated(self, name: str) -> None:
        self.queue.put(("evaluated", (name,), {}))


def with_progress(fn, calls, jobs, progress):
    """side_by_side(fn, calls, jobs), each call given a Relay as its last argument, whose events a thread
    here passes on to `progress` as they come."""
    with multiprocessing.get_context("spawn").Manager() as manager:
        queue = manager.Queue()

        def pump() -> None:
            while (event := queue.get()) is not None:
                name, args, kwargs = event
                getattr(progress, name)(*args, **kwargs)

        thread = threading.Thread(target=pump, daemon=True)
        thread.start()
        try:
            return side_by_side(fn, [(*call, Relay(queue)) for call in calls], jobs)
        finally:
            queue.put(None)
            thread.join()
