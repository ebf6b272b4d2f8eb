"""The switches of TOUR.md, one test each: a change (a flag or
a line) and the outcome the tour predicts. Each goes through the functions train.py itself calls
(train.objective with a real memory bank and a parsed config), so a change that broke the switch
in the training code, not just in losses.py, would fail here."""

import re
from pathlib import Path

import torch
import torch.nn.functional as F

import train
from config import parse_config
from losses import sample_weights
from memory_bank import MemoryBank

N, B, D = 64, 8, 16


def setting(*flags):
    """A bank that has learned something (video and audio memories of an instance agree, noisily),
    a batch of embeddings, and the parsed config of `flags` (the demo preset's K = 256 is too big
    for 64 instances, hence --num-negatives)."""
    torch.manual_seed(0)
    bank = MemoryBank(N, dim=D, seed=0)
    bank.audio.copy_(F.normalize(bank.video + 0.8 * torch.randn(N, D), dim=1))
    idx = torch.arange(B)
    v = F.normalize(bank.video[idx] + 0.5 * torch.randn(B, D), dim=1).requires_grad_()  # (B, D)
    a = F.normalize(bank.audio[idx] + 0.5 * torch.randn(B, D), dim=1).requires_grad_()  # (B, D)
    cfg = parse_config(["--preset", "demo", "--num-negatives", "31", *flags])
    truth = {"labels": torch.arange(N) % 4, "injected": torch.arange(N) % 2 == 1}  # odd instances injected
    return v, a, idx, bank, cfg, truth


def loss_of(stage, *flags):
    v, a, idx, bank, cfg, truth = setting(*flags)
    torch.manual_seed(1)  # the same negatives for every stage
    loss, _ = train.objective(v, a, idx, bank, cfg, stage, truth)
    return loss, v, a


def test_lambda_zero_makes_soft_xid_equal_to_xid():
    for strategy in ("ccp", "bootstrap", "oracle"):
        soft, _, _ = loss_of("soft", "--lam", "0", "--soft-targets", strategy)
        xid, _, _ = loss_of("xid")
        torch.testing.assert_close(soft, xid)
    # the default lambda differs (with oracle targets, which spread mass over the class; on this bank
    # the CCP targets with tau_s = 0.02 sit almost wholly on the instance itself)
    assert not torch.allclose(loss_of("soft", "--lam", "0.5", "--soft-targets", "oracle")[0], loss_of("xid")[0])


def test_w_min_one_makes_weighted_xid_equal_to_xid():
    torch.testing.assert_close(loss_of("weighted", "--w-min", "1")[0], loss_of("xid")[0])
    assert not torch.allclose(loss_of("weighted")[0], loss_of("xid")[0])  # w_min = 0.25 weights


def test_the_oracle_weights_zero_the_loss_of_injected_positives():
    loss, v, a = loss_of("oracle")
    gv, ga = torch.autograd.grad(loss, (v, a))
    injected = torch.arange(B) % 2 == 1
    assert gv[injected].abs().max() == 0 and ga[injected].abs().max() == 0  # nothing learned from them
    assert gv[~injected].abs().min() > 0


def test_a_faulty_positive_is_pulled_towards_its_meaningless_target():
    """Eqs. (3)-(4): xID's gradient attracts v_i to abar_i whatever abar_i is. Give instance 0 an
    audio memory unrelated to its picture (a faulty positive): one step of xID still moves v_0
    towards it, away from where its own video memory is."""
    v, a, idx, bank, cfg, truth = setting()
    bank.audio[0] = F.normalize(torch.randn(D), dim=0)  # the faulty positive's target
    torch.manual_seed(1)
    loss, _ = train.objective(v, a, idx, bank, cfg, "xid", truth)
    (gv,) = torch.autograd.grad(loss, (v,))
    stepped = F.normalize(v[0] - 0.05 * gv[0], dim=0)
    assert stepped @ bank.audio[0] > v[0] @ bank.audio[0]  # pulled towards the unrelated sound
    assert stepped @ bank.video[0] < v[0] @ bank.video[0]  # and so away from its own picture's memory


def test_delta_moves_the_share_of_down_weighted_samples():
    """eq. (6): delta sets the weights' midpoint at mu + delta sigma; the share of samples weighted
    below the midpoint weight (1 + w_min) / 2 is Phi(delta) for normal scores."""
    scores = torch.randn(20000)
    shares = []
    for delta in (-2.0, -1.0, 0.0, 1.0):
        cfg = parse_config(["--delta", str(delta)])
        w = sample_weights(scores, scores.mean(), scores.std(), cfg.delta, cfg.kappa, cfg.w_min)
        shares.append(float((w < (1 + cfg.w_min) / 2).float().mean()))
    assert shares == sorted(shares)
    for share, expected in zip(shares, (0.023, 0.159, 0.5, 0.841)):
        assert abs(share - expected) < 0.02


def test_lending_training_audio_makes_clean_donors_look_faulty():
    """--faulty-source train instead of the paper's held-out sounds: at toy size, the lenders'
    scores fall below the other clean instances' (tests/test_injection.py has the full check)."""
    from test_injection import toy_bank_scores

    scores, injected, donors, others = toy_bank_scores("train", seed=0)
    assert scores[donors].mean() < scores[others].mean()
    scores, injected, donors, others = toy_bank_scores("heldout", seed=0)
    assert scores[donors].mean() > scores[others].mean() - 0.01


def test_every_result_file_the_tour_points_to_exists():
    """The tour sends a reader to measured results: a renamed or never-committed file would strand them."""
    root = Path(__file__).resolve().parents[1]
    text = (root / "TOUR.md").read_text()
    named = set(re.findall(r"(lab/results/[\w./-]+\.(?:md|png|log|py))", text))
    assert {"lab/results/claims/rerun/fig7.md"} <= named
    assert [p for p in sorted(named) if not (root / p).is_file()] == []


def test_the_tours_delta_weights_are_the_committed_sweeps():
    """Switch 5's measured column quotes the claims' delta sweep: its two figures must be that file's."""
    root = Path(__file__).resolve().parents[1]
    quoted = re.search(
        r"\(lab/results/claims/rerun/sweeps\.md\): the clean positives' mean weight falls from (\d+)% "
        r"to (\d+)% from delta -2 to 1",
        (root / "TOUR.md").read_text(),
    )
    sweeps = (root / "lab/results/claims/rerun/sweeps.md").read_text().split("## lambda")[0].split("\n\nPaired")[0]
    rows = [r.split(" | ") for r in sweeps.splitlines() if r.startswith("| ")]
    clean = {r[0].strip("| "): r[-1].split(" ")[0] for r in rows}  # delta: the clean positives' mean weight
    assert quoted and quoted.groups() == (str(round(float(clean["-2"]))), str(round(float(clean["1"]))))
