"""The regime screen's stage-1 rule and its folded thread-direction test (lab/spread_report.py), on made-up
rows: each part of the rule can fail, and nothing is read before 3 seeds."""

import json
from pathlib import Path

from lab.spread_report import screen_summary, screen_verdict, thread_direction


def rows(ref, fork):
    """One seed's finished jobs, as lab.spread writes them (1-shot as fractions)."""
    return {"xid_warm": {"1-shot": ref / 100}, "xid_fork0": {"1-shot": fork / 100}, "s_per_epoch": 1.0}


def cands(table):
    return {c: {1100 + i: rows(*pair) for i, pair in enumerate(pairs)} for c, pairs in table.items()}


STEADY = [(50, 51), (52, 50), (49, 50)]
WILD = [(30, 50), (60, 40), (45, 65)]


def test_a_steadier_candidate_passes_and_a_wilder_one_fails():
    summary = screen_summary(cands({"R0": WILD, "R1": STEADY, "R2": [(10, 80), (70, 20), (40, 60)]}))
    verdict = screen_verdict(summary, {})
    assert verdict["read"] and verdict["pass"] == ["R1"] and verdict["stage 2"] == ["R1"]


def test_a_steady_candidate_far_below_the_control_fails():
    low = [(a - 20, b - 20) for a, b in STEADY]
    verdict = screen_verdict(screen_summary(cands({"R0": WILD, "R1": low})), {})
    assert verdict["pass"] == [] and verdict["stage 2"] == ["R0"]


def test_a_candidate_too_slow_for_the_demo_fails():
    verdict = screen_verdict(screen_summary(cands({"R0": WILD, "R1": STEADY})), {"R1": 5.5})
    assert verdict["pass"] == []


def test_nothing_is_read_before_every_candidate_has_three_seeds():
    table = cands({"R0": WILD, "R1": STEADY})
    del table["R1"][1102]["xid_fork0"]  # one job unfinished: that seed is not common
    summary = screen_summary(table)
    assert summary["seeds"] == [1100, 1101]
    assert screen_verdict(summary, {})["read"] is False


def test_a_dropped_candidate_neither_blocks_the_read_nor_is_read():
    table = cands({"R0": WILD, "R1": STEADY, "R2": STEADY})
    del table["R2"][1102]  # dropped before its third seed ran
    assert screen_verdict(screen_summary(table), {})["read"] is False
    summary = screen_summary(table, dropped=("R2",))
    assert summary["seeds"] == [1100, 1101, 1102] and "R2" not in summary["candidates"]
    assert screen_verdict(summary, {})["stage 2"] == ["R1"]


def test_the_thread_direction_needs_a_consistent_sign():
    assert thread_direction(cands({"R0": [(40, 45), (50, 56), (30, 33)], "R1": [(40, 44), (50, 52), (30, 37)]}))[
        "direction"
    ]
    assert not thread_direction(cands({"R0": WILD, "R1": STEADY}))["direction"]


def test_a_branch_is_not_done_when_only_its_warm_up_is(tmp_path):
    from lab.spread import done_file, screen_jobs

    jobs = {name.split("/")[-1]: argv for name, _, _, argv in screen_jobs("R0", 1100)}
    warm_row = done_file(jobs["warm"])
    assert done_file(jobs["xid_warm"]) != warm_row  # a resumed screen once skipped every branch whose warm-up was done
    assert done_file(jobs["xid_warm"]).parent.name == "xid_warm"


def test_a_waiting_warm_up_is_passed_only_by_jobs_of_its_own_seed(monkeypatch, tmp_path):
    """Processes that each run for a few polls: the second candidate's 2-thread warm-up must start before any
    job of the next seed, though that seed's 1-thread warm-ups are ready from the start."""
    import lab.spread as spread

    started = []  # each job's own folder, in the order the scheduler starts them

    class Job:
        def __init__(self, cmd, **_):
            kind, argv = cmd[4], cmd[5:]
            started.append(argv[2] if kind == "branch" else argv[1])  # argv: seed, (warm-up,) own folder, ...
            self.polls, self.returncode = 0, None
            # staggered so that one core frees while a 2-thread warm-up waits for the other (as real jobs do)
            self.length = {"warm": 1, "fork0": 10, "xid_warm": 3, "xid_fork0": 5}[Path(started[-1]).name]

        def poll(self):
            self.polls += 1
            self.returncode = 0 if self.polls > self.length else None
            return self.returncode

    monkeypatch.setattr(spread, "RUNS", tmp_path)
    monkeypatch.setattr(spread.subprocess, "Popen", Job)
    monkeypatch.setattr(spread.time, "sleep", lambda s: None)
    jobs = [j for s in (1100, 1101) for c in ("R0", "R1") for j in spread.screen_jobs(c, s)]
    spread.schedule(jobs)
    assert len(started) == len(jobs)
    first_next = next(i for i, f in enumerate(started) if "seed1101" in f)
    assert all("seed1100" in f for f in started[:first_next])
    assert any(f.endswith("R1/seed1100/warm") for f in started[:first_next])


def _simulate(monkeypatch, tmp_path, order):
    """Runs the screen's jobs for 3 candidates and 2 seeds, under tmp_path, in `order(jobs)`, through
    lab.spread.schedule with fake processes of fixed lengths (in polls), resumed where the 1-thread warm-ups
    and their branches had finished (as the screen's second session found seed 1101); -> polls taken."""
    import lab.spread as spread

    clock = [0]

    class Job:
        def __init__(self, cmd, **_):
            kind, argv = cmd[4], cmd[5:]
            own = Path(argv[2] if kind == "branch" else argv[1]).name
            self.end, self.returncode = clock[0] + {"warm": 4, "fork0": 8, "xid_warm": 6, "xid_fork0": 6}[own], None

        def poll(self):
            self.returncode = 0 if clock[0] >= self.end else None
            return self.returncode

    def tick(_):
        clock[0] += 1

    monkeypatch.setattr(spread, "RUNS", tmp_path)
    monkeypatch.setattr(spread.subprocess, "Popen", Job)
    monkeypatch.setattr(spread.time, "sleep", tick)
    jobs = [j for s in (1100, 1101) for c in ("R0", "R1", "R2") for j in spread.screen_jobs(c, s)]
    for _, _, _, argv in jobs:
        if "fork0" in spread.done_file(argv).parent.name:
            spread.done_file(argv).parent.mkdir(parents=True)
            spread.done_file(argv).write_text("{}")
    spread.schedule(order(jobs))
    return clock[0]


def test_wide_first_pairs_the_one_thread_jobs_and_finishes_sooner(monkeypatch, tmp_path):
    import lab.spread as spread

    jobs = [j for s in (1100, 1101) for c in ("R0", "R1", "R2") for j in spread.screen_jobs(c, s)]
    ordered = spread.wide_first(jobs)
    assert sorted(ordered) == sorted(jobs)
    for seed in ("1100", "1101"):
        threads = [t for name, t, _, _ in ordered if spread.seed_of(name) == seed]
        assert threads == sorted(threads, reverse=True)  # every 2-thread job of a seed before its 1-thread ones
    assert [spread.seed_of(j[0]) for j in ordered] == sorted(spread.seed_of(j[0]) for j in ordered)
    as_listed = _simulate(monkeypatch, tmp_path / "a", list)
    wide = _simulate(monkeypatch, tmp_path / "b", spread.wide_first)
    assert wide < as_listed, (wide, as_listed)


def test_the_quiet_time_check_projects_by_speed_and_by_epochs(tmp_path):
    """Amendment 2: R1 at R0's speed projects R0's minutes; R4's 15 more warm-up epochs add 15/150; a
    candidate at half the speed doubles them. Without the check, the stage-1 logs are used."""
    from lab.spread import CANDIDATES
    from lab.spread_report import DEMO_MIN, projected_minutes

    check = tmp_path / "timecheck.json"
    check.write_text(json.dumps({"clips_per_s": {"R0": 100.0, "R1": 100.0, "R2": 50.0, "R4": 100.0}}))
    cost = projected_minutes({}, check, CANDIDATES)
    assert cost["R1"] == DEMO_MIN and cost["R2"] == 2 * DEMO_MIN
    assert abs(cost["R4"] - DEMO_MIN * 165 / 150) < 1e-9
    logs = {"candidates": {"R0": {"time per clip": 1.0}, "R1": {"time per clip": 2.0}}}
    assert projected_minutes(logs, tmp_path / "none.json", CANDIDATES)["R1"] == 2 * DEMO_MIN
