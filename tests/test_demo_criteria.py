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


def test_stage2_sends_on_the_candidate_meeting_b_on_most_seeds_and_breaks_ties_by_stage1_spread(tmp_path):
    import json

    import demo
    from lab.demo_criteria import stage2

    def write(cand, seed, rows):
        folder = tmp_path / "runs" / cand / "demo_settings"
        folder.mkdir(parents=True, exist_ok=True)
        saved = {m: {k: v / 100 for k, v in r.items()} for m, r in rows.items()}  # settings hold fractions
        (folder / f"{demo.setting_name(seed, 0.25)}.json").write_text(json.dumps({"rows": saved}))

    good, bad = seed_rows(40, 43, 47, 44, 46), seed_rows(40, 39, 47, 44, 46)
    for seed in (1, 2):
        write("R0", seed, good)
        write("R1", seed, good if seed == 1 else bad)
        write("R3", seed, good)
    write("R4", 1, good)  # a seed short: not picked, however good
    results = tmp_path / "results"
    results.mkdir()
    spread = {c: {"pooled SD": sd} for c, sd in {"R0": 6.0, "R1": 1.0, "R3": 4.0, "R4": 0.5}.items()}
    (results / "screen.json").write_text(json.dumps({"summary": {"candidates": spread}}))
    assert stage2(tmp_path / "runs", [1, 2], results) == "R3"  # R0 ties on (b), with the wider stage-1 spread
    text = (results / "STAGE2.md").read_text()
    assert "| R1 | 2 | 40.0 | 39.0 |" in text and "Weighted > xID" in text and "To the 8-seed check" in text


def test_the_check_reads_c_from_the_one_thread_runs_and_it_can_fail(tmp_path):
    import json

    import demo
    from lab.demo_criteria import check

    def write(folder, seed, rows):
        (tmp_path / folder).mkdir(exist_ok=True)
        saved = {m: {k: v / 100 for k, v in r.items()} for m, r in rows.items()}
        (tmp_path / folder / f"{demo.setting_name(seed, 0.25)}.json").write_text(json.dumps({"rows": saved}))

    for seed, xid in ((1, 40.0), (2, 41.0), (3, 42.0)):
        write("check", seed, seed_rows(xid, xid + 3, xid + 7, xid + 4, xid + 6))
        write("check_t1", seed, {"xid": {"1-shot": xid + (4.0 if seed == 3 else 1.0), "AUROC": 80.0}})
    check(tmp_path, [1, 2, 3], rounding_seeds=(1, 2))
    assert "(c) |1 thread - 2| at most 3.0 on each of 1, 2: holds" in (tmp_path / "CHECK.md").read_text()
    check(tmp_path, [1, 2, 3], rounding_seeds=(1, 2, 3))
    text = (tmp_path / "CHECK.md").read_text()
    assert "on each of 1, 2, 3: fails" in text and "| 3 | 42.0 |" in text and "46.0 (+4.0)" in text


def test_b_fails_as_soon_as_two_seeds_fail_and_holds_only_when_every_seed_is_in():
    from lab.demo_criteria import b_verdict

    good, bad = seed_rows(40, 43, 47, 44, 46), seed_rows(40, 39, 47, 44, 46)
    assert b_verdict(judge({1: good, 2: bad}), 8) == "pending"  # one failure of 8 is allowed
    assert b_verdict(judge({1: good, 2: bad, 3: bad}), 8) == "fails"  # no further seed can mend two
    assert b_verdict(judge({1: good, 2: good, 3: bad}), 3) == "holds"
    robust_low = seed_rows(40, 45, 47, 44, 42)  # each above xID, Robust below Weighted and Soft on the mean
    assert b_verdict(judge({1: robust_low, 2: robust_low}), 2) == "fails"


def test_the_check_of_r0_reads_its_own_folder_into_its_own_file(tmp_path):
    import json

    import demo
    from lab.demo_criteria import check

    (tmp_path / "check_r0").mkdir()
    for seed in (1, 2):
        saved = {m: {k: v / 100 for k, v in r.items()} for m, r in seed_rows(40, 43, 47, 44, 46 + seed).items()}
        (tmp_path / "check_r0" / f"{demo.setting_name(seed, 0.25)}.json").write_text(json.dumps({"rows": saved}))
    j = check(tmp_path, [1, 2, 3], name="check_r0")
    text = (tmp_path / "CHECK_R0.md").read_text()
    assert j["seeds"] == [1, 2] and not (tmp_path / "CHECK.md").exists()
    assert "--name check_r0" in text and "R0" in text and "(b)" in text and ": pending (met on 2 of 2" in text
    assert "(c) not rerun for R0" in text
