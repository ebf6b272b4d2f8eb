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

    bank_report      all three, over the bank's valid slots (files that decoded): what train.py logs

train.py logs these every epoch; they read labels and faults, so they never feed back into training.
Tests: python -m pytest tests/test_diagnostics.py
"""

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # for annotations only
    from memory_bank import MemoryBank


def faulty_auroc(scores: torch.Tensor, faulty: torch.Tensor) -> float | None:
    """AUROC of the bank scores (the weights are monotone in them) for telling faulty positives."""
    if faulty.all() or not faulty.any():
        return None
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(faulty.cpu().numpy(), -scores.cpu().numpy()))


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
        keep = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:max_items]
        video, audio, labels, faulty = video[keep], audio[keep], labels[keep], faulty[keep]
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


def bank_report(bank: "MemoryBank", labels: torch.Tensor, faulty: torch.Tensor) -> dict[str, Any]:
    """faulty_auroc and bank_structure of a memory_bank.MemoryBank, over its valid slots only (an
    excluded slot was never trained). labels, faulty: (N,) on the CPU -> dict."""
    valid = bank.valid.cpu()  # (N,)
    video, audio, scores = bank.video.cpu()[valid], bank.audio.cpu()[valid], bank.scores().cpu()[valid]  # (M, ...)
    return {
        "faulty_auroc": faulty_auroc(scores, faulty[valid]),
        "score_hist": score_histogram(scores, faulty[valid]),
        **bank_structure(video, audio, labels[valid], faulty[valid]),
    }
