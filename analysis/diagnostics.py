"""What the memory bank knows, measured against the ground truth: diagnostics for the log, not the method.

    faulty_auroc     how well the bank scores vbar_i . abar_i (which eq. (6) [weigths] weights by) rank
                     the known faulty positives below the clean ones: AUROC, 0.5 = no signal
    bank_structure   what the memories have learned about the data: the leave-one-out 1-NN class
                     accuracy of the video memories (a proxy for the video encoder's features), the
                     cross-modal class agreement (do a video memory's nearest audio memories belong to its
                     class?), and instance retrieval across modalities (is a clean instance's own audio
                     memory the nearest to its video memory?)

    score_histogram  the bank scores of clean and of faulty positives on one grid: the picture of the
                     weights finding the faults as training goes (figures.scores_over_training)
    soft_target_share  the share of CCP's soft-target mass S(j|i), eqs. (13)-(14), that falls on
                     candidates of the anchor's class (the faulty negatives), beside the oracle's and
                     chance: the picture of the soft targets working (figures.soft_targets_over_training)

    bank_report      all four, over the bank's slots: what make demo's runs log
                     (analysis/drift.BankReport, the report they pass train.main)

Make demo's runs log these every epoch; they read labels and faults, so they never feed back into training.
Tests: python -m pytest tests/test_diagnostics.py
"""

from typing import TYPE_CHECKING, Any

import torch

from losses import soft_targets
from memory_bank import scores_auroc

if TYPE_CHECKING:  # for annotations only
    from memory_bank import MemoryBank


def some_slots(n: int, max_items: int, seed: int = 0) -> torch.Tensor:
    """A fixed random subset of `max_items` of n slots, from a generator of its own: the same slots every
    epoch, and training's random stream left as it was. -> (max_items,) long"""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:max_items]


def draw_candidates(n: int, max_items: int, num_negatives: int, seed: int = 0) -> torch.Tensor:
    """Candidates as MemoryBank.sample draws them, from a generator of its own: at most `max_items`
    anchors, each in column 0 with `num_negatives` others drawn uniformly with replacement, never itself.
    -> (A, 1+K) long"""
    g = torch.Generator().manual_seed(seed)
    anchors = torch.randperm(n, generator=g)[:max_items]  # (A,)
    neg = torch.randint(0, n - 1, (len(anchors), num_negatives), generator=g)  # (A, K)
    return torch.cat([anchors[:, None], neg + (neg >= anchors[:, None]).long()], 1)  # (A, 1+K)


def soft_targets_at(
    video: torch.Tensor,
    audio: torch.Tensor,
    cand: torch.Tensor,
    strategy: str,
    tau_s: float,
    tau_t: float,
    labels: torch.Tensor | None = None,
    chunk: int = 16,
) -> tuple[torch.Tensor, torch.Tensor]:
    """losses.soft_targets at lam = 1 for candidates cand (A, 1+K) of the memories video, audio (N, D) ->
    S_v, S_a (A, 1+K). Taken `chunk` anchors at a time: the same rows bit for bit (each row is its own),
    without the (A, 1+K, D) copies of the bank (67 MB each at 512 x 257 x 128), which cost 5x the time."""
    parts = []
    for c in cand.split(chunk):  # (<=chunk, 1+K)
        vbar, abar = (m.index_select(0, c.flatten()).view(*c.shape, -1) for m in (video, audio))  # (c, 1+K, D)
        at = labels[c] if labels is not None else None
        parts.append(soft_targets(vbar, abar, strategy, lam=1.0, tau_s=tau_s, tau_t=tau_t, labels=at))
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


def faulty_auroc(scores: torch.Tensor, faulty: torch.Tensor) -> float | None:
    """AUROC of the bank scores (the weights are monotone in them) for telling faulty positives: train.py's."""
    return scores_auroc(scores, faulty)


@torch.no_grad()
def bank_structure(
    video: torch.Tensor,
    audio: torch.Tensor,
    labels: torch.Tensor,
    faulty: torch.Tensor,
    k: int = 5,
    max_items: int = 4096,
    seed: int = 0,
) -> dict[str, float]:
    """video, audio (N, D) unit-norm memories, labels (N,), faulty (N,) bool. On at most `max_items`
    slots (a fixed random subset for a large bank) -> dict of shares in [0, 1]:
    knn_class   the nearest other video memory has the same class (leave-one-out 1-NN);
    xmodal_class  share of each video memory's k nearest audio memories (its own excluded) of its class;
    own_audio   a clean instance's own audio memory is the nearest to its video memory (chance 1/N);
    own_audio_faulty  the same for the faulty positives: above chance, xID has memorised their pairs."""
    n = video.shape[0]
    if n > max_items:
        subset = some_slots(n, max_items, seed)  # (max_items,)
        video, audio, labels, faulty = video[subset], audio[subset], labels[subset], faulty[subset]
        n = max_items
    video, audio, labels, faulty = video.float().cpu(), audio.float().cpu(), labels.cpu(), faulty.cpu()
    eye = torch.eye(n, dtype=torch.bool)
    vv = (video @ video.T).masked_fill(eye, -2.0)  # (N, N) video-video similarity, self left out
    same = labels[:, None] == labels[None, :]  # (N, N)
    knn_class = same[torch.arange(n), vv.argmax(1)].float().mean()
    va = video @ audio.T  # (N, N): row i, video memory i against every audio memory
    own = va.argmax(1) == torch.arange(n)  # (N,)
    nearest = va.masked_fill(eye, -2.0).topk(min(k, n - 1), dim=1).indices  # (N, k) other instances' audio
    xmodal_class = same.gather(1, nearest).float().mean()
    clean = ~faulty
    return {
        "knn_class": float(knn_class),
        "xmodal_class": float(xmodal_class),
        "own_audio": float(own[clean].float().mean()) if clean.any() else None,
        "own_audio_faulty": float(own[faulty].float().mean()) if faulty.any() else None,
    }


def score_histogram(scores: torch.Tensor, faulty: torch.Tensor, bins: int = 40) -> dict[str, Any]:
    """Counts of clean and faulty scores on `bins` equal bins over [mu - 4 sigma, mu + 4 sigma] (cut to
    the scores' range): {lo, hi, clean, faulty}, small enough for one log line per epoch."""
    s = scores.float().cpu()
    mu, sigma = float(s.mean()), float(s.std()) if len(s) > 1 else 0.0
    lo, hi = max(float(s.min()), mu - 4 * sigma), min(float(s.max()), mu + 4 * sigma)
    if hi <= lo:
        lo, hi = lo - 1e-3, hi + 1e-3

    def count(x: torch.Tensor) -> list[int]:  # values out of [lo, hi] are not counted
        return torch.histc(x, bins=bins, min=lo, max=hi).int().tolist()

    return {"lo": lo, "hi": hi, "clean": count(s[~faulty]), "faulty": count(s[faulty])}


@torch.no_grad()
def soft_target_share(
    video: torch.Tensor,
    audio: torch.Tensor,
    labels: torch.Tensor,
    strategies: tuple[str, ...] = ("ccp", "oracle"),
    num_negatives: int = 256,
    tau_s: float = 0.02,
    tau_t: float = 0.07,
    max_items: int = 512,
    seed: int = 0,
) -> dict[str, float]:
    """video, audio (N, D) unit-norm memories, labels (N,). For at most `max_items` anchors, each with
    `num_negatives` other candidates drawn uniformly: the share of each strategy's S(j|i), j != i (lam 1,
    eqs. (10)-(14)), on candidates of the anchor's class, and `chance`, the same-class share of the
    candidates. The share pools the mass of every anchor (an anchor whose S(i|i) leaves little to
    the others weighs less) and reads the video side, S_v, of eqs. (8)-(14). The draws use a generator
    of their own, so logging this leaves training's random stream, and with it every number of the
    run, as it was. evaluate.py's analysis (analysis/weights.py) reports the same share over the whole
    bank with the run's K, for every strategy."""
    video, audio, labels = video.float().cpu(), audio.float().cpu(), labels.cpu()
    cand = draw_candidates(video.shape[0], max_items, num_negatives, seed)  # (A, 1+K)
    same = (labels[cand[:, 1:]] == labels[cand[:, :1]]).float()  # (A, K)
    out = {"chance": float(same.mean())}
    for strategy in strategies:
        S_v, _ = soft_targets_at(video, audio, cand, strategy, tau_s, tau_t, labels)  # (A, 1+K)
        mass = S_v[:, 1:]  # (A, K): what the anchor's target gives the other candidates
        out[strategy] = float((mass * same).sum() / mass.sum().clamp_min(1e-12))
    return out


def bank_report(
    bank: "MemoryBank", labels: torch.Tensor, faulty: torch.Tensor, tau_s: float = 0.02, tau_t: float = 0.07
) -> dict[str, Any]:
    """faulty_auroc, bank_structure and soft_target_share of a memory_bank.MemoryBank.
    labels, faulty: (N,) on the CPU -> dict."""
    video, audio, scores = bank.video.cpu(), bank.audio.cpu(), bank.scores().cpu()  # (N, D), (N, D), (N,)
    return {
        "faulty_auroc": faulty_auroc(scores, faulty),
        "score_hist": score_histogram(scores, faulty),
        **bank_structure(video, audio, labels, faulty),
        "soft_share": soft_target_share(video, audio, labels, tau_s=tau_s, tau_t=tau_t),
    }
