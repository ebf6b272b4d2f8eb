"""experiments/warmup_table.py and warmup_length.py: when a warm-up's bank AUROC reaches its goal, and the
shortest warm-up that meets the criterion's items 1-2."""
import pytest

from experiments.warmup_table import first_reaching


def curve(*aurocs):
    return [{"epoch": e, "faulty_auroc": a} for e, a in enumerate(aurocs)]


def test_first_reaching_finds_the_first_epoch_and_with_hold_the_one_it_stays_from():
    recs = curve(0.5, 0.81, 0.79, 0.8, 0.9)
    assert first_reaching(recs, "faulty_auroc", 0.8, hold=False) == 1
    assert first_reaching(recs, "faulty_auroc", 0.8, hold=True) == 3  # the dip at epoch 2 does not count as held
    assert first_reaching(recs, "faulty_auroc", 0.95, hold=False) is None


def test_first_reaching_treats_a_missing_auroc_as_not_reached():
    recs = curve(None, 0.85)
    assert first_reaching(recs, "faulty_auroc", 0.8, hold=True) == 1


def _warmup(losses, aurocs):
    return [{"epoch": e, "stage": "xid", "loss": l, "faulty_auroc": a, "clips_per_s": 100.0}
            for e, (l, a) in enumerate(zip(losses, aurocs))]


def test_a_cut_warm_up_judges_item_1_on_the_first_run_and_item_2_on_it_and_the_mean():
    from experiments.warmup_length import judge
    chance = 11.0
    seed0 = _warmup([11, 10.5, 10.95] + [10.5] * 9, [0.5, 0.6, 0.7] + [0.9] * 9)
    seed1 = _warmup([11] * 6 + [10.5] * 6, [0.5] * 6 + [0.7] * 6)
    v = judge([seed0, seed1], 2, chance, goal=0.8)
    assert v["left"] == [1, None]  # cut at 2 epochs the rise at epoch 2 is not seen
    assert not v["item1"]  # 4 * 1 > 2
    v = judge([seed0, seed1], 12, chance, goal=0.85)
    assert v["left"] == [3, 6]  # 10.95 at epoch 2 is not 0.1 below chance: seed 0 leaves for good at 3
    assert v["item1"] and not v["item1_all"]  # 4 * 3 <= 12 < 4 * 6
    assert v["auroc_mean"] == pytest.approx(0.8) and not v["item2"]  # seed 0 holds (0.9), the mean misses
    assert judge([seed0, seed1], 12, chance, goal=0.75)["item2"]
    assert not judge([seed0, seed1], 12, chance, goal=0.95)["item2"]  # seed 0 misses too
    assert judge([seed0, seed1[:5]], 12, chance, goal=0.8) is None  # a log shorter than the length says nothing
