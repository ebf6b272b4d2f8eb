"""The Robust-xID objective as pure functions: the paper's Sections 3-4, one function per equation.
Equation numbers are the ones printed in the paper; the LaTeX source's labels are in brackets.

    xid_loss         eqs. (1)-(2) [avid]    cross-modal instance discrimination against bank targets
    soft_targets     eqs. (8)-(14) [bts-trg] T = (1 - lam) onehot + lam S; S by bootstrapping (10),
                                            swapped (11), neighbour (12), CCP (13)-(14) or oracle labels
    ccp_similarity   eqs. (13)-(14)         CCP's softening scores S, which soft_targets mixes into T
    soft_xid_loss    eq. (7) [soft-xID]     cross-entropy against the soft targets
    sample_weights   eq. (6) [weigths]      down-weight likely faulty positives from the bank scores
    weighted_mean    eq. (5) [wavid]        sum_i w_i L_i / sum_i w_i
    robust_xid_loss  eq. (17) [loss]        the paper's objective: weighted mean of the (soft) xID loss

`VARIANTS` names the methods of the paper's Table 2 and Fig. 7 by the two switches of eq. (17): which
weights (none, eq. (6), or the oracle's 0/1 of Sec. 5.2) and whether the targets are soft.

Notation (as in the paper): B samples, K negatives, D embedding size. `v`, `a` (B, D) are the
unit-norm encoder outputs v_i = f_v(v_i), a_i = f_a(a_i). `vbar`, `abar` (B, 1+K, D) are memory-bank
targets for each sample's candidates: column 0 is the sample itself, columns 1..K its negatives,
and vbar[:, j], abar[:, j] belong to the same candidate instance.

Nothing here holds state, touches a device or casts: each function computes in its inputs' dtype, so
torch.autograd.gradcheck runs on them in float64 (tests/test_gradients.py). train.py's objective hands them
float32 (a softmax over 1+K logits at temperature 0.02-0.07 loses most of its precision in bf16/fp16).
tests/test_losses.py checks the equations (python -m pytest tests/test_losses.py tests/test_gradients.py).
"""

import math
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor

SOFT_TARGET_STRATEGIES = ("bootstrap", "swapped", "neighbor", "ccp", "oracle")


@dataclass(frozen=True)
class Variant:
    """One method as the paper's tables name it: the switches of eq. (17)."""

    name: str
    weights: str  # "none" (w_i = 1), "scores" (eq. (6) from the bank scores), "oracle" (0 on injected faults)
    soft: bool  # soft targets T of eqs. (8)-(9) instead of one-hot


VARIANTS = {  # the --loss choices of train.py; demo.py and the tests use the same table
    "xid": Variant("xID", "none", False),
    "weighted": Variant("Weighted-xID", "scores", False),
    "oracle": Variant("Oracle-xID", "oracle", False),
    "soft": Variant("Soft-xID", "none", True),
    "robust": Variant("Robust-xID", "scores", True),
}


def candidate_dot(s: Tensor, tbar: Tensor) -> Tensor:
    """s_i . tbar_{i,j} for every candidate j: (B, D), (B, 1+K, D) -> (B, 1+K)."""
    return torch.einsum("bd,bkd->bk", s, tbar)  # (B, 1+K)


def log_posterior(s: Tensor, tbar: Tensor, tau: float) -> Tensor:
    """log P(tbar_j | s_i; tau), eq. (2) [avid2]: a softmax over the 1+K candidates. -> (B, 1+K)"""
    return torch.log_softmax(candidate_dot(s, tbar) / tau, dim=1)  # (B, 1+K)


def xid_loss(v: Tensor, a: Tensor, vbar: Tensor, abar: Tensor, tau: float = 0.07) -> Tensor:
    """eq. (1) [avid]: L_xID(v_i, a_i) = -log P(abar_i | v_i; tau) - log P(vbar_i | a_i; tau). -> (B,)

    The positive is column 0 of the candidates, so this is cross-entropy with target 0."""
    logp_v = log_posterior(v, abar, tau)  # (B, 1+K): video queries the audio targets
    logp_a = log_posterior(a, vbar, tau)  # (B, 1+K): audio queries the video targets
    return -(logp_v[:, 0] + logp_a[:, 0])  # (B,)


@torch.no_grad()
def soft_targets(
    vbar: Tensor,
    abar: Tensor,
    strategy: str,
    lam: float = 0.5,
    tau_s: float = 0.02,
    tau_t: float = 0.07,
    labels: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """eqs. (8)-(9) [bts-trg-v/a]: T(j|i) = (1 - lam) 1[i=j] + lam S(j|i), with S from Sec. 4.2:
    bootstrap eq. (10), swapped eq. (11), neighbor eq. (12), ccp eqs. (13)-(14), oracle (Table 1).

    Only memory-bank targets enter S (vbar_i = vbar[:, 0], abar_i = abar[:, 0]), never the encoder
    outputs, so the targets carry no gradient. `labels` (B, 1+K) is used by "oracle" alone.
    Returns (T_v, T_a), each (B, 1+K) with rows summing to 1.
    """
    if strategy not in SOFT_TARGET_STRATEGIES:
        raise ValueError(f"soft target strategy {strategy!r}: expected one of {SOFT_TARGET_STRATEGIES}")
    vbar_i, abar_i = vbar[:, 0], abar[:, 0]  # (B, D) each: the sample's own targets
    if strategy == "bootstrap":  # eq. (10): each modality's own posterior, made peakier by tau_s
        S_v = torch.softmax(candidate_dot(vbar_i, abar) / tau_s, dim=1)  # P(abar_j | vbar_i): (B, 1+K)
        S_a = torch.softmax(candidate_dot(abar_i, vbar) / tau_s, dim=1)  # P(vbar_j | abar_i): (B, 1+K)
    elif strategy == "swapped":  # eq. (11): the opposite modality's posterior
        S_v = torch.softmax(candidate_dot(abar_i, vbar) / tau_s, dim=1)  # P(vbar_j | abar_i): (B, 1+K)
        S_a = torch.softmax(candidate_dot(vbar_i, abar) / tau_s, dim=1)  # P(abar_j | vbar_i): (B, 1+K)
    elif strategy == "neighbor":  # eq. (12): within-modal similarity
        S_v = torch.softmax(candidate_dot(vbar_i, vbar) / tau_s, dim=1)  # (B, 1+K)
        S_a = torch.softmax(candidate_dot(abar_i, abar) / tau_s, dim=1)  # (B, 1+K)
    elif strategy == "ccp":  # eqs. (13)-(14): swapped prediction, favouring candidates that correspond well
        S_v, S_a = ccp_similarity(vbar, abar, tau_s, tau_t)  # (B, 1+K) each
    else:  # "oracle" (Table 1): uniform over the candidates of the sample's own class (uses labels).
        # This project's reading: Sec. 5.3 makes T itself uniform over same-class instances; here that uniform
        # distribution is S, mixed with lam like every other strategy (lam = 1 gives the paper's T), so
        # that Table 1's rows differ in S alone
        if labels is None:
            raise ValueError("soft target strategy 'oracle' needs labels (B, 1+K)")
        same = (labels == labels[:, :1]).to(vbar.dtype)  # (B, 1+K); column 0 is always 1
        S_v = S_a = same / same.sum(1, keepdim=True)  # (B, 1+K)
    one_hot = torch.zeros_like(S_v)
    one_hot[:, 0] = 1.0  # the instance itself is the vanilla xID target
    T_v = (1 - lam) * one_hot + lam * S_v  # (B, 1+K)
    T_a = (1 - lam) * one_hot + lam * S_a  # (B, 1+K)
    return T_v, T_a


def ccp_similarity(vbar: Tensor, abar: Tensor, tau_s: float, tau_t: float) -> tuple[Tensor, Tensor]:
    """eqs. (13)-(14), cycle consistent prediction: the swapped prediction, favouring candidates whose two
    memories correspond well.

        S_v(j|i) = softmax_j(vbar_i.abar_i / tau_t + abar_i.vbar_j / tau_s + vbar_j.abar_j / tau_t)
        S_a(j|i) = the same with vbar_i.abar_j in the middle term

    vbar, abar (B, 1+K, D), column 0 the sample itself. -> (S_v, S_a), each (B, 1+K), rows summing to 1."""
    vbar_i, abar_i = vbar[:, 0], abar[:, 0]  # (B, D) each
    self_i = (vbar_i * abar_i).sum(1, keepdim=True)  # vbar_i . abar_i: (B, 1)
    self_j = (vbar * abar).sum(2)  # vbar_j . abar_j: (B, 1+K)
    # self_i / tau_t is the same for every j and cancels in the softmax; kept to match the paper.
    S_v = torch.softmax(self_i / tau_t + candidate_dot(abar_i, vbar) / tau_s + self_j / tau_t, dim=1)
    S_a = torch.softmax(self_i / tau_t + candidate_dot(vbar_i, abar) / tau_s + self_j / tau_t, dim=1)
    return S_v, S_a


def soft_xid_loss(
    v: Tensor, a: Tensor, vbar: Tensor, abar: Tensor, T_v: Tensor, T_a: Tensor, tau: float = 0.07
) -> Tensor:
    """eq. (7) [soft-xID]: -sum_j T_v(j|i) log P(abar_j|v_i) - sum_j T_a(j|i) log P(vbar_j|a_i). -> (B,)

    Its gradient is eq. (15) [update_rxid_1], but for the posterior inside the sum: printed with the index
    i, it must be each candidate's, index j. Autograd computes the latter, and tests/test_losses.py checks
    it against the forces written out. With one-hot T this is exactly xid_loss."""
    logp_v = log_posterior(v, abar, tau)  # (B, 1+K)
    logp_a = log_posterior(a, vbar, tau)  # (B, 1+K)
    return -(T_v * logp_v).sum(1) - (T_a * logp_a).sum(1)  # (B,)


def sample_weights(
    scores: Tensor, mu: Tensor | float, sigma: Tensor | float, delta: float, kappa: float = 0.5, w_min: float = 0.25
) -> Tensor:
    """eq. (6) [weigths]: w_i = t_{w_min}(C_N(s_i; mu + delta sigma, kappa sigma^2)).

    C_N is the CDF of a normal with mean mu + delta*sigma and variance kappa*sigma^2, and
    t_{w_min}(x) = w_min + (1 - w_min) x keeps low-score (likely faulty) positives at w_min > 0.
    `scores` are bank scores vbar_i . abar_i; mu, sigma their mean and standard deviation over the
    whole bank (MemoryBank.scores()). delta moves the midpoint, kappa sets how fast w rises.
    Returns weights of the shape of `scores`, in [w_min, 1], increasing with the score."""
    scores = torch.as_tensor(scores)
    z = (scores - mu - delta * sigma) / (sigma * math.sqrt(kappa) + 1e-12)
    return w_min + (1 - w_min) * torch.special.ndtr(z)


def weighted_mean(losses: Tensor, weights: Tensor) -> Tensor:
    """eq. (5) [wavid]: sum_i w_i L_i / sum_i w_i over the batch. -> scalar

    Weights are constants (they come from the memory bank or the ground truth): no gradient flows
    into them. All-ones weights give the plain mean. A batch whose weights are all 0 (the oracle's,
    when every sample in it is an injected fault) gives 0 and no gradient, not 0/0.

    Under DDP the batch is the global one: the denominator is the sum of weights over every rank,
    and the numerator is scaled by the world size because DDP averages the ranks' gradients. The
    gradient then equals the single-process gradient of eq. (5) over the whole batch, even when the
    ranks' sums of weights differ (they do whenever one rank holds more likely-faulty positives).
    Each rank's returned value is its share; their mean over ranks is the global eq. (5)."""
    weights = weights.detach().to(losses.dtype)
    numerator, denominator = (weights * losses).sum(), weights.sum()
    if dist.is_initialized() and dist.get_world_size() > 1:
        denominator = denominator.clone()
        dist.all_reduce(denominator)  # sum_k w_k over the global batch
        numerator = numerator * dist.get_world_size()  # DDP divides the summed gradients by the world size
    return numerator / denominator.clamp_min(1e-12)


def robust_xid_loss(
    v: Tensor,
    a: Tensor,
    vbar: Tensor,
    abar: Tensor,
    weights: Tensor | None = None,
    targets: tuple[Tensor, Tensor] | None = None,
    tau: float = 0.07,
) -> tuple[Tensor, Tensor]:
    """eq. (17) [loss]: L = sum_i w_i L_Soft-xID(v_i, a_i) / sum_k w_k. -> (scalar, per-sample (B,))

    The two switches of the paper's Table 2: `weights` (B,) are the w_i (None: all ones, no
    weighting), `targets` = (T_v, T_a) are the soft targets (None: one-hot, i.e. L_xID of eq. (1)).
    Neither switch: xID. Weights only: Weighted-xID, eq. (5). Targets only: Soft-xID, eq. (7).
    Both: Robust-xID."""
    if targets is None:
        per_sample = xid_loss(v, a, vbar, abar, tau)  # (B,)
    else:
        per_sample = soft_xid_loss(v, a, vbar, abar, *targets, tau=tau)  # (B,)
    if weights is None:
        weights = torch.ones_like(per_sample)
    return weighted_mean(per_sample, weights), per_sample
