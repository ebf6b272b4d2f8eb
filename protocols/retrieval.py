"""Retrieval, the paper's first downstream protocol (Sec. 5.1, Table 4; Fig. 11): test videos query the
train split by Euclidean distance between their last conv feature maps (averaged over 10 clips:
protocols/features.py); R@k is the share of queries with a video of their class among the k nearest.

    .venv/bin/python evaluate.py retrieval CKPT --data UCF101 --layout ucf101 --fold 1    # runs it

Tests: tests/test_evaluate.py
"""

from collections.abc import Sequence

import torch
from torch import Tensor

from config import resolve_device


def recall_at_k(
    query: Tensor,
    query_labels: Tensor,
    gallery: Tensor,
    gallery_labels: Tensor,
    ks: Sequence[int] = (1, 5, 20),
    device: torch.device | None = None,
    chunk: int = 1024,
) -> tuple[dict[int, float], Tensor]:
    """R@k by Euclidean distance (Fig. 11): the share of queries with a same-label video among their
    k nearest. Returns ({k: R@k}, per-query indices of the nearest max(ks) gallery videos)."""
    device = device or resolve_device(say=False)
    g = gallery.float().to(device)  # (G, F)
    gl = gallery_labels.to(device)
    kmax = min(max(ks), g.shape[0])
    hits, nearest = [], []
    for q, ql in zip(query.split(chunk), query_labels.split(chunk)):
        dist = torch.cdist(q.float().to(device), g)  # (Q, G)
        top = dist.topk(kmax, dim=1, largest=False).indices  # (Q, kmax), nearest first
        hits.append((gl[top] == ql.to(device)[:, None]).cpu())  # (Q, kmax)
        nearest.append(top.cpu())
    hits = torch.cat(hits)
    return {k: float(hits[:, :k].any(1).float().mean()) for k in ks}, torch.cat(nearest)
