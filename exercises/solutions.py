"""Reference solutions of exercises/student.py, written out step by step as a student might. The
checker runs them in CI (tests/test_exercises.py), so that the exercises and the checker stay right.
Read them after trying: python -m exercises.check --solutions
"""

import math

import torch
import torch.nn.functional as F


def sample_weights(scores, mu, sigma, delta, kappa, w_min):
    mean, std = mu + delta * sigma, max(sigma * math.sqrt(kappa), 1e-12)  # the normal of eq. (6); finite at sigma 0
    cdf = 0.5 * (1 + torch.erf((scores - mean) / (std * math.sqrt(2))))  # (B,) C_N(s_i)
    return w_min + (1 - w_min) * cdf  # (B,) t_{w_min}


def ccp_similarity(vbar, abar, tau_s, tau_t):
    vi, ai = vbar[:, :1], abar[:, :1]  # (B, 1, D) the sample's own targets
    agree_i = (vi * ai).sum(-1)  # (B, 1)   vbar_i . abar_i
    agree_j = (vbar * abar).sum(-1)  # (B, 1+K) vbar_j . abar_j
    S_v = torch.softmax(agree_i / tau_t + (ai * vbar).sum(-1) / tau_s + agree_j / tau_t, dim=1)  # (B, 1+K)
    S_a = torch.softmax(agree_i / tau_t + (vi * abar).sum(-1) / tau_s + agree_j / tau_t, dim=1)  # (B, 1+K)
    return S_v, S_a


def ema_rows(rows, features, momentum):
    new = torch.empty_like(rows)
    for i, (m, f) in enumerate(zip(rows, features)):  # one memory slot at a time
        new[i] = F.normalize(momentum * m + (1 - momentum) * f, dim=0)
    return new


def xid_video_gradient(v, abar, tau):
    P = torch.softmax(torch.einsum("bd,bkd->bk", v, abar) / tau, dim=1)  # (B, 1+K) P(abar_j | v_i)
    expected = torch.einsum("bk,bkd->bd", P, abar)  # (B, D)   sum_j P_j abar_j
    return (expected - abar[:, 0]) / tau  # (B, D): attraction to abar_i, repulsion from the negatives
