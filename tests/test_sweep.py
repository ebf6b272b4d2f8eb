"""The appendix's sweeps (sweep.py): each value is a branch of demo.py's warm-up, the default is demo.py's
own branch (shared, not retrained), and the tables pair every value with xID and the default by seed."""

import json

import pytest

import demo
import evaluate
from config import parse_config
from lab import sweep
from tools import synthetic

TOY = [
    "--warmup-epochs",
    "1",
    "--epochs",
    "1",
    "--trials",
    "2",
    "--workers",
    "0",
    "--frames",
    "4",
    "--size",
    "32",
    "--batch-size",
    "8",
    "--num-negatives",
    "11",
    "--width",
    "0.125",
]


def test_the_default_value_is_demo_branch_and_the_others_override_only_their_knob():
    knob = sweep.KNOBS["lambda"]
    assert sweep.branch(knob, "lambda", "0.5", 0.14) == ("soft", ["--loss", "soft", "--delta", "0.1400"])
    name, options = sweep.branch(knob, "lambda", "0.8", 0.14)
    cfg = parse_config(["--preset", "demo"] + options)
    assert name == "soft_lambda0.8" and cfg.lam == 0.8 and cfg.loss == "soft" and cfg.delta == 0.14
    name, options = sweep.branch(sweep.KNOBS["delta"], "delta", "-2", 0.14)
    cfg = parse_config(["--preset", "demo"] + options)
    assert name == "weighted_delta-2" and cfg.delta == -2.0 and cfg.loss == "weighted" and cfg.lam == 0.5
    with pytest.raises(ValueError, match="only delta"):
        sweep.branch(knob, "lambda", "known", 0.14)


def test_sweep_tables_pair_each_value_with_xid_and_with_the_default_by_seed():
    def row(r1):
        return {
            "R@1": r1,
            "R@5": r1,
            "1-shot": r1,
            "5-shot": r1,
            "AUROC": 0.5,
            "weight_faulty": 0.4,
            "weight_clean": 0.9,
        }

    points = [
        {"delta": 0.1, "rows": {"xid": row(0.20), "0": row(0.25), "known": row(0.21)}},
        {"delta": 0.2, "rows": {"xid": row(0.30), "0": row(0.33), "known": row(0.30)}},
        {"delta": 0.3, "rows": {"xid": row(0.10), "0": row(0.16), "known": row(0.12)}},
    ]
    text = sweep.tables(points, "delta", ["0", "known"], 0.5)
    # 0 - xID: +5, +3, +6 -> 4.67 [0.9, 8.5]; 0 - known: +4, +3, +4 -> 3.67, sd 0.58, t 4.303 -> [2.2, 5.1]
    assert "| 0 | +4.7 [+0.9, +8.5] |" in text and "| 0 | +3.7 [+2.2, +5.1] |" in text
    assert (
        "| known, +0.20 (default) | 21.0 ± 9.0 |" in text
    )  # the sample SD and "against the default (delta known, +0.20)" in text


def test_a_sweep_reuses_the_demo_warm_up_and_default_branch_and_keeps_finished_points(tmp_path, capsys):
    data = tmp_path / "synth"
    synthetic.generate(
        data, classes=2, train_per_class=6, test_per_class=2, pool=0, faulty=0.25, size=32, seconds=(2.2, 2.4)
    )
    common = ["--data", str(data), "--runs", str(tmp_path / "runs"), "--results", str(tmp_path / "res"), *TOY]
    demo.main(common + ["--methods", "xid", "soft", "--faulty", "0.5", "--no-figures"])
    soft = tmp_path / "runs" / "seed0_faulty50" / "soft" / "ckpt.pt"
    before = soft.stat().st_mtime_ns
    sweep.main(["lambda", "--values", "0.5", "0.9", "--seeds", "0", *common])
    assert soft.stat().st_mtime_ns == before  # the default (lambda 0.5) is the demo's branch, not retrained
    assert (tmp_path / "runs" / "seed0_faulty50" / "soft_lambda0.9" / "ckpt.pt").exists()
    saved = json.loads((tmp_path / "res" / "lambda_settings" / "seed0_faulty50.json").read_text())
    assert set(saved["rows"]) == {"xid", "0.5", "0.9"}
    shown = {r["task"]: r for r in evaluate.load(tmp_path / "runs" / "seed0_faulty50" / "soft" / "eval.json")}
    assert saved["rows"]["0.5"]["R@1"] == shown["retrieval"]["results"]["R@1"]
    text = (tmp_path / "res" / "lambda.md").read_text()
    assert "| 0.5 (default) |" in text and "| 0.9 |" in text and (tmp_path / "res" / "lambda.png").exists()
    capsys.readouterr()
    sweep.main(["lambda", "--values", "0.5", "0.9", "--seeds", "0", *common])  # a rerun trains nothing
    assert "done, from" in capsys.readouterr().out
