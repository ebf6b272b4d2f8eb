"""What the bank's weights and soft targets would do, against the ground truth: evaluate.py's analysis
task (paper Sec. 5.2, Fig. 5; Sec. 4.2's faulty negatives).

    weight_analysis       the weights of eq. (6) from the bank's scores against the known faulty
                          positives: AUROC, precision at k, the mean weight of each group
    soft_target_analysis  the share of soft-target mass (eqs. (8)-(14)) on same-class candidates, per
                          strategy, beside the share expected by chance

    python evaluate.py analysis CKPT      # also draws Fig. 5's histogram (analysis/figures.py)

Tests: tests/test_evaluate.py
"""

from typing import Any

import torch
from torch import Tensor

from analysis.diagnostics import faulty_auroc
from config import Config
from losses import SOFT_TARGET_STRATEGIES, sample_weights, soft_targets
from memory_bank import MemoryBank


def weight_analysis(bank: MemoryBank, faulty: Tensor, cfg: Config) -> tuple[dict[str, Any], Tensor, Tensor, Tensor]:
    """How well do the weights of eq. (6) find the faulty positives? AUROC and precision at
    k = number of faulty instances, ranking by increasing weight."""
    mu, sigma = bank.score_stats(bank.scores())  # eq. (6)'s statistics
    scores = bank.scores().cpu()  # (N,)
    w = sample_weights(scores, float(mu), float(sigma), cfg.delta, cfg.kappa, cfg.w_min)
    k = int(faulty.sum())
    out = {
        "faulty_auroc": faulty_auroc(scores, faulty),
        "mean_weight": float(w.mean()),
        "mean_weight_faulty": float(w[faulty].mean()) if k else None,
        "mean_weight_clean": float(w[~faulty].mean()),
    }
    if k:
        out["faulty_precision_at_k"] = float(faulty[scores.argsort()[:k]].float().mean())
    return out, scores, w, faulty


@torch.no_grad()
def soft_target_analysis(
    bank: MemoryBank, labels: Tensor, cfg: Config, num_negatives: int | None = None, seed: int = 0
) -> dict[str, float]:
    """Share of soft-target mass S(j|i), j != i, on same-class candidates (faulty negatives), per
    strategy, and the share expected by chance (the same-class share of the candidates)."""
    torch.manual_seed(seed)
    idx = torch.arange(bank.num_items)
    cand = bank.sample(idx, num_negatives or min(cfg.num_negatives, bank.num_items - 1))  # (N, 1+K)
    vbar, abar = bank.targets(cand)  # (N, 1+K, D)
    same = (labels[cand] == labels[:, None]).float()[:, 1:]  # (N, K)
    out = {"chance": float(same.mean())}
    for strategy in SOFT_TARGET_STRATEGIES:
        S_v, _ = soft_targets(vbar, abar, strategy, lam=1.0, tau_s=cfg.tau_s, tau_t=cfg.tau_t, labels=labels[cand])
        neg = S_v[:, 1:]  # (N, K)
        out[strategy] = float((neg * same).sum() / neg.sum().clamp_min(1e-12))
    return out
