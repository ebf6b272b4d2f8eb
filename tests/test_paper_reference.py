"""eqs. (6), (7)-(9), (13)-(14) and (17) written again from the paper's text, in float64 with plain Python
loops, and train.objective (the path a training step takes: bank -> candidates -> soft targets -> weights
-> loss) held to them (a bug ruled out before CCP's drift from a weak bank is called a property).

The reference reads nothing of losses.py or memory_bank.py's arithmetic: it takes the bank's rows as
numbers and follows the printed formulas, with the paper's names:
    P(t_j | s; tau) = exp(s . t_j / tau) / sum_k exp(s . t_k / tau)                       eq. (2)
    S_v(j|i) = rho(vbar_i . abar_i / tau_t + abar_i . vbar_j / tau_s + vbar_j . abar_j / tau_t)   eq. (13)
    S_a(j|i) = rho(abar_i . vbar_i / tau_t + vbar_i . abar_j / tau_s + abar_j . vbar_j / tau_t)   eq. (14)
    T_v(j|i) = (1 - lam) 1[i=j] + lam S_v(j|i), T_a likewise                               eqs. (8)-(9)
    L_i = -sum_j T_v(j|i) log P(abar_j | v_i; tau) - sum_j T_a(j|i) log P(vbar_j | a_i; tau)   eq. (7)
    w_i = t_w_min(C_N(abar_i . vbar_i; mu + delta sigma, kappa sigma^2))                  eq. (6)
    L = sum_i w_i L_i / sum_k w_k                                                          eq. (17)
and the gradient of eq. (17) by eq. (15), read with P(abar_j | v_i) inside the sum over j (the printed
P(abar_i | v_i) is a typo there, losses.soft_xid_loss says why), times w_i / sum_k w_k.

    python -m pytest tests/test_paper_reference.py
"""

import dataclasses
import math
import statistics

import pytest
import torch

import train
from losses import soft_targets
from test_wiring import setting


def dot(x, y):
    return sum(p * q for p, q in zip(x, y))


def rho(logits):
    """The softmax operator of eqs. (12)-(14)."""
    top = max(logits)
    e = [math.exp(z - top) for z in logits]
    return [x / sum(e) for x in e]


def posterior(s, targets, tau):
    """eq. (2): P(t_j | s; tau) for every candidate t_j."""
    return rho([dot(s, t) / tau for t in targets])


def ccp(i, cand, Vbar, Abar, tau_s, tau_t, swap_banks=False):
    """eqs. (13)-(14): (S_v(.|i), S_a(.|i)) over the candidates `cand` (instance numbers) of anchor i.
    swap_banks=True gives S_v from vbar_i . abar_j and S_a from abar_i . vbar_j (the bootstrap posteriors of
    eq. (10), the slip of querying with the wrong modality's memory), for the check that it would show."""
    vi, ai = Vbar[i], Abar[i]
    S_v = rho([dot(vi, ai) / tau_t + dot(ai, Vbar[j]) / tau_s + dot(Vbar[j], Abar[j]) / tau_t for j in cand])
    S_a = rho([dot(ai, vi) / tau_t + dot(vi, Abar[j]) / tau_s + dot(Abar[j], Vbar[j]) / tau_t for j in cand])
    return (S_a, S_v) if swap_banks else (S_v, S_a)


def normal_cdf(x, mean, variance):
    return 0.5 * (1 + math.erf((x - mean) / math.sqrt(2 * variance)))


def reference(v, a, idx, cand, Vbar, Abar, cfg, weighted, soft, swap_banks=False):
    """eq. (17) for the batch, in float64: (loss, per-sample L_i, w_i, T_v rows, T_a rows, dL/dv rows).
    v, a: encoder outputs per batch row; idx: the anchors' instance numbers; cand: each row's candidates."""
    scores = [dot(Abar[n], Vbar[n]) for n in range(len(Vbar))]  # abar_n . vbar_n over the whole bank
    mu, sigma = statistics.mean(scores), statistics.stdev(scores)  # the scores' sample mean and deviation
    L, W, TV, TA, P_V = [], [], [], [], []
    for b, i in enumerate(idx):
        one = [1.0 if j == i else 0.0 for j in cand[b]]  # 1[i=j] over instance numbers, as printed
        lam = cfg.lam if soft else 0.0  # lam = 0: eq. (7) is eq. (1), one-hot targets
        S_v, S_a = ccp(i, cand[b], Vbar, Abar, cfg.tau_s, cfg.tau_t, swap_banks) if soft else (one, one)
        T_v = [(1 - lam) * o + lam * s for o, s in zip(one, S_v)]  # eq. (8)
        T_a = [(1 - lam) * o + lam * s for o, s in zip(one, S_a)]  # eq. (9)
        P_v = posterior(v[b], [Abar[j] for j in cand[b]], cfg.tau)  # P(abar_j | v_i): the video side
        P_a = posterior(a[b], [Vbar[j] for j in cand[b]], cfg.tau)  # P(vbar_j | a_i): the audio side
        L.append(-sum(t * math.log(p) for t, p in zip(T_v, P_v)) - sum(t * math.log(p) for t, p in zip(T_a, P_a)))
        w = cfg.w_min + (1 - cfg.w_min) * normal_cdf(scores[i], mu + cfg.delta * sigma, cfg.kappa * sigma**2)
        W.append(w if weighted else 1.0)
        TV.append(T_v), TA.append(T_a), P_V.append(P_v)
    loss = sum(w * x for w, x in zip(W, L)) / sum(W)
    grad_v = []  # eq. (15) with the weights of eq. (17): dL/dv_i = -(w_i / sum w) (1/tau) sum_j abar_j (T_v - P)
    for b, _ in enumerate(idx):
        force = [0.0] * len(v[b])
        for col, j in enumerate(cand[b]):
            coef = (TV[b][col] - P_V[b][col]) / cfg.tau
            force = [f + coef * x for f, x in zip(force, Abar[j])]
        grad_v.append([-W[b] / sum(W) * f for f in force])
    return loss, L, W, TV, TA, grad_v


def project_and_reference(stage, swap_banks=False, flags=None):
    """train.objective on test_wiring's setting (scores spread: some anchors are faulty), and the reference
    on the very candidates the bank drew, the same float32 numbers read as float64."""
    v, a, idx, bank, cfg, truth = setting()
    if flags:
        cfg = dataclasses.replace(cfg, **flags)
    drawn = []
    sample = bank.sample
    bank.sample = lambda i, k: drawn.append(sample(i, k)) or drawn[-1]
    loss, stats = train.objective(v, a, idx, bank, cfg, stage, truth)
    loss.backward()
    ref = reference(
        v.detach().double().tolist(),
        a.detach().double().tolist(),
        idx.tolist(),
        drawn[0].tolist(),
        bank.video.double().tolist(),
        bank.audio.double().tolist(),
        cfg,
        weighted=stage in ("weighted", "robust"),
        soft=stage in ("soft", "robust"),
        swap_banks=swap_banks,
    )
    return loss, stats, v.grad, ref, cfg


PAPER = {"tau": 0.07, "tau_s": 0.02, "tau_t": 0.07, "lam": 0.5, "kappa": 0.5, "w_min": 0.25, "delta": -0.674}


@pytest.mark.parametrize("flags", [None, PAPER], ids=["distinct-knobs", "paper-values"])
@pytest.mark.parametrize("stage", ["xid", "weighted", "soft", "robust"])
def test_objective_matches_the_papers_equations_in_float64_loss_and_gradient(stage, flags):
    loss, stats, grad_v, (ref_loss, _, W, TV, TA, ref_grad), cfg = project_and_reference(stage, flags=flags)
    assert cfg.soft_targets == "ccp"
    assert loss.item() == pytest.approx(ref_loss, rel=2e-6)
    torch.testing.assert_close(grad_v.double(), torch.tensor(ref_grad, dtype=torch.float64), rtol=1e-4, atol=1e-6)
    # what the log says of the step is the reference's too: mean w_i, and the mass leaving the positive
    assert stats["weight"].item() == pytest.approx(statistics.mean(W), rel=1e-6)
    own = statistics.mean([0.5 * (tv[0] + ta[0]) for tv, ta in zip(TV, TA)])  # column 0 is the anchor itself
    assert stats["soft_mass"].item() == pytest.approx(1 - own, abs=1e-6)


def test_the_check_would_see_the_banks_swapped_and_the_weights_left_off_the_soft_part():
    """The match above is only as strong as its setting: the plausible slips differ by far more than its
    tolerance. Swapped banks: S_v from vbar_i . abar_j (the bootstrap posterior of eq. (10)) instead of
    abar_i . vbar_j. Weights off the soft part: Soft-xID's loss where Robust-xID's is asked for."""
    _, _, _, (ref_loss, L, W, *_), _ = project_and_reference("robust")
    swapped = project_and_reference("robust", swap_banks=True)[3][0]
    assert abs(swapped - ref_loss) > 1e3 * 2e-6 * abs(ref_loss)
    unweighted = statistics.mean(L)
    assert abs(unweighted - ref_loss) > 1e3 * 2e-6 * abs(ref_loss)
    assert max(W) - min(W) > 0.3  # the setting has faulty (low-score) anchors among its clean ones


def test_a_faulty_anchors_positive_keeps_what_eqs_13_14_give_it_and_no_special_case():
    """How CCP treats the target mass of a faulty (low-score) anchor, in the paper and in the code: its own
    term vbar_i . abar_i / tau_t is the same for every j and cancels in rho, so the anchor's score s_ii enters
    only through the candidate j = i, whose swapped and cycle terms are both s_ii:
        log S_v(i|i) / S_v(j|i) = s_ii / tau_s + s_ii / tau_t - abar_i . vbar_j / tau_s - s_jj / tau_t.
    A low s_ii moves S's mass off the positive to the other candidates; nothing else marks the anchor
    (its w_i then scales its whole soft-xID loss in eq. (17), checked above)."""
    _, _, idx, bank, cfg, _ = setting()
    cand = bank.sample(idx, cfg.num_negatives)  # (B, 1+K)
    S_v, S_a = soft_targets(*bank.targets(cand), "ccp", 1.0, cfg.tau_s, cfg.tau_t)  # lam = 1: T = S, (B, 1+K)
    Vbar, Abar = bank.video.double().tolist(), bank.audio.double().tolist()
    own = []
    for b, i in enumerate(idx.tolist()):
        s_ii = dot(Vbar[i], Abar[i])
        own.append((s_ii, S_v[b, 0].item()))
        for c, j in enumerate(cand[b].tolist()[1:], start=1):
            s_jj = dot(Vbar[j], Abar[j])
            odds_v = s_ii / cfg.tau_s + s_ii / cfg.tau_t - dot(Abar[i], Vbar[j]) / cfg.tau_s - s_jj / cfg.tau_t
            odds_a = s_ii / cfg.tau_s + s_ii / cfg.tau_t - dot(Vbar[i], Abar[j]) / cfg.tau_s - s_jj / cfg.tau_t
            assert math.log(S_v[b, 0] / S_v[b, c]) == pytest.approx(odds_v, abs=1e-3)
            assert math.log(S_a[b, 0] / S_a[b, c]) == pytest.approx(odds_a, abs=1e-3)
    own.sort()  # by the anchor's score: in this setting the lowest-score anchor keeps the least of S
    assert own[0][1] < own[-1][1]
