"""lab/claims_rerun.py: the rerun's sizing gives few seeds to a large steady effect, the cap (marked short) to a
null one, sizes "not worse" on its joint power, and trains each branch for the most seeds a claim reading it needs;
its claims (claims_of) are the plan's, each on the seeds its arms train with the plan's bounds; its report
(`lab.claims report`, the default run) judges them, each endpoint against its own bound, and leaves the documents alone
until every claim has its seeds; `status` says what each setting lacks."""

import random
import re
from pathlib import Path

from lab.claims_plan import Claim, at, diff_claim, gain
from lab.claims_rerun import HI, levels, size


def results(gains, n=15, seed=0):
    """{0.0: {seed: rows}}: xID and a method per name in `gains` (its mean gain, its per-seed SD) in fractions."""
    rng = random.Random(seed)
    out = {}
    for s in range(n):
        x = 0.5 + rng.gauss(0, 0.1)
        rows = {"xid": {"1-shot": x, "transfer 1-shot": x / 2}}
        for m, (g, sd) in gains.items():
            rows[m] = {"1-shot": x + g + rng.gauss(0, sd), "transfer 1-shot": x / 2 + rng.gauss(0, sd)}
        out[s] = rows
    return {0.0: out}


def test_a_large_steady_gain_needs_few_seeds_and_a_null_one_runs_the_cap_marked_short():
    res = results({"big": (0.08, 0.02), "none": (0.0, 0.02)})
    big = size(diff_claim("B", "big > xid", "0%", 0.0, "big", 0.0, "xid"), res)
    none = size(diff_claim("N", "none > xid", "0%", 0.0, "none", 0.0, "xid"), res)
    assert big["seeds"] == 5 and big["short"] is None and big["endpoint"] == "1-shot"
    assert none["seeds"] == HI and none["short"] < 0.8
    assert none["bound"] > none["s"]  # sized on the SD's upper bound, not its estimate


def test_not_worse_is_sized_on_its_joint_power_at_a_true_difference_of_zero():
    steady, noisy = results({"m": (0.0, 0.002)}), results({"m": (0.0, 0.05)})
    claim = Claim("S", "m not worse than xid", tuple(range(15)), at(0.0, "m"), at(0.0, "xid"), at_least=True)
    assert size(claim, steady)["seeds"] == 5
    assert size(claim, noisy)["seeds"] == HI and size(claim, noisy)["short"] is not None


def test_each_branch_trains_the_most_seeds_any_claim_reading_it_needs():
    res = results({"big": (0.08, 0.02), "none": (0.0, 0.02)})
    big = diff_claim("B", "big > xid", "0%", 0.0, "big", 0.0, "xid")
    none = diff_claim("N", "none > xid", "0%", 0.0, "none", 0.0, "xid")
    both = Claim("G", "gain of big over none", tuple(range(15)), gain(0.0, "big", "xid"), gain(0.5, "w", "xid"))
    need = levels({"B": (big, size(big, res)), "N": (none, size(none, res)), "G": (both, None)})
    assert need[0.0] == {"big": HI, "xid": HI, "none": HI} and need[0.5] == {"w": HI, "xid": HI}
    need = levels({"B": (big, size(big, res))})
    assert need == {0.0: {"big": 5, "xid": 5}}


def test_the_order_runs_seed_by_seed_with_figure_7s_rows_on_five_seeds_and_sweeps_while_a_claim_needs_them():
    from lab.claims_rerun import FIRST_SEED, order

    need = {0.0: {"xid": 7, "soft": 7, "soft:oracle": 2}, 0.5: {"xid": 6, "soft": 6}, ("lambda", 0.5): {"1": 3}}
    plan = order(need)
    seeds = [s for s, *_ in plan]
    assert seeds == sorted(seeds) and seeds[0] == FIRST_SEED and seeds[-1] == FIRST_SEED + 6
    at = {(s - FIRST_SEED, lv): (m, k) for s, lv, m, k in plan}
    assert at[(0, 0.0)] == (["xid", "soft", "soft:oracle"], ()) and at[(2, 0.0)] == (["xid", "soft"], ())
    assert at[(2, 0.5)] == (["xid", "soft"], ("lambda",)) and at[(3, 0.5)] == (["xid", "soft"], ())
    assert at[(4, 0.25)] == (["xid", "weighted", "oracle"], ()) and (5, 0.25) not in at and (6, 0.5) not in at


def test_an_endpoint_at_its_floor_is_left_out_and_a_gain_whose_lower_bound_reaches_zero_runs_the_cap():
    res = results({"big": (0.08, 0.02)})
    for rows in res[0.0].values():  # transfer near chance (10%) on both sides: the floor
        rows["xid"]["transfer 1-shot"], rows["big"]["transfer 1-shot"] = 0.11, 0.111
    claim = diff_claim("B", "big > xid", "0%", 0.0, "big", 0.0, "xid")
    assert size(claim, res)["endpoint"] == "1-shot"
    faint = size(diff_claim("F", "f > xid", "0%", 0.0, "f", 0.0, "xid"), results({"f": (0.004, 0.03)}))
    assert faint["low"] < abs(faint["d"]) and faint["seeds"] == HI and faint["smallest"] > faint["low"]


def test_not_worse_needs_every_kept_endpoint_so_the_noisier_one_binds():
    quiet = results({"m": (0.0, 0.002)})
    mixed = results({"m": (0.0, 0.002)})
    rng = random.Random(3)
    for rows in mixed[0.0].values():
        rows["m"]["transfer 1-shot"] = rows["xid"]["transfer 1-shot"] + rng.gauss(0, 0.025)
    claim = Claim("S", "m not worse than xid", tuple(range(15)), at(0.0, "m"), at(0.0, "xid"), at_least=True)
    assert size(claim, quiet)["seeds"] == 5 < size(claim, mixed)["seeds"]
    assert size(claim, mixed)["endpoint"] == "1-shot and transfer 1-shot"


def test_the_sizing_waits_for_the_whole_check(tmp_path):
    import pytest

    from lab.claims_rerun import sizing

    (tmp_path / "first" / "settings").mkdir(parents=True)
    with pytest.raises(SystemExit, match="lacks seeds"):
        sizing(tmp_path / "first", tmp_path / "check")


def test_a_check_that_spreads_more_than_the_first_runs_bound_inflates_every_first_run_bound():
    from lab.claims_rerun import inflation

    def at25(spread, n, seed):
        rows = results({"weighted": (0.03, spread), "oracle": (0.10, spread)}, n=n, seed=seed)[0.0]
        return {0.25: rows}

    first = at25(0.01, 5, 1)
    assert inflation(first, at25(0.005, 8, 2)) == 1.0  # as steady: nothing changes
    assert inflation(first, at25(0.05, 8, 2)) > 1.5  # five times wider: the bounds grow with it


def test_the_pasted_need_is_what_the_committed_first_run_and_check_give():
    from lab.claims_rerun import NEED, levels, sizing

    assert NEED == levels(sizing())  # RERUN_PLAN.md's table and `run`'s order rest on the same numbers


def test_run_trains_the_pasted_order_in_run_ones_shape_and_levels_filter_it(monkeypatch):
    import argparse

    import demo
    from lab import claims_rerun
    from tools import synthetic

    calls = []
    monkeypatch.setattr(synthetic, "ensure", lambda root: None)
    monkeypatch.setattr(demo, "side_by_side", lambda fn, args, n: calls.append((fn, args, n)))
    claims_rerun.run(argparse.Namespace(levels=None, runs="runs/x", jobs=2))
    fn, args, n = calls[-1]
    assert fn.__name__ == "run_one" and n == 2 and len(args) == len(claims_rerun.order(claims_rerun.NEED))
    data, runs, results, (seed, level, methods, knobs) = args[0]
    assert (runs, results, seed, level) == ("runs/x", str(claims_rerun.RESULTS), claims_rerun.FIRST_SEED, 0.0)
    claims_rerun.run(argparse.Namespace(levels=[0.25, 0.75], runs="runs/x", jobs=1))
    assert {a[3][1] for a in calls[-1][1]} == {0.25, 0.75}


def plan_table():
    """{claim: (endpoint, SD's upper 80% bound, seeds text)} of RERUN_PLAN.md's pasted sizing table."""
    text = (Path(__file__).resolve().parents[1] / "lab/results/claims/RERUN_PLAN.md").read_text()
    rows = re.findall(r"^\| ([A-Z][^|]*?) \| ([\w -]+) \| \d+ seeds \| .*? \| ([\d.]+) \| ([^|]+) \|$", text, re.M)
    return {name: (endpoint, bound, seeds.strip()) for name, endpoint, bound, seeds in rows}


def test_the_rerun_judges_the_plans_29_claims_each_on_the_seeds_both_arms_train_with_the_plans_bounds():
    from lab import claims_report as cr
    from lab.claims_plan import CLAIMS, SWEEP_CLAIMS
    from lab.claims_rerun import FIRST_SEED, NEED, RESULTS, TABLE2_25, claims_of, sizing

    sized = sizing()
    run = claims_of(sized, NEED)
    judged = {c.name for c in run.claims + run.sweeps if not c.at_least}
    plan = plan_table()
    assert judged == {c.name for c in CLAIMS + SWEEP_CLAIMS + TABLE2_25 if not c.at_least} and len(judged) == 29
    assert {c.name for c in run.claims + run.sweeps} == set(plan)  # every claim of the plan's table, no other
    res = cr.load(RESULTS) | cr.load_sweeps(RESULTS)  # the whole rerun, committed
    for c in run.claims + run.sweeps:
        row = sized[c.name][1]
        # RERUN_PLAN.md: every rerun seed on file with both arms (S1 delta +-1 on the sweep's 8, not NEED's 5)
        both = tuple(
            s for s in range(FIRST_SEED, FIRST_SEED + HI) if None not in (c.a(res, s, "1-shot"), c.b(res, s, "1-shot"))
        )
        assert c.seeds == both and row["seeds"] <= len(both) <= HI and c.group == "", c.name
        assert len(c.seeds) >= min(NEED[level][m] for level, m in c.a.arms + c.b.arms), c.name
        endpoint, bound, seeds = plan[c.name]
        bounds = dict(c.sized[0])
        assert f"{100 * max(bounds.values()) if c.at_least else 100 * bounds[endpoint]:.1f}" == bound, c.name
        if c.at_least:  # amendment 1: "not worse" at 97.5%, marked short where its seeds' joint power falls below 0.8
            from math import prod

            from lab.statistics import not_worse_power

            joint = prod(not_worse_power(len(c.seeds), b, 0.02, 0.025) for b in bounds.values())
            assert c.not_worse_level == 0.975 and (c.sized[1] is None) == (joint >= 0.8), c.name
        else:
            assert seeds.startswith(str(row["seeds"])) and (c.sized[1] is None) == ("short" not in seeds), c.name
    reported = {c.name: (c.a.arms + c.b.arms, c.seeds) for c in run.reported}
    five = tuple(range(FIRST_SEED, FIRST_SEED + 5))
    assert reported == {  # RERUN_PLAN.md: reported beside them, not judged, on 5 seeds
        "F2 at 25%": (((0.25, "oracle"), (0.25, "xid")), five),
        "F2 at 75%": (((0.75, "oracle"), (0.75, "xid")), five),
        "F3 at 75%": (((0.75, "weighted"), (0.75, "xid")), five),
        "F4 at 25%": (((0.25, "weighted"), (0.25, "oracle")), five),
    }
    assert run.table2 == (0.0, 0.25, 0.5) and run.per_row
    # the first run keeps PLAN.md's one-sided 95%
    assert {c.not_worse_level for c in cr.FIRST_RUN.sweeps if c.at_least} == {0.95}


def test_claims_of_refuses_an_arm_no_branch_trains_or_fewer_seeds_than_a_claim_was_sized_for():
    import pytest

    from lab.claims_rerun import NEED, claims_of, sizing

    sized = sizing()
    with pytest.raises(SystemExit, match="T1a: arms \\[\\(0.0, 'soft:oracle'\\)\\] not in NEED"):
        claims_of(sized, {**NEED, 0.0: {k: v for k, v in NEED[0.0].items() if k != "soft:oracle"}})
    with pytest.raises(SystemExit, match="T1a: its arms train 5 seeds, fewer than the 7"):
        claims_of(sized, {**NEED, 0.0: {**NEED[0.0], "soft:oracle": 5}})


def test_a_capped_rerun_claim_reads_underpowered_with_the_effect_15_seeds_find_and_each_endpoint_its_own_bound():
    from dataclasses import replace

    from lab import claims_report as cr

    swing = [0.02, -0.02, 0.01, -0.01, 0.0] * 3  # mean 0, SD 1.46 points on both endpoints: not shown
    noise = {
        0.0: {
            s: {"xid": {m: 0.5 for m in cr.PRIMARY}, "weighted": {m: 0.5 + g for m in cr.PRIMARY}}
            for s, g in enumerate(swing)
        }
    }
    claim = diff_claim("X", "Weighted > xID", "", 0.0, "weighted", 0.0, "xid")
    # sized on in-domain only, at 1.0 points: transfer (never measured) is not held to it
    capped = replace(claim, seeds=tuple(range(15)), group="0%", sized=((("1-shot", 0.010),), 0.3, 0.019))
    verdict = cr.judge(capped, noise)["verdict"]
    assert verdict == (
        "not shown; underpowered (planned power 0.30, 15 seeds find 1.9 points); "
        "SD seen above the planned: 1-shot 1.5 (planned 1.0)"
    )
    both = replace(capped, sized=((("1-shot", 0.02), ("transfer 1-shot", 0.01)), 0.3, 0.019))
    assert cr.judge(both, noise)["verdict"].endswith("SD seen above the planned: transfer 1-shot 1.5 (planned 1.0)")
    powered = replace(capped, sized=((("1-shot", 0.02),), None, None))  # its own plan, not its group's (0%'s SHORT)
    assert cr.judge(powered, noise)["verdict"] == "not shown"


def test_the_rerun_report_judges_a_whole_claim_gives_each_row_its_seeds_and_waits_to_touch_the_documents(
    tmp_path, monkeypatch
):
    from lab import claims, claims_docs, claims_rerun
    from lab import claims_report as cr
    from test_claims import write_setting

    run = claims_rerun.claims_of()  # sized from the committed first run and check, before leaving the repository
    folder = tmp_path / "lab/results/claims/rerun"
    (folder / "settings").mkdir(parents=True)
    row = {m: 0.5 for m in cr.PRIMARY + cr.SHOWN + ("R@5", "AUROC")}
    for i, seed in enumerate(range(1500, 1510)):  # T2a 25%'s 10 seeds, Weighted ahead by 4.0-4.4 points
        ahead = {m: 0.5 + 0.04 + 0.002 * (i % 3) for m in row}
        rows = {"xid": row, "weighted": ahead, "soft": row, "robust": row} | ({"oracle": row} if i == 0 else {})
        write_setting(folder / "settings", seed, 0.25, rows)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(claims_rerun, "claims_of", lambda: run)  # the committed files it sizes from are not here
    (tmp_path / "README.md").write_text("<!-- README-VERDICTS -->\nold\n## Next\n")
    (tmp_path / "lab" / "CLAIMS.md").write_text("<!-- VERDICT -->\nold\n")
    claims.main(["report"])  # the rerun is the default run
    table2 = (folder / "table2.md").read_text()
    assert "| xID | 10: 1500-1509 |" in table2 and "| Oracle-xID | 1: 1500 |" in table2  # not cut to the common seed
    verdict = (folder / "VERDICT.md").read_text()
    assert verdict.startswith("# The claims, judged by [RERUN_PLAN.md](../RERUN_PLAN.md)")
    assert "Holm across all 29" in verdict and "incomplete (10 of 13 seeds)" in verdict  # T2e 25%: Robust's 13
    assert "Code: run on commit a8be88a, today's code" in verdict  # RERUN_PLAN.md: the code it ran on
    t2a = next(line for line in verdict.splitlines() if line.startswith("| **T2a 25%**"))
    assert "| 10 | +4.2 [" in t2a and "| holds (1-shot, transfer 1-shot) |" in t2a
    assert (tmp_path / "lab" / "CLAIMS.md").read_text() == "<!-- VERDICT -->\nold\n"  # not yet: most claims lack seeds
    claims_docs.update(Path("lab/results/claims/rerun"), cr.load(folder), run)  # what `report` does once all are in
    claims_md = (tmp_path / "lab" / "CLAIMS.md").read_text()
    assert "From lab/results/claims/rerun/VERDICT.md" in claims_md and "](results/claims/RERUN_PLAN.md)" in claims_md
    readme = (tmp_path / "README.md").read_text()  # T2a-T2d at 25% have their 10 seeds here; the rest wait
    assert "4 of 32 claims have all their planned seeds" in readme and "run on commit a8be88a" in readme
    assert "made by `python -m lab.claims report`:" in claims_md  # the command that remakes what is committed


def test_only_report_reads_the_run_switch(monkeypatch):
    import pytest

    from lab import claims

    def trains(args):
        raise AssertionError("`run --run ...` trained the first run's plan")

    monkeypatch.setattr(claims, "run", trains)
    for action in ("run", "seeds"):
        for which in ("first", "rerun"):
            with pytest.raises(SystemExit) as stop:
                claims.main([action, "--run", which])
            assert stop.value.code == 2, (action, which)  # argparse's usage error, before anything runs


def test_report_writes_only_the_reruns_verdicts_into_the_documents(monkeypatch):
    """The documents cite the rerun: a plain `report` hands the rerun's folder and claims to the documents'
    update, and `report --run first` remakes the first run's report aside and never calls it."""
    from lab import claims, claims_docs, claims_power, claims_rerun
    from lab import claims_report as cr

    calls, written = [], []
    run = claims_rerun.claims_of()
    monkeypatch.setattr(claims_rerun, "claims_of", lambda: run)
    monkeypatch.setattr(cr, "main", lambda folder, which, out: written.append((Path(folder), which, out)) or {})
    monkeypatch.setattr(claims_docs, "waiting", lambda *a: [])  # as if every claim had its seeds
    monkeypatch.setattr(
        claims_docs, "update", lambda folder, res, which, power: calls.append((Path(folder), which, power))
    )
    claims.main(["report"])
    power = claims_power.show_power(*claims_power.power_seen(claims_rerun.RESULTS, run))  # CLAIMS.md's block
    assert written == [(claims_rerun.RESULTS, run, None)] and calls == [(claims_rerun.RESULTS, run, power)]
    claims.main(["report", "--run", "first"])
    assert written[-1] == (claims.RESULTS, cr.FIRST_RUN, claims.FIRST_OUT) and len(calls) == 1


FIG7_PNGS = ["fig7_1shot.png", "fig7_R5.png", "fig7_transfer_1shot.png"]


def test_the_first_runs_report_remade_aside_gives_history_md_its_verdicts_and_leaves_the_documents_alone(
    tmp_path, monkeypatch
):
    """The first run's report files left lab/results/claims/ with the rerun (RERUN.md's step 3): `report --run
    first` must still remake them from the committed settings alone, outside the repository's documents,
    with the verdicts lab/results/HISTORY.md keeps for it."""
    from lab import claims

    root = Path(__file__).resolve().parents[1]
    documents = {name: (root / name).read_text() for name in ("README.md", "lab/CLAIMS.md")}
    monkeypatch.setattr(claims, "FIRST_OUT", str(tmp_path))  # its default folder, runs/claims_first
    claims.main(["report", "--run", "first", "--results", str(root / "lab/results/claims")])
    made = sorted(p.name for p in tmp_path.iterdir())
    assert made == sorted(["VERDICT.md", "fig7.md", "table1.md", "table2.md", "sweeps.md"] + FIG7_PNGS)
    assert {name: (root / name).read_text() for name in documents} == documents
    verdict = (tmp_path / "VERDICT.md").read_text()
    history = (root / "lab/results/HISTORY.md").read_text().split("## The claims' first run on `data/synth_src2p`")[1]
    kept = [line.split(" | ") for line in history.splitlines() if re.match(r"\| [FTNS]\d", line)]
    assert len(kept) == 27  # every judged claim of the first run
    for name, _, one, transfer, word, _ in kept:
        row = next(r for r in verdict.splitlines() if r.startswith(f"| **{name.strip('| ')}**"))
        assert f" | {one} | {transfer} | " in row and f" | {word} | " in row, name


def test_the_code_the_report_names_is_the_commit_rerun_md_says_every_setting_ran_from():
    from lab.claims_rerun import CODE

    text = (Path(__file__).resolve().parents[1] / "lab/results/claims/RERUN.md").read_text()
    assert re.search(r"Every setting runs from commit \*\*(\w+)\*\*", text).group(1) == CODE


def test_status_counts_a_setting_whole_only_with_every_branch_and_every_sweep_value(tmp_path):
    from lab.claims_rerun import FIRST_SEED, NEED, order, status
    from test_claims import write_setting

    (tmp_path / "settings").mkdir()
    (tmp_path / "delta_settings").mkdir()
    first = order(NEED)[0]  # seed 1500 at 0%: every 0% branch
    write_setting(tmp_path / "settings", FIRST_SEED, 0.0, {m: {} for m in first[2]})
    fifty = ("xid", "weighted", "oracle", "soft", "robust")
    write_setting(tmp_path / "settings", FIRST_SEED, 0.5, {m: {} for m in fifty})
    write_setting(tmp_path / "delta_settings", FIRST_SEED, 0.5, {v: {} for v in ("xid", "-2", "-1", "1", "known")})
    lines, missing = status(tmp_path)
    assert lines[0] == f"- {FIRST_SEED} at 0%: finished" and missing == len(order(NEED)) - 1
    assert lines[1] == f"- {FIRST_SEED} at 50%: lacks lambda 0.25, lambda 0.5, lambda 0.65, lambda 0.9, lambda 1"


def test_changes_lists_only_the_claims_whose_verdict_word_moved(tmp_path):
    from dataclasses import replace

    from lab import claims_report as cr
    from lab.claims_plan import CLAIMS, Run
    from lab.claims_rerun import changes
    from test_claims import write_setting

    f3a = next(c for c in CLAIMS if c.name == "F3a")
    swing = [0.02, -0.02, 0.01, -0.01, 0.0]
    for folder, seeds, lift in ((tmp_path / "first", f3a.seeds, 0.05), (tmp_path / "rerun", range(1500, 1515), 0.0)):
        (folder / "settings").mkdir(parents=True)
        for i, s in enumerate(seeds):
            base = {m: 0.5 for m in cr.PRIMARY}
            ahead = {m: 0.5 + lift + swing[i % 5] for m in cr.PRIMARY}  # +5 points steady, or nothing
            write_setting(folder / "settings", s, 0.5, {"xid": base, "weighted": ahead})
    run = Run([replace(f3a, seeds=tuple(range(1500, 1515)))], [], [])
    (row,) = changes(run, tmp_path / "first", tmp_path / "rerun")
    assert row[0] == "F3a" and row[1].startswith("holds") and row[2].startswith("not shown")
    steady = Run([replace(f3a, seeds=tuple(range(400, 415)))], [], [])  # the first run judged again: no change
    assert changes(steady, tmp_path / "first", tmp_path / "first") == []


def test_no_not_worse_verdict_of_the_rerun_holds_with_its_printed_lower_bound_below_the_margin():
    """The committed rerun, judged as `lab.claims report` judges it: every 'not worse' claim that holds has the
    lower end of its printed 95% interval at or above -2 points on every endpoint it was tested on, and the
    exact bound above -2 (RERUN_PLAN.md's amendment 1)."""
    from lab import claims_report as cr
    from lab.claims_rerun import RESULTS, claims_of

    res = cr.load(RESULTS) | cr.load_sweeps(RESULTS)
    judged = [c for c in claims_of().sweeps if c.at_least]
    assert [c.name for c in judged] == ["S1 delta -2", "S1 delta -1", "S1 delta 1"]
    for c in judged:
        j = cr.judge(c, res)
        if not j["verdict"].startswith("holds"):
            continue
        for m in cr.PRIMARY:
            if c.at_floor(res, m):
                continue
            low = float(re.search(r"\[([-+\d.]+),", j["cells"][m]).group(1))
            assert low >= -100 * cr.MARGIN and cr.interval(*c.sides(res, m), c.paired)[1] > -cr.MARGIN, (c.name, m)


def test_the_power_block_counts_an_endpoint_wider_than_its_bound_and_its_power_falls(tmp_path):
    """lab.claims_power: an endpoint whose SD came out above its planning bound is counted at its share
    and listed with a lower power at the SD seen than at the planned one; one within its bound is counted only."""
    from dataclasses import replace
    from statistics import stdev

    from lab.claims_plan import Run
    from lab.claims_power import chance_wider, power_seen, show_power
    from lab.statistics import not_worse_power, power
    from test_claims import write_setting

    folder = tmp_path / "rerun"
    (folder / "settings").mkdir(parents=True)
    swing = [0.03, -0.01, 0.05, 0.0, 0.02, 0.04]  # weighted - xID: mean 2.2, SD 2.3 points; soft: SD 0
    for s, g in enumerate(swing):
        row = {m: 0.5 for m in ("1-shot", "transfer 1-shot")}
        write_setting(
            folder / "settings",
            s,
            0.5,
            {"xid": row, "weighted": {m: 0.5 + g for m in row}, "soft": {m: 0.52 for m in row}},
        )
    wide = diff_claim("W", "Weighted > xID", "", 0.5, "weighted", 0.5, "xid")
    near = diff_claim("N", "Weighted >= xID", "", 0.5, "weighted", 0.5, "xid", at_least=True)
    calm = diff_claim("S", "Soft > xID", "", 0.5, "soft", 0.5, "xid")
    bounds = (("1-shot", 0.01),)
    claims = [replace(c, seeds=tuple(range(6)), sized=(bounds, None, None)) for c in (wide, calm)]
    sized = {c.name: (c, {"endpoint": "1-shot", "low": 0.015, "n": 15}) for c in claims}
    rows, counts = power_seen(folder, Run(claims, [], []), sized)
    chance = chance_wider(15, 6)  # (s_new / s_old)^2 ~ F(5, 14) beyond 14 / chi2_0.2(14)
    assert 0.2 < chance < 0.3 and counts == {"50%": [(True, chance), (False, chance)]}
    (row,) = rows
    cells = row.split(" | ")
    assert cells[0] == "| W" and cells[3] == "1-shot 2.32 > 1.00" and float(cells[6]) < float(cells[5])
    assert cells[5] == f"{power(6, 0.01, 0.015, 0.025):.3f}"  # the plan's effect at the planned SD, Holm's 0.025
    tail = 1 - (1 - chance) ** 2  # one or more of two
    assert f"| 50% | 2 | 1 | {2 * chance:.1f} | {tail:.3f} |" in show_power(rows, counts)
    # "not worse": the joint power at amendment 1's one-sided 97.5%, when the truth is 0
    s1 = replace(near, seeds=tuple(range(6)), sized=(bounds, None, None), not_worse_level=0.975)
    (row,), _ = power_seen(folder, Run([], [s1], []), {"N": (s1, {"n": 15})})
    cells = row.split(" | ")
    assert cells[5] == f"{not_worse_power(6, 0.01, 0.02, 0.025):.3f}" and cells[4] == "0 (margin 2)"
    assert cells[6] == f"{not_worse_power(6, stdev(swing), 0.02, 0.025):.3f}"  # at the SD seen


def test_claims_md_carries_the_power_block_the_command_prints():
    """CLAIMS.md's block between the POWER markers is `python -m lab.claims_power`'s output, unedited."""
    from lab import claims_docs
    from lab.claims_power import power_seen, show_power

    text = (Path(__file__).resolve().parents[1] / "lab" / "CLAIMS.md").read_text()
    block = text.split(claims_docs.POWER_MARK + "\n", 1)[1].split(claims_docs.POWER_END, 1)[0]
    assert block == show_power(*power_seen()) + "\n"
