"""Soft-target drift, seen without labels: what the memory bank still knows of its own pairs, logged every
epoch, and the warning make demo's runs print when a soft-target branch loses it (lab/results/ccp_drift/).

Soft targets T = (1 - lam) 1[i=j] + lam S, eqs. (8)-(9) [bts-trg-v/a], amplify what the bank already
believes: CCP's S, eqs. (13)-(14), ranks the candidates by the bank's swapped posterior P(vbar_j | abar_i;
tau_s). From a bank that barely knows the data they can move to wrong candidates, training follows, and
the drift feeds itself; on real recordings Soft-xID then ended 16 points below xID. The
ground-truth view of it (class agreement, CCP's same-class mass) is analysis/diagnostics.py's and needs
labels; these need none, so they work on a user's own data:

    agreement       the bank's cross-modal agreement: the share of other slots j whose video memory the
                    audio memory abar_i ranks below its own, abar_i . vbar_j < abar_i . vbar_i (0.5:
                    chance, 1: every audio memory picks its own video). The ranking CCP's swapped term
                    reads; a softened form of "is the audio memory's nearest video memory its own"
                    (own_audio in the demo screen's logs: 0.003-0.04 of 1000 slots, jumping epoch to epoch)
    positive_mass   S(i|i) at lam = 1 for the run's soft-target strategy (CCP: eqs. (13)-(14)), the mean of
                    S_v and S_a over anchors drawn from the bank with the run's K: the share of the soft part
                    left on the anchor's own positive. Logged, not warned on: on a demo screen branch where
                    agreement rose (0.737 -> 0.780, Soft-xID, seed 702) it fell by a quarter (0.034 -> 0.026)
    bank_signals    both, over the bank's slots: what each epoch's log record gets
    drift_warning   the rule, on the log's records: in a soft-target stage (Soft- or Robust-xID),
                    agreement below its value at the stage's start by more than MARGIN for PATIENCE
                    consecutive epochs -> one line; otherwise None
    DriftWatch      what a run holds: measures a branch's starting bank, adds the signals to each
                    record, prints the rule's line on rank 0
    BankReport      train.main's `report` that make demo and the lab pass: analysis/diagnostics.py's
                    bank_report and these signals in each epoch's record, the warning, the demo's progress

The start is the last xID epoch's record in the same run; for a branch off a warm-up (--init) it is the
bank it was given, measured before its first step and kept in its first record as `drift_start`; where
neither is in the log (a checkpoint stopped inside its first epoch by an older train.py), its first epoch's
value.

Why MARGIN 0.02 and PATIENCE 2 (chosen, not fitted): on the demo screen's branches (lab/results/demo_screen/
PLAN.md: 25% injected, 30-epoch warm-up, seeds 700-702 at 8 epochs, 700-701 at 12) agreement, computed
afterwards from their checkpoints, rose from 0.74-0.80 at the warm-up's end to 0.77-0.86 after Soft- or Robust-xID,
so a fall below the start is unusual there; two epochs keep one bad epoch quiet. How well the rule
separates drifting runs from the others: lab/results/ccp_drift/RESULTS.md (2 of 3 caught, 1 false alarm).

Not on train.py's path (`python train.py` logs without it): a diagnosis of the method, like
analysis/diagnostics.py, but label-free. It costs one (M, M) product of the bank (M <= 4096 slots) and a
(512, 1+K) soft-target draw per epoch.
Tests: python -m pytest tests/test_drift.py
"""

import sys
from typing import TYPE_CHECKING, Any

import torch

from analysis.diagnostics import bank_report, draw_candidates, soft_targets_at, some_slots
from losses import VARIANTS

if TYPE_CHECKING:  # for annotations only
    from config import Config
    from memory_bank import MemoryBank

MARGIN = 0.02  # agreement below the stage's start by more than this ...
PATIENCE = 2  # ... for this many consecutive soft-target epochs warns


@torch.no_grad()
def agreement(video: torch.Tensor, audio: torch.Tensor, max_items: int = 4096, seed: int = 0) -> float:
    """video, audio (N, D) unit-norm memories -> the mean over slots i of the share of other slots j with
    abar_i . vbar_j < abar_i . vbar_i, on a fixed random subset of at most `max_items` slots."""
    if video.shape[0] > max_items:
        subset = some_slots(video.shape[0], max_items, seed)  # (M,)
        video, audio = video[subset], audio[subset]
    video, audio = video.float().cpu(), audio.float().cpu()
    m = video.shape[0]
    av = audio @ video.T  # (M, M): row i, audio memory i against every video memory
    below = (av < av.diagonal()[:, None]).sum(1)  # (M,) others ranked below i's own video memory
    return float(below.float().mean() / (m - 1))


@torch.no_grad()
def positive_mass(
    video: torch.Tensor,
    audio: torch.Tensor,
    strategy: str,
    num_negatives: int,
    tau_s: float,
    tau_t: float,
    max_items: int = 512,
    seed: int = 0,
) -> float | None:
    """video, audio (N, D) -> the mean of S_v(i|i) and S_a(i|i), lam = 1, over at most `max_items` anchors
    with `num_negatives` candidates each; None for 'oracle', whose S reads labels."""
    if strategy == "oracle":
        return None
    video, audio = video.float().cpu(), audio.float().cpu()
    cand = draw_candidates(video.shape[0], max_items, num_negatives, seed)  # (A, 1+K)
    S_v, S_a = soft_targets_at(video, audio, cand, strategy, tau_s, tau_t)  # (A, 1+K) each
    return float(0.5 * (S_v[:, 0] + S_a[:, 0]).mean())


def bank_signals(bank: "MemoryBank", cfg: "Config") -> dict[str, Any]:
    """agreement and positive_mass of a memory_bank.MemoryBank, with the run's soft targets, K, tau_s
    and tau_t: the label-free part of an epoch's log record."""
    video, audio = bank.video.cpu(), bank.audio.cpu()  # (N, D) each
    return {
        "agreement": agreement(video, audio),
        "positive_mass": positive_mass(video, audio, cfg.soft_targets, cfg.num_negatives, cfg.tau_s, cfg.tau_t),
    }


def soft_stage(record: dict[str, Any]) -> bool:
    return VARIANTS[record["stage"]].soft


def drift_warning(records: list[dict[str, Any]], margin: float = MARGIN, patience: int = PATIENCE) -> str | None:
    """The rule on a run's log records, in order: the warning line when the last `patience` records are all
    of a soft-target stage, after its start, with agreement below the start's by more than `margin`;
    otherwise None. Records without `agreement` (logs from before it) never warn."""
    first = next((k for k, r in enumerate(records) if soft_stage(r)), None)
    if first is None:
        return None
    start, watched = records[first].get("drift_start"), records[first:]
    if start is None and first > 0:
        start = records[first - 1]  # the last xID epoch: the bank the soft targets started from
    elif start is None:
        start, watched = records[first], records[first + 1 :]  # a branch resumed inside its first epoch
    reference = start.get("agreement")
    tail = watched[-patience:]
    if reference is None or len(tail) < patience or not all(soft_stage(r) for r in tail):
        return None
    if not all(r.get("agreement") is not None and r["agreement"] < reference - margin for r in tail):
        return None
    epochs = ", ".join(f"{r['agreement']:.3f} (epoch {r['epoch']})" for r in tail)
    return (
        f"train.py: warning: the bank's cross-modal agreement (label-free, analysis/drift.py) is {epochs}, "
        f"below {reference:.3f} at the soft-target stage's start by more than {margin}: the soft targets may "
        f"be drifting (README: When soft targets help and when they hurt); compare an xID branch from the same warm-up"
    )


class DriftWatch:
    """A run's hold on the signals. Made after the restore (or --init), so that a run that
    begins in a soft-target stage (fresh: not resumed) measures the bank it was given before training on it;
    resumed, that measure is in its first epoch's record (drift_start)."""

    def __init__(self, bank: "MemoryBank", cfg: "Config", fresh: bool, master: bool) -> None:
        self.bank, self.cfg, self.master = bank, cfg, master
        begins_soft = fresh and cfg.warmup_epochs == 0 and VARIANTS[cfg.loss].soft
        self.start = bank_signals(bank, cfg) if begins_soft else None

    def signals(self, epoch: int) -> dict[str, Any]:
        """The bank's signals at an epoch's end, and the stage's start with the first epoch's."""
        out = bank_signals(self.bank, self.cfg)
        if epoch == 0 and self.start is not None:
            out["drift_start"] = self.start
        return out

    def warn(self, history: list[dict[str, Any]]) -> None:
        """Rank 0, after an epoch's record was logged: the rule's line on stderr when it starts to fire (once,
        not every epoch it holds)."""
        line = drift_warning(history) if self.master else None
        if line and not drift_warning(history[:-1]):
            # branches trained side by side share one terminal: the line names the run it is about
            print(
                line.replace("train.py: warning:", f"train.py: warning: {self.cfg.out} ({self.cfg.loss}):", 1),
                file=sys.stderr,
            )


class BankReport:
    """train.main's `report` for make demo's and the lab's runs (rank 0): each epoch's record gets what the bank
    knows (diagnostics.bank_report: it reads the ground truth, so it never feeds back into training) and the
    label-free signals; the warning's line when it starts to fire; then `then(epoch)` (the demo's progress)."""

    def __init__(self, cfg: "Config", then: Any = None) -> None:
        self.cfg, self.then, self.watch = cfg, then, None

    def __call__(self, record: dict[str, Any] | None, bank: "MemoryBank", dataset: Any, history: list) -> None:
        if record is None:  # before the first epoch: the bank the run starts from (a branch's: its warm-up's)
            self.watch = DriftWatch(bank, self.cfg, fresh=not history, master=True)
            return
        record.update(bank_report(bank, dataset.labels, dataset.faulty, self.cfg.tau_s, self.cfg.tau_t))
        record.update(self.watch.signals(record["epoch"]))
        self.watch.warn([*history, record])
        if self.then is not None:
            self.then(record["epoch"])
