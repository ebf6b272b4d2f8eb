"""The modify-and-rerun (tools/rerun.py) on a toy make demo: an unchanged branch at branch seed 0 is make demo's
own branch, number for number; a change or another branch seed is trained in a folder of its own and printed
beside the warm-up, make demo's branch and the measured noise; a branch seed keeps the warm-up's faults."""

import json
import os

import pytest
import torch

import demo
from tools import rerun, synthetic

TOY = ["--frames", "4", "--size", "32", "--batch-size", "8", "--num-negatives", "15", "--width", "0.125"]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rerun")
    data = tmp / "synth"
    synthetic.generate(
        data, classes=2, train_per_class=8, test_per_class=2, pool=16, faulty=0.0, size=32, seconds=(2.2, 2.6)
    )
    shared = ["--data", str(data), "--runs", str(tmp / "runs"), "--results", str(tmp / "runs"), "--trials", "2"]
    shared += ["--warmup-epochs", "1", "--epochs", "1", "--methods", "xid", "robust", "--workers", "0"]
    demo.main([*shared, "--no-figures", *TOY])
    return tmp, shared


def test_an_unchanged_rerun_is_make_demos_branch_and_a_change_is_its_own(made, capsys, monkeypatch):
    tmp, shared = made
    monkeypatch.setattr(rerun, "NOISE", tmp / "noise.json")
    share = ["--threads", str(max(1, (os.cpu_count() or 1) // 2))]  # make demo's two branches: a share each
    rerun.main([*shared, "--out", str(tmp / "rerun"), *share, *TOY])
    out = capsys.readouterr().out
    theirs = json.loads((tmp / "runs" / "demo_settings" / "seed0_faulty25.json").read_text())["rows"]["robust"]
    assert "(no noise measured for robust at 1 epochs" in out
    for c in rerun.COLUMNS:  # the same epochs and threads as make demo's branch: the same numbers
        assert f"| {c} | {100 * theirs[c]:.1f} |" in out and "| +0.0 |" in out.split(f"| {c} |")[1].split("\n")[0]
    rerun.main([*shared, "--out", str(tmp / "rerun"), "--measure-noise", "3", *share, *TOY])
    noise = json.loads((tmp / "noise.json").read_text())
    assert sorted(noise["rows"]) == ["0", "1", "2"] and noise["method"] == "robust" and noise["epochs"] == 1
    assert noise["rows"]["0"] == {c: theirs[c] for c in rerun.COLUMNS}  # seed 0 again: make demo's branch
    capsys.readouterr()
    rerun.main([*shared, "--out", str(tmp / "rerun"), *TOY, "--lam", "0.9"])
    out = capsys.readouterr().out
    assert "--lam 0.9" in out and "noise (95%, branch seeds)" in out and ("within noise" in out or "beyond" in out)
    folder = next((tmp / "rerun").glob("robust_*lam_0.9_seed0"))
    assert json.loads((folder / "log.jsonl").read_text().splitlines()[0])["epoch"] == 0
    seeded = torch.load(tmp / "rerun" / "noise" / "robust_seed2" / "ckpt.pt", weights_only=True)
    warm = torch.load(tmp / "runs" / "seed0_faulty25" / "warmup" / "ckpt.pt", weights_only=True)
    assert torch.equal(seeded["instances"]["injected"], warm["instances"]["injected"]) and seeded["config"]["seed"] == 2
