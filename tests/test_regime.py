"""The one-regime screen's judge (lab/regime.py, lab/results/regime/PLAN.md): each criterion can
fail, a per-seed bound fails as soon as one finished seed breaks it, and the rest wait for their seeds."""

from lab import regime


def zero(xid, oracle_soft):
    return {
        s: {"xid": {"1-shot": x}, "soft:oracle": {"1-shot": o}} for s, x, o in zip(regime.SEEDS_0, xid, oracle_soft)
    }


def fifty(auroc, xid, oracle):
    return {
        s: {"xid": {"1-shot": x, "AUROC": a}, "oracle": {"1-shot": o}}
        for s, a, x, o in zip(regime.SEEDS_50, auroc, xid, oracle)
    }


def verdicts(*args):
    return {name: holds for name, _, holds in regime.criteria(*args)}


def test_a_candidate_inside_every_bound_meets_all_four():
    v = verdicts(zero([50, 60, 70], [60, 69, 80]), fifty([85, 90], [30, 40], [36, 45]), [0.6, 0.55])
    assert v == {"(a)": True, "(b)": True, "(c)": True, "(d)": True}


def test_each_bound_can_fail():
    assert verdicts(zero([50, 60, 85], [60, 69, 95]), {}, None)["(a)"] is False  # one seed above 80
    assert verdicts(zero([50, 60, 70], [57, 67, 77]), {}, None)["(b)"] is False  # mean gain 7 < 8
    assert verdicts(zero([50, 60, 70], [70, 61, 85]), {}, None)["(b)"] is False  # paired SD 9.8 > 6
    assert verdicts(zero([50, 60, 70], [60, 69, 80]), fifty([85, 79], [30, 40], [36, 45]), None)["(c)"] is False
    assert verdicts(zero([50, 60, 70], [60, 69, 80]), fifty([85, 90], [30, 40], [33, 43]), None)["(c)"] is False
    assert verdicts({}, {}, [0.76, 0.5])["(d)"] is False


def test_one_finished_seed_can_fail_a_per_seed_bound_and_otherwise_the_verdict_waits():
    first = zero([19.6], [25.0])
    v = verdicts(first, fifty([75.1], [11.4], [12.4]), None)
    assert v["(a)"] is False and v["(c)"] is False  # 19.6 < 35; AUROC 75.1 < 80: no later seed mends them
    assert v["(b)"] is None and v["(d)"] is None  # a positive gain on one seed: the mean waits


def test_the_judges_help_prints():
    import pytest

    with pytest.raises(SystemExit) as done:
        regime.main(["--help"])
    assert done.value.code == 0
