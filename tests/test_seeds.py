"""The seed registry (lab/seeds.py): every seed the committed results name is in its experiment's row, no two
rows share a seed without a reason, development seeds stay in checks, and a plan's fresh seeds are in no row."""

import json

import pytest

from lab import claims, claims_plan, claims_rerun, seeds
from lab.screens import demo_screen, epoch_equivalence


def test_every_seed_a_committed_result_names_is_in_its_experiments_row():
    named = seeds.named_in(seeds.tracked(), seeds.ROOT / "lab" / "results")
    by_row = {}
    for rel, found in named.items():
        by_row.setdefault(seeds.row_of(rel), set()).update(found)
    assert by_row["claims"] == set(range(400, 415))  # the settings files, by name
    assert {1000, 1001, 1002, 1003} <= by_row["spread"]  # diagnosis.json: a document keyed by seed
    assert {1300, 1301, 1302} <= by_row["drums"]  # runs.json's settings entries and mass.json's paths
    assert seeds.unregistered() == []


def test_a_file_naming_a_seed_its_row_lacks_or_with_no_row_is_one_line_naming_it(tmp_path):
    def put(rel, content):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(json.dumps(content) if rel.endswith(".json") else content)
        return tmp_path / rel

    files = [
        put("claims/settings/seed399_faulty50.json", {}),  # by its name
        put("drums/runs.json", {"drums": {"settings": {"1300": {}, "1399": {}}}}),  # settings keyed by seed
        put("f3b_warmup/warmups.json", {"entries": {"seed600": {}, "W16/seed603": {"seeds": [600, 604]}}}),
        put("spread/diagnosis.json", {"1000": {}, "1098": {"ckpt": "runs/x/seed1099_faulty25/ckpt.pt"}}),
        put("brand_new/a.json", {"runs": [{"seed": 5}]}),  # a "seed" value, and no row
        put("regime/settings/e/seed100_faulty25.json", {"seed": 100, "flag": True}),  # registered: not named
        put("ccp_length/README.md", "seed 9999 is in a Markdown file: not read"),
        put("claims/delta_settings/seed400_faulty50.json", {"rows": {"-2": {}, "1": {}}}),  # delta values
    ]
    problems = seeds.unregistered(files, tmp_path)
    assert len(problems) == 5, problems
    assert any("seed399_faulty50.json: seeds [399]" in p and "'claims'" in p for p in problems)
    assert any("runs.json: seeds [1399]" in p for p in problems)
    assert any("warmups.json: seeds [603, 604]" in p for p in problems)
    assert any("diagnosis.json: seeds [1098, 1099]" in p for p in problems)
    assert any("brand_new/a.json: seeds [5]" in p and "no row" in p for p in problems)


def test_no_two_rows_share_a_seed_unless_declared_and_development_seeds_stay_in_checks(monkeypatch):
    assert seeds.overlaps() == []
    monkeypatch.setitem(seeds.REGISTRY, "late_claim", (tuple(range(412, 420)), "takes the first run's last three"))
    assert seeds.overlaps() == ["'claims' and 'late_claim' share seeds [412, 413, 414]"]
    monkeypatch.setitem(seeds.REGISTRY, "late_claim", ((7, 8, 9), "a development seed in a claim"))
    assert seeds.overlaps() == ["'late_claim' holds development seeds [7]"]


def test_the_rows_hold_the_seeds_the_code_runs():
    planned = {seed for seed, *_ in claims_rerun.order(claims_rerun.NEED)}
    assert planned == seeds.seeds_of("claims/rerun")
    first = claims_plan.FIRST_SEED
    assert set(range(first, first + max(claims_plan.SEEDS.values()))) == seeds.seeds_of("claims")
    assert set(claims.PILOT_SEEDS) == seeds.seeds_of("power_pilot")
    assert set(claims_rerun.CHECK_SEEDS) <= seeds.seeds_of("spread")
    assert set(demo_screen.SEEDS) == seeds.seeds_of("demo_screen")
    assert set(epoch_equivalence.SEEDS) <= seeds.seeds_of("epoch_speed")


def test_fresh_seeds_are_in_no_row(capsys):
    new = seeds.fresh(15)
    assert new == list(range(new[0], new[0] + 15)) and new[0] % 100 == 0
    assert not set(new) & {s for name in seeds.REGISTRY for s in seeds.seeds_of(name)}
    seeds.main([])
    lines = capsys.readouterr().out.splitlines()
    assert sorted(line.split(":")[0] for line in lines[:-1]) == sorted(seeds.REGISTRY)
    assert any(line.startswith("claims/rerun: 1500-1514  (") for line in lines) and f"fresh: {new[0]} on" in lines[-1]
    with pytest.raises(SystemExit):
        seeds.main(["fresh", "0"])
    assert "n: expected 1 or more, got 0" in capsys.readouterr().err
