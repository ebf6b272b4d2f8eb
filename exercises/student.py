"""Your version of four pieces of the method (TOUR.md, "Exercises"). Replace each `raise` by your code,
then check it against the reference:

    python -m exercises.check            # all four; or: python -m exercises.check weights

Each function states what it receives and must return, with the paper's equation. Write it from the
paper, not from losses.py or memory_bank.py; the checker tells you what differs. To see what a
wrong piece does, break a reference on purpose: the checker's message says how far it is off.
"""


def sample_weights(scores, mu, sigma, delta, kappa, w_min):
    """Exercise 1, eq. (6): w_i = t_{w_min}(C_N(s_i; mu + delta sigma, kappa sigma^2)), where C_N is the
    CDF of a normal with that mean and variance and t_{w_min}(x) = w_min + (1 - w_min) x.
    scores (B,) float; mu, sigma floats -> weights (B,) in [w_min, 1]. A bank whose scores are all equal
    has sigma = 0: keep the result finite there. Hint: torch.special.ndtr."""
    raise NotImplementedError("exercise 1: eq. (6)'s weights")


def ccp_similarity(vbar, abar, tau_s, tau_t):
    """Exercise 2, eqs. (13)-(14): CCP's softening scores S, which losses.soft_targets mixes with the one-hot
    target into T = (1 - lam) onehot(0) + lam S (eqs. (8)-(9)). vbar, abar (B, 1+K, D) are the bank
    targets of each sample's candidates, column 0 the sample itself. S_v(j|i) is a softmax over j of
    vbar_i.abar_i / tau_t + abar_i.vbar_j / tau_s + vbar_j.abar_j / tau_t, and S_a(j|i) the same with
    abar_i.vbar_j replaced by vbar_i.abar_j. -> (S_v, S_a), each (B, 1+K), rows summing to 1."""
    raise NotImplementedError("exercise 2: CCP's softening scores, eqs. (13)-(14)")


def ema_rows(rows, features, momentum):
    """Exercise 3, the bank's update (Sec. 3, AVID): the new memory of each row of the batch,
    m_i <- normalize(momentum m_i + (1 - momentum) f_i), of unit length. rows (the memories m_i of the
    batch's slots), features (the encoder outputs f_i): (B, D) -> (B, D); MemoryBank.update writes them back."""
    raise NotImplementedError("exercise 3: the memory bank's EMA update")


def xid_video_gradient(v, abar, tau):
    """Exercise 4, eqs. (3)-(4): the gradient of the video half of eq. (1), -log P(abar_0 | v_i; tau),
    with respect to v_i, for each sample. v (B, D), abar (B, 1+K, D) with column 0 the positive.
    -> dL/dv (B, D). Work it out by hand (P is a softmax of v_i.abar_j / tau over j); no autograd."""
    raise NotImplementedError("exercise 4: the gradient of eqs. (3)-(4)")
