"""The demo's own criteria (lab/demo_criteria.py): each per-seed test and (a)'s spread bound can fail."""

from lab.demo_criteria import judge


def seed_rows(xid, weighted, oracle, soft, robust, auroc=85.0):
    one = lambda shot: {"1-shot": shot, "AUROC": auroc}  # noqa: E731
    return {"xid": one(xid), "weighted": one(weighted), "oracle": one(oracle), "soft": one(soft), "robust": one(robust)}


def test_a_seed_where_every_method_beats_xid_meets_b():
    j = judge({1: seed_rows(40, 43, 47, 44, 46), 2: seed_rows(41, 44, 48, 45, 47)})
    assert j["seeds meeting (b)"] == [1, 2] and j["Robust above Weighted and Soft on the mean"]
    assert j["a"] is True


def test_each_per_seed_test_can_fail():
    j = judge({1: seed_rows(40, 39, 44, 40, 46, auroc=79.0), 2: seed_rows(40, 43, 47, 44, 37)})
    failed = {s: [k for k, ok in t.items() if not ok] for s, t in j["per seed"].items()}
    assert failed[1] == ["Weighted AUROC >= 80", "Oracle - xID >= 5", "Weighted > xID", "Soft > xID"]
    assert failed[2] == ["Robust > xID"] and j["seeds meeting (b)"] == []
    assert not j["Robust above Weighted and Soft on the mean"]


def test_a_fails_on_a_wide_xid_or_any_wide_row():
    assert judge({1: seed_rows(30, 43, 47, 44, 46), 2: seed_rows(40, 44, 48, 45, 47)})["a"] is False
    assert judge({1: seed_rows(40, 43, 47, 44, 36), 2: seed_rows(41, 44, 48, 45, 47)})["a"] is False
