"""lab/refactor_guard.py: the old-against-new guard of the restructure keeps a number that moved past train.py's
printed digit, a changed generated file, a key one side lacks and a changed demo row, and lets through what
says only when or how fast (its full run, both sides trained here: `python -m lab.refactor_guard`)."""

from lab import refactor_guard as guard


def side(**change):
    base = {
        "files": {"manifest.csv": b"a,b\n", "train/x.mp4": b"\x00\x01"},
        "log": {"epoch0.loss": 7.21234, "epoch0.knn_class": 0.4375},
        "eval": {"records.0.results.R@1": 0.5},
        "demo": ["| xID | 54.7 |"],
    }
    return {k: change.get(k, v) for k, v in base.items()}


def test_the_same_numbers_to_the_printed_digit_pass_and_any_move_beyond_it_is_named():
    assert guard.compare(side(), side(log={"epoch0.loss": 7.21236, "epoch0.knn_class": 0.4375})) == []
    moved = guard.compare(side(), side(log={"epoch0.loss": 7.2125, "epoch0.knn_class": 0.4375}))
    assert len(moved) == 1 and moved[0].startswith("log: 1 of 2 numbers differ") and "epoch0.loss" in moved[0]
    lost = guard.compare(side(), side(eval={}))
    assert "only old ['records.0.results.R@1']" in lost[0]
    files = guard.compare(side(), side(files={"manifest.csv": b"a,c\n", "train/x.mp4": b"\x00\x01"}))
    assert files == ["the generator's files differ: 1 of 2 (manifest.csv)"]
    demo = guard.compare(side(), side(demo=["| xID | 54.8 |"]))
    assert demo[0].startswith("make demo's tables differ") and "54.8" in demo[0]


def test_numbers_leave_out_what_says_when_where_or_how_fast():
    record = {"loss": 1.5, "clips_per_s": 80.0, "data_wait": 0.5, "seconds": 3, "path": 2, "ok": True, "n": [1, 2]}
    assert guard.numbers({"epoch0": record}) == {"epoch0.loss": 1.5, "epoch0.n.0": 1, "epoch0.n.1": 2}


def test_each_side_runs_the_first_place_its_entry_point_stands(tmp_path):
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools/synthetic.py").write_text("")
    assert guard.entry(tmp_path, guard.GENERATOR) == ["-m", "tools.synthetic"]
    (tmp_path / "tools/synthetic.py").unlink()
    (tmp_path / "synthetic.py").write_text("")
    assert guard.entry(tmp_path, guard.GENERATOR) == ["synthetic.py"]
