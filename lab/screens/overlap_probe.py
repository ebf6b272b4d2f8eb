"""A timing probe, not a feature: would cutting batch n+1 in a background thread, while the model steps on
batch n, bring the epoch nearer the bare model's speed on 2 cores? It replaces
InMemoryLoader.__iter__ with one that submits each batch's cut to a one-thread pool a batch ahead, then
runs `lab.bench epoch` (its split and its epoch/model ratio, the same run). The cut's draws use generators
of their own (media/in_memory.py), so the thread changes no clip; the global generator the augmentation
uses is left to the main thread.

    python -m lab.screens.overlap_probe off        # the loader as it is
    python -m lab.screens.overlap_probe thread     # the cut a batch ahead
    python -m lab.screens.overlap_probe idle       # ... in a SCHED_IDLE thread of 1 OpenMP thread
    OMP_WAIT_POLICY=PASSIVE python -m lab.screens.overlap_probe thread
    OMP_NUM_THREADS=1 python -m lab.screens.overlap_probe thread   # everything on 1 thread

Its output for each, one after the other on a quiet machine: the overlap_probe.log section of
lab/results/epoch_speed/timings.log (the CPU kind at its top; BENCHMARKS.md, "An epoch's split").
"""

import itertools
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import torch

from lab import bench
from lab.screens import help_asked
from media import in_memory


def ahead(self):
    """InMemoryLoader.__iter__, with each batch cut one step ahead in a thread."""
    keys = iter(self.sampler)
    chunks = iter(lambda: list(itertools.islice(keys, self.batch_size)), [])
    with ThreadPoolExecutor(1, initializer=setup) as pool:
        pending = None
        for chunk in chunks:
            if len(chunk) < self.batch_size:  # the last incomplete batch is dropped, as the loader's
                break
            cut = pool.submit(self.clips.batch, chunk)
            if pending is not None:
                yield pending.result()
            pending = cut
        if pending is not None:
            yield pending.result()


def setup():
    if MODE == "idle":  # the cut only when the model's threads wait
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        torch.set_num_threads(1)


MODE = sys.argv[1] if len(sys.argv) > 1 else "thread"

if __name__ == "__main__":
    help_asked(__doc__)
    if MODE not in ("off", "thread", "idle"):
        raise SystemExit(f"overlap_probe: mode {MODE!r}: expected off, thread or idle")
    if MODE != "off":
        in_memory.InMemoryLoader.__iter__ = ahead
    print(
        f"overlap_probe {MODE}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '')}, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')}"
    )
    bench.main(["epoch", "--preset", "demo", "--epochs", "4", "--preload", "on"])
