"""One epoch's running account for train.py's loop: the step statistics summed on the device (no
host sync per step), the clips seen, and the time spent waiting for the loader.

    tally = Tally(device)
    for batch in tally.waiting(loader): ...; tally.add(stats, clips)
    tally.means(steps, world)              # at the epoch's end: the log record's averages

duration(seconds) writes a time as the demo's progress line shows it.

Tests: tests/test_train.py
"""

import time
from collections.abc import Iterable, Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor


class Tally:
    def __init__(self, device: torch.device) -> None:
        self.sums: dict[str, Tensor] = {}
        self.seen = 0
        self.t0 = time.time()
        self.waited = 0.0  # seconds spent waiting for a batch

    def waiting(self, batches: Iterable) -> Iterator:
        """The batches, timing how long the host waits for each. It waits only when the loader is behind:
        a GPU step ahead of it queues kernels and blocks at the loop's every-10th-step sync instead."""
        ready = time.time()
        for batch in batches:
            self.waited += time.time() - ready
            yield batch
            ready = time.time()

    def add(self, stats: dict[str, Tensor], clips: int) -> None:
        for k, val in stats.items():
            self.sums[k] = self.sums.get(k, 0.0) + val
        self.seen += clips

    def clips_per_s(self) -> float:
        return self.seen / (time.time() - self.t0)

    def means(self, steps: int, world: int) -> dict[str, Any]:
        """The epoch's averages of the step statistics, of the global batch under DDP (each rank's loss
        is its share of eq. (17)), its clips/s, the share of its time spent waiting for data, and the
        items that stood in for failed files (`skipped`, a count: the same on every rank)."""
        if dist.is_initialized():
            for k in sorted(self.sums):
                dist.all_reduce(self.sums[k])
                self.sums[k] /= world
        skipped = round(float(self.sums.pop("skipped", 0.0)))
        seconds = time.time() - self.t0
        return {
            **{k: float(s) / steps for k, s in self.sums.items()},
            "clips_per_s": self.seen / seconds,
            "data_wait": self.waited / max(1e-9, seconds),
            "skipped": skipped,
        }


def duration(seconds: float) -> str:
    """Seconds as a person reads them: 40 s, 12 min, 3.5 h."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
