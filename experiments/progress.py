"""The demo's clock: its progress line (which stage, how far, the time left) and where its minutes went.

One (seed, noise level) of experiments/demo.py is a warm-up of W epochs, then per method a branch of E
epochs and an evaluation. Work is counted in epochs: every training epoch of a setting costs about the
same (one pass over the same videos with the same model), and an evaluation costs EVAL_EPOCHS of them
until the first one has been timed, then what it measured. The time left is the work left at the pace
of the last epochs run in this process, once two have run (the first is left out: it also decodes the data
into memory); work found already done (a resumed warm-up, a finished branch) counts as done and not as time.
Once the branches run side by side (side_by_side), the pace is the wall time per unit of work that any of
them finished after each had finished its first (their start-up, as the warm-up's first epoch, is left out);
until then, the warm-up's pace. So the estimate does not swing with a start-up's seconds.

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
        self.train_left = warmup_epochs + epochs * methods  # epochs of training not yet done
        self.evals_left = methods
        self.epoch_seconds: list[float] = []  # each training epoch run here, in order
        self.spent = 0.0  # seconds of training and evaluation run here
        self.eval_seconds: float | None = None  # the first evaluation timed here
        self.mark = clock()
        self.together: float | None = None  # since when the work runs side by side
        self.together_units = 0.0  # epochs (an evaluation: EVAL_EPOCHS) finished side by side
        self.processes, self.before = 1, None  # side by side: how many at once; the warm-up's pace
        self.round: tuple[float, float] | None = None  # (when, units) once each had finished a unit

    def side_by_side(self, processes: int) -> None:
        """From here, `processes` branches train and evaluate at once: events interleave, so the pace is
        the wall time per unit of work done by any of them (an evaluation counts EVAL_EPOCHS units), measured
        from when each has finished its first; until then, the pace of the epochs before."""
        self.processes, self.before = processes, self.pace()  # before `together`: the pace of the epochs so far
        self.together, self.together_units, self.mark = self.clock(), 0.0, self.clock()

    def _done_together(self, units: float) -> None:
        self.together_units += units
        if self.together is not None and self.round is None and self.together_units >= self.processes:
            self.round = (self.clock(), self.together_units)

    def skipped(self, epochs: int = 0, evals: int = 0) -> None:
        """Work found already done: out of what is left, not into the pace."""
        self.train_left -= epochs
        self.evals_left -= evals
        self.mark = self.clock()

    def trained(self, stage: str) -> None:
        """One epoch of training finished; `stage` says which (e.g. 'warm-up epoch 3/25')."""
        now = self.clock()
        self.epoch_seconds.append(now - self.mark)
        self.spent += now - self.mark
        self.mark = now
        self.train_left -= 1
        self._done_together(1)
        self.say(self.line(stage))

    def evaluating(self, name: str) -> None:
        if self.together is None:  # side by side, the time since the last event belongs to the others
            self.mark = self.clock()
        self.say(self.line(f"evaluating {name}"))

    def evaluated(self, name: str) -> None:
        now = self.clock()
        if self.eval_seconds is None and self.together is None:  # the later ones cost what this one did
            self.eval_seconds = now - self.mark
        self.spent += now - self.mark
        self.mark = now
        self.evals_left -= 1
        self._done_together(EVAL_EPOCHS)
        self.say(self.line(f"{name} evaluated"))

    def pace(self) -> float | None:
        """Seconds per training epoch: the mean of the last five run here, the first left out (it also
        pays for decoding the data into memory); None before two were timed. Side by side, the pace before."""
        if self.together is not None:
            return self.before
        runs = self.epoch_seconds[1:]
        return sum(runs[-5:]) / len(runs[-5:]) if runs else None

    def left_seconds(self) -> float | None:
        """The time left at the pace measured so far; None before one was."""
        if self.round is not None and self.together_units > self.round[1]:
            per_unit = (self.clock() - self.round[0]) / (self.together_units - self.round[1])
            return (self.train_left + EVAL_EPOCHS * self.evals_left) * per_unit
        pace = self.pace()
        if pace is None:
            return None
        each_eval = self.eval_seconds if self.eval_seconds is not None else EVAL_EPOCHS * pace
        return self.train_left * pace + self.evals_left * each_eval

    def line(self, stage: str) -> str:
        """The share done is of this run's time: spent / (spent + left)."""
        left = self.left_seconds()
        if left is None:
            return f"[demo] {self.name}: {stage} | time left: measuring"
        share = self.spent / (self.spent + left) if self.spent + left > 0 else 1.0
        return f"[demo] {self.name}: {stage} | {100 * share:.0f}% done | about {duration(left)} left"


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


def duration(seconds: float) -> str:
    """Seconds as a person reads them: 40 s, 12 min, 3.5 h."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
