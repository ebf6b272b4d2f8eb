"""The demo's clock: its progress line (which stage, how far, the time left) and where its minutes went.

One (seed, noise level) of experiments/demo.py is a warm-up of W epochs, then per method a branch of E
epochs and an evaluation. Work is counted in epochs: every training epoch of a setting costs about the
same (one pass over the same videos with the same model), and an evaluation costs EVAL_EPOCHS of them
until the first one has been timed, then what it measured. The time left is the work left times the
seconds per epoch measured so far in this process; work found already done (a resumed warm-up, a
finished branch) counts as done and not as time.

    [demo] seed 0, 50%: warm-up epoch 12/25 | 39% done | about 9 min left

At the end, time_split says where the minutes went (generation, warm-up, each branch, evaluation) and
on which CPU (cpu_kind): BENCHMARKS.md's `make demo` table is made of such lines.
"""

import json
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import torch

# An evaluation (retrieval, few-shot SVMs, the bank analysis) in epochs of the demo's training, until
# one is timed: BENCHMARKS.md's `make demo` split (Xeon) gives 1.2 min per evaluation and 0.33 min per
# warm-up epoch.
EVAL_EPOCHS = 3.5


class Progress:
    """Counts a setting's work in epochs and prints one line per step."""

    def __init__(
        self,
        name: str,
        warmup_epochs: int,
        epochs: int,
        methods: int,
        clock: Callable[[], float] = time.time,
        say: Callable[[str], None] = print,
    ) -> None:
        self.name, self.clock, self.say = name, clock, say
        self.eval_epochs = EVAL_EPOCHS
        self.train_left = warmup_epochs + epochs * methods  # epochs of training not yet done
        self.evals_left = methods
        self.done = 0.0  # work done in this process, in epochs
        self.seconds = 0.0  # the time it took
        self.total = self.train_left + self.evals_left * self.eval_epochs
        self.mark = clock()

    def skipped(self, epochs: int = 0, evals: int = 0) -> None:
        """Work found already done: out of what is left, not into the rate."""
        self.train_left -= epochs
        self.evals_left -= evals
        self.mark = self.clock()

    def trained(self, stage: str) -> None:
        """One epoch of training finished; `stage` says which (e.g. 'warm-up epoch 3/25')."""
        self._finished(1.0)
        self.train_left -= 1
        self.say(self.line(stage))

    def evaluating(self, name: str) -> None:
        self.mark = self.clock()
        self.say(self.line(f"evaluating {name}"))

    def evaluated(self, name: str) -> None:
        spent = self.clock() - self.mark
        rate = self.seconds / self.done if self.done else None
        if rate:  # from now on an evaluation weighs what this one cost
            self.eval_epochs = spent / rate
        self._finished(self.eval_epochs, spent)
        self.evals_left -= 1
        self.say(self.line(f"{name} evaluated"))

    def _finished(self, epochs: float, spent: float | None = None) -> None:
        now = self.clock()
        self.seconds += (now - self.mark) if spent is None else spent
        self.done += epochs
        self.mark = now

    def left_seconds(self) -> float | None:
        """The time left at the rate measured so far; None before anything was measured."""
        if not self.done:
            return None
        return (self.train_left + self.evals_left * self.eval_epochs) * self.seconds / self.done

    def line(self, stage: str) -> str:
        left = self.left_seconds()
        total = self.train_left + self.evals_left * self.eval_epochs
        share = 1 - total / max(self.total, 1e-9) if self.total else 1.0
        when = "time left: measuring" if left is None else f"about {_minutes(left)} left"
        return f"[demo] {self.name}: {stage} | {100 * max(0.0, share):.0f}% done | {when}"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


@contextmanager
def timed(split, phase):
    """Add the seconds spent inside the block to split[phase]."""
    t0 = time.time()
    try:
        yield
    finally:
        split[phase] = split.get(phase, 0.0) + time.time() - t0


def cpu_kind():
    """The CPU a run's minutes belong to: its model, the widest vector kernels torch uses on it (AVX2,
    AVX512; the demo's time differs about 2x between them), AMX if it has it, and the threads."""
    model, flags = "", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            model = model or (value.strip() if key.strip() == "model name" else "")
            flags = flags or (value if key.strip() == "flags" else "")
    except OSError:  # not Linux
        import platform

        model = platform.processor()
    amx = ", AMX" if "amx_tile" in flags.split() else ""
    return (
        f"{model or 'unknown CPU'}, {torch.backends.cpu.get_cpu_capability()}{amx}, {torch.get_num_threads()} threads"
    )


def time_split(data_seconds, roots, total_seconds):
    """Where the demo's minutes went: data generation, then each phase summed over the settings run."""
    phases = {"data generation": data_seconds}
    for root in roots:
        path = Path(root) / "time_split.json"
        for phase, seconds in (json.loads(path.read_text()) if path.exists() else {}).items():
            phases[phase] = phases.get(phase, 0.0) + seconds
    phases["other (start-up, tables, figures)"] = max(0.0, total_seconds - sum(phases.values()))
    return (
        "Time split: "
        + ", ".join(f"{phase} {seconds / 60:.1f} min" for phase, seconds in phases.items())
        + f"; {total_seconds / 60:.1f} min in all, on {cpu_kind()}."
    )
