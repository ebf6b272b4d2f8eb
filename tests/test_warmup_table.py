"""experiments/warmup_table.py: the epoch at which a warm-up's bank AUROC reaches its goal."""
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
