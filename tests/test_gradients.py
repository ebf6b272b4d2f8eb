"""The gradient of eq. (17) with respect to the embeddings, checked numerically: torch.autograd.gradcheck
compares autograd's Jacobian with finite differences, in float64, for every method of Table 2 and the oracle
(Sec. 5.2), with Soft- and Robust-xID on CCP's targets and on the oracle's (Table 1).

What the paper holds constant is handed in and held: the weights w_i of eqs. (5) and (17) (eq. (6) reads the
bank, detached) and the soft targets T of eqs. (8)-(9) (they read bank targets only). They enter the checked
function, so a gradient that leaked into them, or one that ignored them, would show. This is the worked
example of testing a gradient; exercise 4 writes one by hand (python -m exercises.check gradient).

    python -m pytest -q tests/test_gradients.py
"""

import pytest
import torch
import torch.nn.functional as F

from losses import VARIANTS, robust_xid_loss, sample_weights, soft_targets

B, K, D = 4, 5, 6
TAU = 0.07  # the paper's temperature: steep, so a wrong term would show


def setting(seed=0):
    """Unit embeddings and bank targets in float64, labels for the oracle's targets, bank scores."""
    g = torch.Generator().manual_seed(seed)
    unit = lambda *shape: F.normalize(torch.randn(*shape, generator=g, dtype=torch.float64), dim=-1)  # noqa: E731
    v, a = unit(B, D), unit(B, D)  # (B, D) each
    vbar, abar = unit(B, 1 + K, D), unit(B, 1 + K, D)  # (B, 1+K, D) each
    labels = torch.randint(0, 2, (B, 1 + K), generator=g)  # (B, 1+K)
    scores = (vbar[:, 0] * abar[:, 0]).sum(1)  # (B,): the bank scores vbar_i . abar_i
    return v, a, vbar, abar, labels, scores


def held_constants(method, targets_from, vbar, abar, labels, scores):
    """The weights and targets VARIANTS[method] uses, as train.objective makes them, detached."""
    variant = VARIANTS[method]
    weights = None
    if variant.weights == "scores":  # eq. (6)
        weights = sample_weights(scores, scores.mean(), scores.std(), delta=-0.5)  # (B,)
    elif variant.weights == "oracle":  # Sec. 5.2: 0 on the injected faulty positives
        weights = torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64)  # (B,)
    targets = None
    if variant.soft:
        targets = soft_targets(vbar, abar, targets_from, lam=0.5, labels=labels)  # (T_v, T_a), (B, 1+K) each
    return weights, targets


CASES = [
    ("xid", None),
    ("weighted", None),
    ("oracle", None),
    ("soft", "ccp"),
    ("robust", "ccp"),
    ("soft", "oracle"),
    ("robust", "oracle"),
]


@pytest.mark.parametrize("method,targets_from", CASES)
def test_gradcheck_of_eq_17_with_respect_to_the_embeddings(method, targets_from):
    v, a, vbar, abar, labels, scores = setting()
    weights, targets = held_constants(method, targets_from, vbar, abar, labels, scores)
    assert all(t is None or t.dtype == torch.float64 for t in (weights, *(targets or ())))

    def loss(v, a):  # the constants enter here: eq. (17) as train.objective calls it
        return robust_xid_loss(v, a, vbar, abar, weights=weights, targets=targets, tau=TAU)[0]

    inputs = (v.requires_grad_(), a.requires_grad_())
    assert torch.autograd.gradcheck(loss, inputs, eps=1e-6, atol=1e-6, rtol=1e-5)


def test_gradcheck_fails_when_a_gradient_is_wrong():
    """The check can fail: a loss whose backward is off by 1% (a custom autograd function) is caught."""
    v, a, vbar, abar, *_ = setting()

    class Off(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return 1.01 * grad

    def loss(v, a):
        return robust_xid_loss(Off.apply(v), a, vbar, abar, tau=TAU)[0]

    inputs = (v.requires_grad_(), a.requires_grad_())
    assert not torch.autograd.gradcheck(loss, inputs, eps=1e-6, atol=1e-6, rtol=1e-5, raise_exception=False)


def test_the_weights_and_targets_are_constants_no_gradient_reaches_them():
    """Eq. (17)'s gradient flows into v and a only: the weights given with requires_grad get none."""
    v, a, vbar, abar, labels, scores = setting()
    weights, targets = held_constants("robust", "ccp", vbar, abar, labels, scores)
    weights.requires_grad_()
    robust_xid_loss(v.requires_grad_(), a, vbar, abar, weights=weights, targets=targets, tau=TAU)[0].backward()
    assert weights.grad is None and v.grad is not None and not targets[0].requires_grad
