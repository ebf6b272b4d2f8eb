"""The claims' judge (experiments/claims_report.py) follows its plan: Holm's step-down over the two
primary endpoints, a verdict only with every planned seed, and the direction of a rejected test."""
from experiments import claims_report as cr


def test_holm_adjusts_the_smaller_p_by_two_and_keeps_the_order():
    assert cr.holm([0.02, 0.04]) == [0.04, 0.04]
    assert cr.holm([0.03, 0.01]) == [0.03, 0.02]
    assert cr.holm([0.3, 0.001]) == [0.3, 0.002]


def settings(gain_1shot, gain_5shot, seeds=5):
    """xID and Weighted at 50% on `seeds` seeds, Weighted ahead by the given per-seed gains."""
    res = {0.5: {}}
    for s in range(seeds):
        base = {"R@1": 0.5, "R@5": 0.8, "1-shot": 0.3 + 0.05 * s, "5-shot": 0.5 + 0.03 * s}
        res[0.5][s] = {"xid": base, "weighted": {**base, "1-shot": base["1-shot"] + gain_1shot[s],
                                                 "5-shot": base["5-shot"] + gain_5shot[s]}}
    return res


def test_a_claim_holds_is_contradicted_or_is_not_shown_as_its_tests_say():
    claim = next(c for c in cr.CLAIMS if c.name == "F3a")
    steady = [0.05, 0.06, 0.04, 0.05, 0.055]
    noise = [0.03, -0.02, 0.01, -0.04, 0.02]
    assert cr.judge(claim, settings(steady, noise))["verdict"] == "holds (1-shot)"
    assert cr.judge(claim, settings([-g for g in steady], noise))["verdict"] == "contradicted (1-shot)"
    assert cr.judge(claim, settings(noise, noise))["verdict"] == "not shown"
    assert cr.judge(claim, settings(steady, steady, seeds=4))["verdict"] == "incomplete (4 of 5 seeds)"


def test_oracle_at_zero_is_xid_and_gain_growth_is_paired_by_seed(tmp_path):
    import json
    folder = tmp_path / "settings"
    folder.mkdir()
    for level, gain in ((0.0, 0.01), (0.5, 0.04)):
        for seed in range(2):
            row = {"R@1": 0.5, "R@5": 0.8, "1-shot": 0.3 + seed / 10, "5-shot": 0.5}
            rows = {"xid": row, "weighted": {**row, "1-shot": row["1-shot"] + gain}}
            (folder / f"seed{seed}_faulty{round(100 * level)}.json").write_text(json.dumps(
                {"key": {}, "seed": seed, "faulty": level, "delta": 0.0, "rows": rows}))
    res = cr.load(tmp_path)
    assert res[0.0][1]["oracle"] == res[0.0][1]["xid"] and "oracle" not in res[0.5][1]
    grow = cr.gain_growth("weighted", "xid", 0.0, 0.5)
    assert abs(grow(res, 1, "1-shot") - 0.03) < 1e-9 and grow(res, 2, "1-shot") is None
