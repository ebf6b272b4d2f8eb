"""Memory bank of target representations vbar_i, abar_i (paper Sec. 3 and 5.1, "Pretraining").

Following AVID and Wu et al.'s instance discrimination, the targets of eq. (1) [avid] are not the
encoder outputs but one slot per training instance, updated by an exponential moving average with
constant 0.5 after every step. The bank also gives the scores vbar_i . abar_i whose distribution
sets the weights of eq. (6) [weigths].

State lives in buffers, so a checkpoint of the module is the whole bank. Under DDP every rank holds
an identical replica: same seed at construction, and `update` all-gathers each rank's batch first.

Every slot is a file that decoded: the scan (tools/scan.py) refuses the others before training, and a
file that fails during training stops the run naming it (data.py). Tests: python -m pytest tests/test_memory_bank.py
"""

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


class MemoryBank(nn.Module):
    def __init__(self, num_items: int, dim: int = 128, momentum: float = 0.5, seed: int = 0) -> None:
        super().__init__()
        if num_items < 2:
            raise ValueError(f"MemoryBank needs at least 2 items to draw negatives from, got num_items={num_items}")
        self.num_items, self.dim, self.momentum = num_items, dim, momentum
        # A fixed seed, not the global RNG, so that every DDP rank starts from the same bank.
        g = torch.Generator().manual_seed(seed)
        self.register_buffer("video", F.normalize(torch.randn(num_items, dim, generator=g), dim=1))  # (N, D)
        self.register_buffer("audio", F.normalize(torch.randn(num_items, dim, generator=g), dim=1))  # (N, D)

    @torch.no_grad()
    def sample(self, idx: Tensor, num_negatives: int = 1024) -> Tensor:
        """Candidates for each sample: column 0 is idx itself, columns 1..K are drawn uniformly,
        with replacement, from the other N-1 items. idx: (B,) -> (B, 1+K) long."""
        idx = idx.to(self.video.device)
        # Draw from the N-1 other slots, then shift every draw at or above idx up by one: uniform over
        # the others without rejection sampling, and never the sample itself.
        neg = torch.randint(0, self.num_items - 1, (idx.shape[0], num_negatives), device=idx.device)  # (B, K)
        neg = neg + (neg >= idx[:, None]).long()  # (B, K)
        return torch.cat([idx[:, None], neg], dim=1)  # (B, 1+K)

    def targets(self, cand: Tensor) -> tuple[Tensor, Tensor]:
        """The bank rows at the candidates: cand (B, 1+K) -> vbar, abar, each (B, 1+K, D)."""
        # index_select copies whole rows; self.video[cand] gives the same tensor, element by element (slower)
        rows = cand.flatten()  # (B*(1+K),)
        return (
            self.video.index_select(0, rows).view(*cand.shape, -1),  # (B, 1+K, D)
            self.audio.index_select(0, rows).view(*cand.shape, -1),  # (B, 1+K, D)
        )

    def scores(self) -> Tensor:
        """vbar_i . abar_i for every item: (N,). Low scores flag likely faulty positives (Sec. 4.1)."""
        return (self.video * self.audio).sum(1)

    def score_stats(self, scores: Tensor) -> tuple[Tensor, Tensor]:
        """mu and sigma of eq. (6): the mean and standard deviation of the slots' scores (N,)."""
        return scores.mean(), scores.std()

    @torch.no_grad()
    def update(self, idx: Tensor, v: Tensor, a: Tensor) -> None:
        """AVID's EMA rule (ema_rows) for the batch's slots of both modalities.

        Call it after the step's loss and weights were computed from the old memory. Under DDP the
        indices and embeddings of every rank are gathered first, so all replicas apply the same
        update (the training loader drops the last partial batch, so every rank sends B rows).
        idx: (B,), v, a: (B, D)."""
        idx, v, a = idx.to(self.video.device), v.detach().float(), a.detach().float()
        if dist.is_initialized() and dist.get_world_size() > 1:
            idx, v, a = (all_gather_cat(t) for t in (idx, v, a))  # (W*B,), (W*B, D), (W*B, D)
        for bank, f in ((self.video, v), (self.audio, a)):
            bank[idx] = ema_rows(bank[idx], f, self.momentum)  # (B, D)


def ema_rows(rows: Tensor, features: Tensor, momentum: float) -> Tensor:
    """AVID's EMA rule for the rows of a batch: normalize(momentum m_i + (1 - momentum) f_i), each row to
    unit length. rows (the memories m_i), features (the encoder outputs f_i): (B, D) -> (B, D)."""
    return F.normalize(momentum * rows + (1 - momentum) * features, dim=1)


@torch.no_grad()
def faulty_auroc(bank: MemoryBank, faulty: Tensor) -> float | None:
    """How well the bank scores (which eq. (6)'s weights are monotone in) rank the known faulty positives below the
    clean ones: AUROC, 0.5 = no signal. The log's, never the step's. faulty: (N,) bool."""
    return scores_auroc(bank.scores().cpu(), faulty)


def scores_auroc(scores: Tensor, faulty: Tensor) -> float | None:
    """AUROC of low scores for the faulty (M,) among scores (M,); None when one kind is absent."""
    if faulty.all() or not faulty.any():
        return None
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(faulty.cpu().numpy(), -scores.cpu().numpy()))


def all_gather_cat(t: Tensor, group: dist.ProcessGroup | None = None) -> Tensor:
    """The same-shaped tensor `t` from every rank of `group` (default: all), concatenated in rank order."""
    out = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(out, t.contiguous(), group=group)
    return torch.cat(out, dim=0)
