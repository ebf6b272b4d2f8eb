"""Evaluation on an official-split layout, kept whole and keyed: a tiny UCF101 layout from the generator
(tests/conftest.py's ucf_data), evaluated by `evaluate.py` as a user runs it. Records keyed by dataset,
fold and protocol (persistence/records.py), folds and their mean, the report's table rows
(analysis/report.py), a split that lost a video stops by name, and `features` writes what the split holds
(protocols/features.py)."""

import json
import re
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

import evaluate
from config import Config
from conftest import UCF_SILENT
from media import manifest
from memory_bank import MemoryBank
from model import AVModel
from persistence import checkpoint, records

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--clips", "2", "--workers", "0", "--device", "cpu"]  # 2 clips per video: the same code, a fifth of it


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """An untrained tiny checkpoint (evaluation reads it as any other): its numbers are not the point."""
    cfg = Config(frames=4, size=32, n_mels=40, n_time=40, width=0.125)
    path = tmp_path_factory.mktemp("run") / "ckpt.pt"
    checkpoint.save_checkpoint(
        path,
        model_args=checkpoint.model_args(cfg),
        clip={},
        config=asdict(cfg),
        model=AVModel(**checkpoint.model_args(cfg)).state_dict(),
        bank=MemoryBank(16, seed=0).state_dict(),
        instances=None,
        epoch=7,
    )
    return path


@pytest.fixture
def ckpt(trained, tmp_path):
    """The checkpoint in a folder of this test's own, so that its eval.json starts empty."""
    return Path(shutil.copy(trained, tmp_path / "ckpt.pt"))


@pytest.fixture(scope="module")
def video_manifest(ucf_data, tmp_path_factory):
    """A manifest of ucf_data scanned as the error message says: without requiring audio."""
    out = tmp_path_factory.mktemp("scan") / "manifest.csv"
    manifest.main(["scan", str(ucf_data), "--video-only", "--jobs", "1", "--out", str(out)])
    return out


def ucf(ucf_data, *args):
    return ["--data", str(ucf_data), "--layout", "ucf101", *map(str, args), *FAST]


def test_folds_evaluated_one_after_another_keep_a_record_each_and_a_fold_list_prints_their_mean(
    ucf_data, video_manifest, ckpt, capsys
):
    for fold in (1, 2):
        evaluate.main(["retrieval", str(ckpt), *ucf(ucf_data, "--fold", fold, "--manifest", video_manifest)])
    kept = records.load(ckpt.parent / "eval.json")
    assert sorted(r["fold"] for r in kept) == [1, 2] and {r["task"] for r in kept} == {"retrieval"}
    one = next(r for r in kept if r["fold"] == 1)
    assert one["dataset"] == str(ucf_data.resolve()) and one["layout"] == "ucf101" and one["checkpoint_epoch"] == 7
    assert one["videos"]["test"] == {"used": 5, "missing": 0, "missing_files": []}
    assert one["videos"]["train"] == {"used": 8, "missing": 0} and one["protocol"]["clips"] == 2
    capsys.readouterr()

    evaluate.main(["retrieval", str(ckpt), *ucf(ucf_data, "--fold", 1, 2, 3, "--manifest", video_manifest)])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if re.match(r"\| (1|2|3|mean ± SD) \|", line)]
    assert [r.split("|")[1].strip() for r in rows] == ["1", "2", "3", "mean ± SD"], out
    r1 = [float(r.split("|")[2]) for r in rows[:3]]  # the R@1 column, in %
    mean, sd = (float(x) for x in rows[3].split("|")[2].split("±"))
    assert mean == pytest.approx(np.mean(r1), abs=0.06) and sd == pytest.approx(np.std(r1, ddof=1), abs=0.06)
    assert sorted(r["fold"] for r in records.load(ckpt.parent / "eval.json")) == [1, 2, 3]  # same keys: replaced

    evaluate.main(["report", str(ckpt)])
    text = capsys.readouterr().out
    table4 = text.split("Table 4")[1].split("\n\n")[1].splitlines()
    assert table4[0].startswith("| checkpoint | UCF R@1 | UCF R@5 | UCF R@20 | HMDB R@1")
    cells = [c.strip() for c in table4[2].strip("|").split("|")]
    assert cells[0] == "ckpt.pt, epoch 7" and cells[1].startswith(f"{mean:.1f} ± {sd:.1f} (folds 1, 2, 3) [")
    assert cells[4] == "-" and "not the paper's protocol: UCF retrieval: clips 2 (paper: 10)" in text


def test_a_silent_test_video_left_out_by_the_manifest_stops_the_evaluation_naming_it(ucf_data, ckpt, capsys):
    with pytest.raises(SystemExit) as stop:
        evaluate.main(["retrieval", str(ckpt), *ucf(ucf_data, "--fold", 1)])
    err = str(stop.value.code)
    assert "\n" not in err
    assert err.startswith("evaluate.py: 1 of 5 test videos of ucf101 fold 1") and UCF_SILENT in err, err
    assert f"python -m media.manifest scan {ucf_data} --video-only" in err and "--allow-missing" in err
    assert not (ckpt.parent / "eval.json").exists()

    evaluate.main(["retrieval", str(ckpt), *ucf(ucf_data, "--fold", 1, "--allow-missing")])
    (kept,) = records.load(ckpt.parent / "eval.json")
    assert kept["videos"]["test"]["missing"] == 1 and kept["videos"]["test"]["used"] == 4
    (missing,) = kept["videos"]["test"]["missing_files"]
    assert missing.endswith(f"/{UCF_SILENT}") and (ucf_data / missing).is_file()


def test_audio_features_get_retrieval_and_few_shot_and_a_silent_video_is_missing_for_them(
    ucf_data, video_manifest, ckpt
):
    argv = ["fewshot", str(ckpt), *ucf(ucf_data, "--fold", 1, "--manifest", video_manifest, "--modality", "audio")]
    with pytest.raises(SystemExit, match=f"{UCF_SILENT}: less than one clip of audio.*--modality audio needs"):
        evaluate.main(argv)
    evaluate.main([*argv, "--allow-missing", "--trials", "2"])
    by_task = {r["task"]: r for r in records.load(ckpt.parent / "eval.json")}
    assert set(by_task) == {"retrieval", "fewshot"}
    assert all(r["protocol"]["modality"] == "audio" for r in by_task.values())
    assert "audio encoder" in by_task["retrieval"]["protocol"]["text"]
    assert by_task["fewshot"]["videos"]["test"]["missing"] == 1 and 0 <= by_task["retrieval"]["results"]["R@1"] <= 1


def test_features_writes_an_npz_whose_rows_are_the_split_and_the_readme_example_reads_it(
    ucf_data, video_manifest, ckpt, tmp_path, monkeypatch
):
    parsed = []
    monkeypatch.setattr(manifest, "_READ", {})
    monkeypatch.setattr(manifest, "_parse", lambda path, parse=manifest._parse: parsed.append(path) or parse(path))
    monkeypatch.setattr(manifest, "scan", lambda *a, **k: pytest.fail("a manifest that exists was rebuilt"))
    out = tmp_path / "ucf1.npz"
    evaluate.main(["features", str(ckpt), *ucf(ucf_data, "--fold", 1, "--manifest", video_manifest, "--out", out)])
    assert parsed == [video_manifest.resolve()]  # both splits, both modalities: one read
    f = np.load(out)
    lists = ucf_data / "ucfTrainTestlist"
    expected = [line.split()[0] for name in ("trainlist01.txt", "testlist01.txt") for line in open(lists / name)]
    assert [str(Path(p).relative_to(ucf_data)) for p in f["path"]] == expected
    assert list(f["split"]) == ["train"] * 8 + ["test"] * 5
    classes = [line.split()[1] for line in open(lists / "classInd.txt")]
    assert [classes[k] for k in f["label"]] == [p.split("/")[0] for p in expected] and list(f["classes"]) == classes
    assert f["video"].shape == f["audio"].shape == (13, 64) and np.isfinite(f["video"]).all()
    silent = np.array([p.endswith(UCF_SILENT) for p in f["path"]])
    assert (f["has_audio"] == ~silent).all() and np.isnan(f["audio"][silent]).all()
    assert np.isfinite(f["audio"][~silent]).all()
    assert json.loads(str(f["about"]))["checkpoint_epoch"] == 7

    example = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    lines = [line for line in example.splitlines() if line and not line.startswith(("import", "from"))]
    assert len(lines) == 3  # after the imports: load, split, fit and score
    res = subprocess.run(
        [sys.executable, "-c", example.replace("ucf1.npz", str(out))], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0 and 0 <= float(res.stdout) <= 1, res.stderr


def test_records_keep_every_dataset_and_fold_and_an_older_eval_json_still_reads(tmp_path):
    path = tmp_path / "eval.json"
    path.write_text(
        json.dumps(
            {
                "retrieval": {"R@1": 0.5, "protocol": {"text": "old", "feature_dim": 2048}},
                "analysis": {"protocol": {"text": "bank"}},
                "weights": {"faulty_auroc": 0.9},
            }
        )
    )
    old = records.load(path)
    assert {r["task"] for r in old} == {"retrieval", "analysis"} and all(r["dataset"] is None for r in old)
    assert next(r for r in old if r["task"] == "analysis")["results"] == {"weights": {"faulty_auroc": 0.9}}

    def rec(data, fold, clips=None, r1=0.1):
        protocol = {"text": "t", "feature_dim": 2048, **({"clips": clips} if clips else {})}
        return records.record("retrieval", "ckpt.pt", 3, data, "ucf101", fold, protocol, {"R@1": r1}, None)

    records.add(path, [rec(tmp_path / "UCF101", 1), rec(tmp_path / "UCF101", 2), rec(tmp_path / "HMDB51", 1)])
    records.add(path, [rec(tmp_path / "UCF101", 1, clips=2)])  # another protocol: a record of its own
    kept = records.add(path, [rec(tmp_path / "UCF101", 1, r1=0.7)])  # the same key: replaced
    assert len(kept) == 2 + 4 and json.loads(path.read_text())["format"] == records.FORMAT
    ucf1 = [r for r in kept if r["fold"] == 1 and r["dataset"] == str(tmp_path / "UCF101")]
    assert sorted(r["results"]["R@1"] for r in ucf1) == [0.1, 0.7]
    assert records.of_checkpoint(kept, tmp_path / "ckpt_epoch0004.pt") == old  # only the legacy ones


def test_a_report_cell_never_averages_two_copies_of_a_dataset_and_takes_the_latest_of_equals(tmp_path):
    from analysis import report

    def rec(data, fold, r1, written):
        protocol = {"text": "t", "feature_dim": 2048}
        r = records.record("retrieval", "ckpt.pt", 3, tmp_path / data, "ucf101", fold, protocol, {"R@5": r1}, None)
        return {**r, "written": written}

    raw, prepared = rec("raw", 1, 0.1, "2020-01-01"), rec("prepared", 1, 0.5, "2026-01-01")
    assert report.cell([raw, prepared], "retrieval", "ucf101", "video", "R@5")[0] == "50.0"  # the latest copy
    folds = [rec("prepared", 1, 0.5, "2026-01-01"), rec("prepared", 2, 0.3, "2026-01-02")]
    assert report.cell([raw, *folds], "retrieval", "ucf101", "video", "R@5")[0] == "40.0 ± 14.1 (folds 1, 2)"


def test_features_refuses_several_folds_for_one_file(ckpt, tmp_path, capsys):
    with pytest.raises(SystemExit):
        evaluate.main(["features", str(ckpt), "--fold", "1", "2", "--out", str(tmp_path / "f.npz")])
    assert "one --fold per file" in capsys.readouterr().err


def test_a_manifest_made_for_a_caller_that_needs_audio_still_lists_the_silent_videos(tmp_path):
    """The first call on a folder without a manifest scans it for every later call: a training-style
    call (audio required) must not leave the silent videos out of the evaluation's split."""
    from conftest import ucf_layout
    from media import manifest

    root = ucf_layout(tmp_path / "ucf")
    (root / "manifest.csv").unlink()
    heard = manifest.load_split("ucf101", root, "test", 1, need_audio=True)
    assert any(p.endswith(UCF_SILENT) for p, _ in heard.missing)  # left out of this caller's records
    whole = manifest.load_split("ucf101", root, "test", 1, need_audio=False)
    assert not whole.missing and any(r.path.endswith(UCF_SILENT) for r in whole.records)
