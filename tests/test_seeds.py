"""The seed registry (lab/seeds.py): every seed the committed results name is in its experiment's row, no two
rows share a seed without a reason, and a plan's fresh seeds are in no row."""

import json

import pytest

from lab import claims_rerun, seeds


def test_every_seed_a_committed_result_names_is_in_its_experiments_row():
    named = seeds.named_in()
    found = {s for rel, f in named.items() if seeds.experiment(rel) == "claims" for s in f}
    assert found == set(range(400, 415))  # the scan reads the settings files, not an empty list
    assert seeds.unregistered() == []


def test_a_file_naming_a_seed_its_row_lacks_or_with_no_row_is_one_line_naming_it(tmp_path):
    def put(rel, content):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(json.dumps(content))

    put("claims/settings/seed399_faulty50.json", {})  # by its name
    put("drums/runs.json", {"drums": {"settings": {"1300": {}, "1399": {}}}})  # a settings entry keyed by its seed
    put("f3b_warmup/warmups.json", {"entries": {"seed600": {}, "seed603": {"seeds": [600]}}})  # a seedN key
    put("brand_new/a.json", {"runs": [{"seed": 5}]})  # a "seed" value, and no row
    put("regime/settings/e/seed100_faulty25.json", {"seed": 100})  # registered: not named
    problems = seeds.unregistered(tmp_path)
    assert len(problems) == 4
    assert any("seed399_faulty50.json: seeds [399]" in p and "'claims'" in p for p in problems)
    assert any("runs.json: seeds [1399]" in p for p in problems)
    assert any("warmups.json: seeds [603]" in p for p in problems)
    assert any("brand_new/a.json" in p and "no row" in p for p in problems)


def test_no_two_rows_share_a_seed_unless_it_is_a_development_seed_or_declared(monkeypatch):
    assert seeds.overlaps() == []
    monkeypatch.setitem(seeds.USED, "another_screen", (range(6, 10), "two development seeds, two of no row"))
    assert seeds.overlaps() == []  # 6 and 7 are development seeds; 8 and 9 are nobody's
    monkeypatch.setitem(seeds.USED, "late_claim", (range(412, 420), "takes the first claims run's last three"))
    assert seeds.overlaps() == ["'claims' and 'late_claim' share seeds [412, 413, 414]"]


def test_fresh_seeds_are_in_no_row_and_the_reruns_row_holds_every_seed_it_plans():
    new = seeds.fresh(15)
    assert new == list(range(new[0], new[0] + 15)) and new[0] % 100 == 0
    assert not set(new) & {s for name in seeds.USED for s in seeds.seeds_of(name)}
    planned = {seed for seed, *_ in claims_rerun.order(claims_rerun.NEED)}
    assert planned == seeds.seeds_of("claims/rerun")


def test_the_command_prints_every_row_and_refuses_no_seeds(capsys):
    seeds.main([])
    out = capsys.readouterr().out
    assert all(name in out for name in seeds.USED) and "1500-1514" in out and f"fresh: {seeds.fresh(1)[0]} on" in out
    with pytest.raises(SystemExit):
        seeds.main(["fresh", "0"])
    assert "n: expected 1 or more, got 0" in capsys.readouterr().err
