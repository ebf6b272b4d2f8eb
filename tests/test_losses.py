"""Invariants of losses.py: gradients against the paper's analytic forces, limits, target rows."""

import pytest
import torch
import torch.nn.functional as F

from losses import (
    SOFT_TARGET_STRATEGIES,
    VARIANTS,
    robust_xid_loss,
    sample_weights,
    soft_targets,
    soft_xid_loss,
    weighted_mean,
    xid_loss,
)

B, K, D = 6, 9, 16


def unit(*shape):
    return F.normalize(torch.randn(*shape, dtype=torch.float64), dim=-1)


def batch(labels=False):
    v, a = unit(B, D).requires_grad_(), unit(B, D).requires_grad_()
    vbar, abar = unit(B, 1 + K, D), unit(B, 1 + K, D)
    lab = torch.randint(0, 3, (B, 1 + K))
    return v, a, vbar, abar, lab


@pytest.mark.parametrize("strategy", SOFT_TARGET_STRATEGIES + ("one-hot",))
def test_soft_xid_gradient_matches_the_analytic_forces(strategy):
    # -dL/dv_i = (1/tau) sum_j abar_j (T_v(j|i) - P(abar_j|v_i)), and the audio twin (Sec. 4.2).
    v, a, vbar, abar, lab = batch()
    tau = 0.07
    if strategy == "one-hot":  # xID: the attraction/repulsion form of eqs. (3)-(4) [update_avid]
        T_v = T_a = F.one_hot(torch.zeros(B, dtype=torch.long), 1 + K).double()
    else:
        T_v, T_a = soft_targets(vbar, abar, strategy, lam=0.5, labels=lab)
    loss = soft_xid_loss(v, a, vbar, abar, T_v, T_a, tau=tau)
    gv, ga = torch.autograd.grad(loss.sum(), (v, a))
    with torch.no_grad():
        P_v = torch.softmax(torch.einsum("bd,bkd->bk", v, abar) / tau, 1)  # P(abar_j | v_i)
        P_a = torch.softmax(torch.einsum("bd,bkd->bk", a, vbar) / tau, 1)  # P(vbar_j | a_i)
        force_v = torch.einsum("bk,bkd->bd", T_v - P_v, abar) / tau
        force_a = torch.einsum("bk,bkd->bd", T_a - P_a, vbar) / tau
    # losses.py computes in its inputs' float64, so the forces agree to float64's rounding
    torch.testing.assert_close(-gv, force_v, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(-ga, force_a, rtol=1e-10, atol=1e-10)
    if strategy == "one-hot":  # attraction (1 - P(abar_i|v_i)) abar_i / tau minus repulsion
        attraction = (1 - P_v[:, :1]) * abar[:, 0] / tau
        repulsion = (P_v[:, 1:, None] * abar[:, 1:]).sum(1) / tau
        torch.testing.assert_close(-gv, attraction - repulsion, rtol=1e-10, atol=1e-10)


def test_xid_is_cross_entropy_on_column_zero():
    v, a, vbar, abar, _ = batch()
    tau = 0.1
    ref = F.cross_entropy(
        torch.einsum("bd,bkd->bk", v, abar) / tau, torch.zeros(B, dtype=torch.long), reduction="none"
    ) + F.cross_entropy(torch.einsum("bd,bkd->bk", a, vbar) / tau, torch.zeros(B, dtype=torch.long), reduction="none")
    torch.testing.assert_close(xid_loss(v, a, vbar, abar, tau=tau).double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("strategy", ["bootstrap", "swapped", "neighbor", "ccp", "oracle"])
def test_lambda_zero_gives_xid_exactly(strategy):
    v, a, vbar, abar, lab = batch()
    T_v, T_a = soft_targets(vbar, abar, strategy, lam=0.0, labels=lab)
    assert torch.equal(soft_xid_loss(v, a, vbar, abar, T_v, T_a), xid_loss(v, a, vbar, abar))


@pytest.mark.parametrize("strategy", SOFT_TARGET_STRATEGIES)
def test_target_rows_are_distributions_without_gradient(strategy):
    _, _, vbar, abar, lab = batch()
    vbar.requires_grad_(), abar.requires_grad_()
    T_v, T_a = soft_targets(vbar, abar, strategy, lam=0.5, labels=lab)
    for T in (T_v, T_a):
        assert T.shape == (B, 1 + K) and not T.requires_grad
        assert (T >= 0).all()
        torch.testing.assert_close(T.sum(1), torch.ones(B, dtype=T.dtype))
        assert (T[:, 0] >= 0.5 - 1e-6).all()  # (1 - lam) stays on the instance itself


def test_soft_strategies_are_the_paper_posteriors():
    _, _, vbar, abar, _ = batch()
    tau_s, tau_t = 0.02, 0.07
    vi, ai = vbar[:, 0], abar[:, 0]
    p_a_given_v = torch.softmax(torch.einsum("bd,bkd->bk", vi, abar) / tau_s, 1)  # P(abar_j|vbar_i)
    p_v_given_a = torch.softmax(torch.einsum("bd,bkd->bk", ai, vbar) / tau_s, 1)  # P(vbar_j|abar_i)

    def S(strat):
        return soft_targets(vbar, abar, strat, lam=1.0, tau_s=tau_s, tau_t=tau_t)  # lam=1: T = S

    torch.testing.assert_close(S("bootstrap"), (p_a_given_v, p_v_given_a))
    torch.testing.assert_close(S("swapped"), (p_v_given_a, p_a_given_v))
    self_j = (vbar * abar).sum(2)
    ccp_v = torch.softmax(torch.einsum("bd,bkd->bk", ai, vbar) / tau_s + self_j / tau_t, 1)
    torch.testing.assert_close(S("ccp")[0], ccp_v)
    nb_a = torch.softmax(torch.einsum("bd,bkd->bk", ai, abar) / tau_s, 1)
    torch.testing.assert_close(S("neighbor")[1], nb_a)


def test_ccp_prefers_negatives_that_correspond_well():
    # Two negatives equally similar to abar_i; the one whose own vbar_j . abar_j is high gets more mass.
    D2 = 4
    e = torch.eye(D2)
    vbar = torch.stack([e[0], e[1], e[1]])[None]  # (1, 3, D)
    abar = torch.stack([e[0], e[1], -e[1]])[None]  # candidate 1 corresponds, candidate 2 does not
    T_v, _ = soft_targets(vbar, abar, "ccp", lam=1.0)
    assert T_v[0, 1] > 10 * T_v[0, 2]
    T_swap, _ = soft_targets(vbar, abar, "swapped", lam=1.0)
    torch.testing.assert_close(T_swap[0, 1], T_swap[0, 2])  # swapped prediction cannot tell them apart


def test_oracle_is_uniform_over_same_label_candidates():
    _, _, vbar, abar, _ = batch()
    lab = torch.tensor([[2, 2, 1, 2, 0, 1, 1, 0, 2, 0]] * B)
    T_v, T_a = soft_targets(vbar, abar, "oracle", lam=1.0, labels=lab)
    expected = (lab == 2).double() / 4  # in the bank targets' float64
    torch.testing.assert_close(T_v, expected)
    torch.testing.assert_close(T_a, expected)
    with pytest.raises(ValueError, match="labels"):
        soft_targets(vbar, abar, "oracle")
    with pytest.raises(ValueError, match="strategy"):
        soft_targets(vbar, abar, "nope")


def test_weights_lie_in_range_and_rise_with_the_score():
    s = torch.linspace(-1, 1, 201)
    w = sample_weights(s, mu=s.mean(), sigma=s.std(), delta=0.0, kappa=0.5, w_min=0.25)
    assert (w >= 0.25).all() and (w <= 1).all()
    assert (w.diff() >= 0).all() and w[-1] - w[0] > 0.7
    # midpoint at mu + delta sigma: the weight there is halfway between w_min and 1
    w_mid = sample_weights(torch.tensor([0.3 + 1.5 * 0.2]), mu=0.3, sigma=0.2, delta=1.5)
    torch.testing.assert_close(w_mid, torch.tensor([0.25 + 0.75 * 0.5]))
    # one sigma*sqrt(kappa) above the midpoint is Phi(1) = 0.8413
    w_up = sample_weights(torch.tensor([0.3 + 0.2 * 0.5**0.5]), mu=0.3, sigma=0.2, delta=0.0, kappa=0.5)
    torch.testing.assert_close(w_up, torch.tensor([0.25 + 0.75 * 0.841345]), rtol=1e-5, atol=1e-5)


def test_weighted_mean_is_eq5():
    L = torch.tensor([1.0, 2.0, 4.0])
    assert weighted_mean(L, torch.ones(3)) == pytest.approx(7 / 3)
    assert weighted_mean(L, torch.tensor([1.0, 0.0, 1.0])) == pytest.approx(2.5)
    assert weighted_mean(L, torch.tensor([0.5, 0.5, 0.5])) == pytest.approx(7 / 3)  # scale-free
    L = L.requires_grad_()
    zero = weighted_mean(L, torch.zeros(3))  # an all-faulty batch under the oracle: nothing to learn, no NaN
    zero.backward()
    assert zero.item() == 0.0 and torch.equal(L.grad, torch.zeros(3))


def test_robust_xid_loss_switches_give_the_four_methods_of_table_2():
    v, a, vbar, abar, _ = batch()
    w = torch.rand(v.shape[0]) + 0.1
    T = soft_targets(vbar.detach(), abar.detach(), "ccp")
    xid = xid_loss(v, a, vbar, abar)
    soft = soft_xid_loss(v, a, vbar, abar, *T)
    torch.testing.assert_close(robust_xid_loss(v, a, vbar, abar)[0], xid.mean())  # xID
    torch.testing.assert_close(robust_xid_loss(v, a, vbar, abar, w)[0], (w * xid).sum() / w.sum())  # Weighted
    torch.testing.assert_close(robust_xid_loss(v, a, vbar, abar, None, T)[0], soft.mean())  # Soft
    torch.testing.assert_close(robust_xid_loss(v, a, vbar, abar, w, T)[0], (w * soft).sum() / w.sum())  # Robust
    assert not torch.allclose(xid, soft)
    assert {k: (x.weights, x.soft) for k, x in VARIANTS.items()} == {
        "xid": ("none", False),
        "weighted": ("scores", False),
        "oracle": ("oracle", False),
        "soft": ("none", True),
        "robust": ("scores", True),
    }


def test_the_losses_keep_their_inputs_dtype():
    """No cast inside losses.py (train.objective casts): float64 in, float64 out; float32 in, float32 out."""
    for dtype in (torch.float64, torch.float32):
        v, a, vbar, abar, lab = (t.detach().to(dtype) if t.is_floating_point() else t for t in batch())
        T = soft_targets(vbar, abar, "oracle", lam=0.5, labels=lab)
        outs = [
            xid_loss(v, a, vbar, abar),
            *T,
            soft_xid_loss(v, a, vbar, abar, *T),
            robust_xid_loss(v, a, vbar, abar)[0],
        ]
        outs.append(sample_weights((vbar[:, 0] * abar[:, 0]).sum(1), 0.1, 0.2, -1.0))
        assert [t.dtype for t in outs] == [dtype] * len(outs)


def test_robust_xid_loss_passes_its_temperature_to_both_losses():
    v, a, vbar, abar, lab = batch()
    for tau in (0.03, 0.2):
        torch.testing.assert_close(robust_xid_loss(v, a, vbar, abar, tau=tau)[1], xid_loss(v, a, vbar, abar, tau))
        T = soft_targets(vbar, abar, "ccp", lam=0.5)
        torch.testing.assert_close(
            robust_xid_loss(v, a, vbar, abar, targets=T, tau=tau)[1], soft_xid_loss(v, a, vbar, abar, *T, tau=tau)
        )


def test_sample_weights_defaults_are_the_papers_kappa_and_w_min():
    s = torch.linspace(-1, 1, 9)
    torch.testing.assert_close(
        sample_weights(s, 0.1, 0.4, 0.3), sample_weights(s, 0.1, 0.4, 0.3, kappa=0.5, w_min=0.25)
    )


def test_weighted_mean_is_scale_free_for_small_weights_and_keeps_the_losses_dtype():
    L = torch.tensor([1.0, 2.0, 4.0])
    assert weighted_mean(L, torch.full((3,), 0.01)) == pytest.approx(7 / 3)  # a sum of weights below 1
    assert weighted_mean(L, torch.ones(3, dtype=torch.float64)).dtype == torch.float32
