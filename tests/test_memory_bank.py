"""Invariants of memory_bank.py: sampling never returns the sample as a negative, EMA rule, state round trip."""

import torch
import torch.nn.functional as F

from memory_bank import MemoryBank


def test_bank_starts_unit_norm_and_identical_for_equal_seeds():
    m1, m2 = MemoryBank(50, dim=8, seed=3), MemoryBank(50, dim=8, seed=3)
    torch.testing.assert_close(m1.video.norm(dim=1), torch.ones(50))
    assert torch.equal(m1.video, m2.video) and torch.equal(m1.audio, m2.audio)
    assert not torch.equal(m1.video, m1.audio)


def test_sample_puts_self_first_and_never_among_negatives():
    bank = MemoryBank(5, dim=4)
    idx = torch.tensor([0, 4, 2, 2])
    cand = bank.sample(idx, num_negatives=2000)
    assert cand.shape == (4, 2001) and cand.dtype == torch.long
    assert torch.equal(cand[:, 0], idx)
    assert (cand[:, 1:] != idx[:, None]).all()
    # uniform over the other N-1 items: each of the 4 others near 1/4 of the draws
    for row, i in zip(cand, idx):
        counts = torch.bincount(row[1:], minlength=5).float() / 2000
        others = torch.tensor([j for j in range(5) if j != i])
        assert (counts[others] - 0.25).abs().max() < 0.05


def test_targets_are_the_rows_at_the_candidates():
    bank = MemoryBank(10, dim=4)
    cand = torch.tensor([[3, 1, 7]])
    vbar, abar = bank.targets(cand)
    assert vbar.shape == (1, 3, 4)
    assert torch.equal(vbar[0, 2], bank.video[7]) and torch.equal(abar[0, 0], bank.audio[3])


def test_update_is_the_normalised_ema_and_touches_only_the_batch():
    bank = MemoryBank(10, dim=4, momentum=0.5)
    before_v, before_a = bank.video.clone(), bank.audio.clone()
    idx = torch.tensor([2, 5])
    v, a = F.normalize(torch.randn(2, 4), dim=1), F.normalize(torch.randn(2, 4), dim=1)
    bank.update(idx, v, a)
    torch.testing.assert_close(bank.video[idx], F.normalize(0.5 * before_v[idx] + 0.5 * v, dim=1))
    torch.testing.assert_close(bank.audio[idx], F.normalize(0.5 * before_a[idx] + 0.5 * a, dim=1))
    rest = torch.tensor([i for i in range(10) if i not in (2, 5)])
    assert torch.equal(bank.video[rest], before_v[rest]) and torch.equal(bank.audio[rest], before_a[rest])


def test_scores_are_per_item_dot_products():
    bank = MemoryBank(10, dim=4)
    bank.video[1] = bank.audio[1]  # plant a perfect correspondence
    s = bank.scores()
    assert s.shape == (10,)
    torch.testing.assert_close(s, (bank.video * bank.audio).sum(1))
    assert s[1] > 0.99  # identical unit vectors


def test_state_dict_round_trip_carries_the_whole_bank():
    bank = MemoryBank(10, dim=4, seed=1)
    bank.update(torch.tensor([0, 1]), torch.randn(2, 4), torch.randn(2, 4))
    fresh = MemoryBank(10, dim=4, seed=2)
    fresh.load_state_dict(bank.state_dict())
    assert set(bank.state_dict()) == {"video", "audio"}
    assert torch.equal(fresh.video, bank.video) and torch.equal(fresh.audio, bank.audio)


def test_a_negative_is_never_the_sample_itself_and_the_others_are_uniform():
    bank = MemoryBank(6, dim=4)
    idx = torch.tensor([0, 5, 2])
    cand = bank.sample(idx, num_negatives=3000)
    assert torch.equal(cand[:, 0], idx) and (cand[:, 1:] != idx[:, None]).all()
    for row, i in zip(cand, idx):  # uniform over the 5 others
        counts = torch.bincount(row[1:], minlength=6).float() / 3000
        others = torch.tensor([j for j in range(6) if j != int(i)])
        assert (counts[others] - 0.2).abs().max() < 0.05


def test_sampling_draws_what_it_always_drew():
    bank = MemoryBank(9, dim=4)
    idx = torch.tensor([0, 8, 4])
    torch.manual_seed(5)
    cand = bank.sample(idx, num_negatives=50)
    torch.manual_seed(5)
    neg = torch.randint(0, 8, (3, 50))
    assert torch.equal(cand[:, 1:], neg + (neg >= idx[:, None]).long())


def test_score_statistics_are_the_mean_and_deviation_of_every_slot():
    bank = MemoryBank(8, dim=4)
    bank.video[2] = -bank.audio[2]  # an extreme score counts like any other
    scores = bank.scores()
    mu, sigma = bank.score_stats(scores)
    torch.testing.assert_close(mu, scores.mean())
    torch.testing.assert_close(sigma, scores.std())


def test_a_bank_needs_two_items_and_says_so():
    import pytest

    with pytest.raises(ValueError, match="num_items=1"):
        MemoryBank(1, dim=4)
    assert MemoryBank(2, dim=4).sample(torch.tensor([0, 1]), 5)[:, 1:].tolist() == [[1] * 5, [0] * 5]
