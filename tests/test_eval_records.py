"""Evaluation on an official-split layout, kept whole and keyed: a tiny UCF101 layout from the generator
(tests/conftest.py's ucf_data), evaluated by `evaluate.py` as a user runs it. Records keyed by dataset,
fold and protocol (evaluate.py's records), folds and their mean, the report's table rows (tools/analyse.py's
report), and a split that lost a video stops by name. `features`: test_features.py."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import evaluate
from conftest import FAST, TUNE, UCF_SILENT, save_version, ucf
from media import in_memory, manifest
from tools import analyse

ROOT = Path(__file__).resolve().parents[1]


def test_folds_evaluated_one_after_another_keep_a_record_each_and_a_fold_list_prints_their_mean(
    ucf_data, video_manifest, ckpt, capsys
):
    for fold in (1, 2):
        evaluate.main(["retrieval", str(ckpt), *ucf(ucf_data, "--fold", fold, "--manifest", video_manifest)])
    kept = evaluate.load(ckpt.parent / "eval.json")
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
    assert sorted(r["fold"] for r in evaluate.load(ckpt.parent / "eval.json")) == [1, 2, 3]  # same keys: replaced

    analyse.main(["report", str(ckpt)])
    text = capsys.readouterr().out
    table4 = text.split("Table 4")[1].split("\n\n")[1].splitlines()
    assert table4[0].startswith("| checkpoint | UCF R@1 | UCF R@5 | UCF R@20 | HMDB R@1")
    cells = [c.strip() for c in table4[2].strip("|").split("|")]
    assert re.fullmatch(r"ckpt\.pt, epoch 7 \([0-9a-f]{8}\)", cells[0]), cells[0]  # the version: epoch, digest
    assert cells[1].startswith(f"{mean:.1f} ± {sd:.1f} (folds 1, 2, 3) [")
    assert cells[4] == "-" and "not the paper's protocol: UCF retrieval: clips 2 (paper: 10)" in text


def test_a_silent_test_video_left_out_by_the_manifest_stops_the_evaluation_naming_it(ucf_data, ckpt, capsys):
    with pytest.raises(SystemExit) as stop:
        evaluate.main(["retrieval", str(ckpt), *ucf(ucf_data, "--fold", 1)])
    err = str(stop.value.code)
    assert "\n" not in err
    assert err.startswith("evaluate.py: 1 of 5 test videos of ucf101 fold 1") and UCF_SILENT in err, err
    assert f"python -m tools.scan {ucf_data} --video-only" in err and "--allow-missing" in err
    assert not (ckpt.parent / "eval.json").exists()

    evaluate.main(["retrieval", str(ckpt), *ucf(ucf_data, "--fold", 1, "--allow-missing")])
    (kept,) = evaluate.load(ckpt.parent / "eval.json")
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
    by_task = {r["task"]: r for r in evaluate.load(ckpt.parent / "eval.json")}
    assert set(by_task) == {"retrieval", "fewshot"}
    assert all(r["protocol"]["modality"] == "audio" for r in by_task.values())
    assert "audio encoder" in by_task["retrieval"]["protocol"]["text"]
    assert by_task["fewshot"]["videos"]["test"]["missing"] == 1 and 0 <= by_task["retrieval"]["results"]["R@1"] <= 1


def rec(data, fold, r1=0.1, clips=None, task="retrieval", written="2026-01-01"):
    """A record as evaluate.record makes it, of a checkpoint at epoch 3."""
    protocol = {"text": "t", "feature_dim": 2048, **({"clips": clips} if clips else {})}
    videos = {"train": {"used": 8, "missing": 0}, "test": {"used": 5, "missing": 0, "missing_files": []}}
    return {
        **{"task": task, "checkpoint": "ckpt.pt", "checkpoint_epoch": 3, "checkpoint_digest": "d" * 12},
        **{"dataset": str(data), "layout": "ucf101", "fold": fold, "splits": {"annotations": None, "lists": "l"}},
        **{"protocol": protocol, "results": {"R@1": r1, "R@5": r1}, "videos": videos, "written": written},
    }


def test_records_keep_every_dataset_fold_and_protocol_and_replace_one_of_the_same_key(tmp_path):
    path = tmp_path / "eval.json"
    evaluate.add(path, [rec(tmp_path / "UCF101", 1), rec(tmp_path / "UCF101", 2), rec(tmp_path / "HMDB51", 1)])
    evaluate.add(path, [rec(tmp_path / "UCF101", 1, clips=2)])  # another protocol: a record of its own
    kept = evaluate.add(path, [rec(tmp_path / "UCF101", 1, r1=0.7)])  # the same key: replaced
    assert len(kept) == 4 and json.loads(path.read_text())["format"] == evaluate.FORMAT
    ucf1 = [r for r in kept if r["fold"] == 1 and r["dataset"] == str(tmp_path / "UCF101")]
    assert sorted(r["results"]["R@1"] for r in ucf1) == [0.1, 0.7] and evaluate.load(path) == kept


def test_a_report_cell_never_averages_two_copies_of_a_dataset_and_takes_the_latest_of_equals(tmp_path):
    raw, prepared = rec(tmp_path / "raw", 1, 0.1, written="2020-01-01"), rec(tmp_path / "prepared", 1, 0.5)
    assert analyse.cell([raw, prepared], "retrieval", "ucf101", "video", "R@5")[0] == "50.0"  # the latest copy
    folds = [rec(tmp_path / "prepared", 1, 0.5), rec(tmp_path / "prepared", 2, 0.3, written="2026-01-02")]
    assert analyse.cell([raw, *folds], "retrieval", "ucf101", "video", "R@5")[0] == "40.0 ± 14.1 (folds 1, 2)"


def test_a_missing_manifest_names_the_scan_and_a_video_only_one_serves_both_callers(tmp_path):
    """Training and evaluation read the scan's manifest and never make one; a --video-only scan keeps the
    silent videos, so a training-style call (audio required) leaves them out and an evaluation keeps them."""
    from conftest import ucf_layout
    from media import manifest
    from tools import scan

    root = ucf_layout(tmp_path / "ucf")
    (root / "manifest.csv").unlink()
    with pytest.raises(FileNotFoundError, match=f"python -m tools.scan {root} --video-only makes it"):
        manifest.load_split("ucf101", root, "test", 1, need_audio=False)
    scan.main([str(root), "--video-only", "--jobs", "1"])
    heard = manifest.load_split("ucf101", root, "test", 1, need_audio=True)
    assert any(p.endswith(UCF_SILENT) for p, _ in heard.missing)  # left out of this caller's records
    whole = manifest.load_split("ucf101", root, "test", 1, need_audio=False)
    assert not whole.missing and any(r.path.endswith(UCF_SILENT) for r in whole.records)


def cells_of(text, table):
    """The rows of one of the report's tables, each a list of its cells."""
    lines = text.split(table)[1].split("\n\n")[1].splitlines()[2:]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines]


def test_a_fold_list_prints_the_few_shot_rows_and_a_fine_tunes_top1_and_their_mean(
    ucf_data, video_manifest, ckpt, capsys
):
    evaluate.main(["fewshot", str(ckpt), *ucf(ucf_data, "--fold", 1, 2, "--manifest", video_manifest, "--trials", 2)])
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if line.startswith("| fold |"))
    assert "| 1-shot |" in head, out
    rows = [line.split("|") for line in out.splitlines() if re.match(r"\| (1|2|mean ± SD) \|", line)]
    col = [c.strip() for c in head.split("|")].index("1-shot")
    one = [float(r[col]) for r in rows[:2]]
    mean, sd = (float(x) for x in rows[2][col].split("±"))
    assert mean == pytest.approx(np.mean(one), abs=0.06) and sd == pytest.approx(np.std(one, ddof=1), abs=0.06)
    table = evaluate.fold_table(
        {f: {"finetune": {"test_acc": a, "steps": 9, "protocol": {"text": "t"}}} for f, a in ((1, 0.5), (2, 0.7))}
    )
    assert (
        table.splitlines()[0] == "| fold | finetune top-1 |" and table.splitlines()[-1] == "| mean ± SD | 60.0 ± 14.1 |"
    )


def test_more_shots_than_a_class_has_training_videos_are_capped_and_say_so(ucf_data, video_manifest, ckpt, capsys):
    evaluate.main(["fewshot", str(ckpt), *ucf(ucf_data, "--fold", 1, "--manifest", video_manifest, "--trials", 2)])
    rec = next(r for r in evaluate.load(ckpt.parent / "eval.json") if r["task"] == "fewshot")
    assert set(rec["results"]) == {"1-shot", "4-shot"}  # fold 1 trains on 4 videos of each class
    assert rec["protocol"]["capped"] == {"5": 4, "20": 4} and "20-shot capped at 4" in rec["protocol"]["text"]
    analyse.main(["report", str(ckpt)])
    assert "20-shot capped at 4 (the fewest train videos of a class)" in capsys.readouterr().out


def test_the_report_never_averages_two_versions_of_a_checkpoint_file(ucf_data, video_manifest, ckpt, capsys):
    """Evaluating while a run trains: fold 1 on the epoch-7 ckpt.pt, fold 2 on the epoch-8 one saved under
    the same name. Two versions, two rows, no mean across them; and fold 1 of epoch 8 replaces nothing."""
    argv = ["retrieval", str(ckpt), *ucf(ucf_data, "--manifest", video_manifest)]
    evaluate.main([*argv, "--fold", "1"])
    save_version(ckpt, 8, seed=1)
    evaluate.main([*argv, "--fold", "2"])
    evaluate.main([*argv, "--fold", "1"])
    kept = evaluate.load(ckpt.parent / "eval.json")
    assert sorted((r["checkpoint_epoch"], r["fold"]) for r in kept) == [(7, 1), (8, 1), (8, 2)]
    assert len({r["checkpoint_digest"] for r in kept}) == 2
    capsys.readouterr()
    analyse.main(["report", str(ckpt)])
    rows = cells_of(capsys.readouterr().out, "Table 4")
    assert [r[0].split(" (")[0] for r in rows] == ["ckpt.pt, epoch 7", "ckpt.pt, epoch 8"]
    assert "(folds" not in rows[0][1] and rows[1][1].split(" [")[0].endswith("(folds 1, 2)")


def test_a_split_of_ones_own_keeps_a_record_beside_the_official_one_and_says_which(
    ucf_data, video_manifest, ckpt, tmp_path, capsys
):
    alt = tmp_path / "altsplit"
    shutil.copytree(ucf_data / "ucfTrainTestlist", alt)
    test = (alt / "testlist01.txt").read_text().splitlines()
    (alt / "testlist01.txt").write_text("\n".join(test[1:]) + "\n")  # one test video fewer
    argv = ["retrieval", str(ckpt), *ucf(ucf_data, "--manifest", video_manifest, "--fold", 1)]
    evaluate.main(argv)
    evaluate.main([*argv, "--annotations", str(alt)])
    kept = evaluate.load(ckpt.parent / "eval.json")
    assert sorted(str(r["splits"]["annotations"]) for r in kept) == [str(alt), "None"]
    assert len({r["splits"]["lists"] for r in kept}) == 2
    capsys.readouterr()
    analyse.main(["report", str(ckpt)])
    text = capsys.readouterr().out
    assert cells_of(text, "Table 4")[0][1].split(" [")[0] == "{:.1f}".format(
        100 * next(r for r in kept if r["splits"]["annotations"] is None)["results"]["R@1"]
    )  # the official lists' record is the table's
    assert f"split lists from {alt}" in text  # the other is listed, saying which lists


def test_a_corrupt_eval_json_is_set_aside_in_one_line_and_the_new_record_kept(ucf_data, video_manifest, ckpt, capsys):
    (ckpt.parent / "eval.json").write_text('{"format": 2, "rec')
    with pytest.raises(SystemExit) as stop:
        analyse.main(["report", str(ckpt)])
    said = str(stop.value.code)
    assert "\n" not in said and f"{ckpt.parent / 'eval.json'} is not an evaluation records file" in said, said
    assert said.endswith("the next evaluation sets it aside")
    evaluate.main(["retrieval", str(ckpt), *ucf(ucf_data, "--fold", 1, "--manifest", video_manifest)])
    err = capsys.readouterr().err.strip().splitlines()
    said = [line for line in err if "eval.json" in line]
    assert len(said) == 1 and "set it aside as eval.json.corrupt-" in said[0], err
    (aside,) = ckpt.parent.glob("eval.json.corrupt-*")
    assert aside.read_text() == '{"format": 2, "rec'
    assert [r["task"] for r in evaluate.load(ckpt.parent / "eval.json")] == ["retrieval"]


def test_hmdb51_on_a_folder_without_its_lists_names_the_missing_lists(ucf_data, ckpt):
    with pytest.raises(SystemExit) as stop:
        evaluate.main(["retrieval", str(ckpt), "--data", str(ucf_data), "--layout", "hmdb51", *FAST])
    said = str(stop.value.code)
    assert "\n" not in said and f"split lists not found: no {ucf_data}/testTrainMulti_7030_splits/" in said, said


@pytest.fixture(scope="module")
def trained_preload_on(tiny_data, tmp_path_factory):
    """A checkpoint as users have one: train.py saves --preload resolved, here "on" (as the demo presets set it)."""
    from test_train import run

    out = tmp_path_factory.mktemp("preloaded_run")
    run(tiny_data, out, "--warmup-epochs", "1", "--epochs", "0", "--preload", "on", "--workers", "0")
    return out / "ckpt.pt"


def test_evaluation_decides_its_own_preload_never_the_training_runs(
    ucf_data, video_manifest, trained_preload_on, tmp_path, monkeypatch
):
    """A checkpoint trained with --preload on, evaluated where the splits do not fit in the free memory: no
    split is decoded whole (retrieval, features), since --preload auto answers for the evaluated split; with
    room to spare auto preloads, and --preload on preloads whatever the memory."""
    ckpt = Path(shutil.copy(trained_preload_on, tmp_path / "ckpt.pt"))
    assert torch.load(ckpt, weights_only=True)["config"]["preload"] == "on"
    held, real = [], in_memory.hold
    monkeypatch.setattr(in_memory, "hold", lambda videos, *a: held.append(len(videos)) or real(videos, *a))
    argv = ["retrieval", str(ckpt), *ucf(ucf_data, "--fold", 1, "--manifest", video_manifest)]

    def evaluate_with(free, *more):
        monkeypatch.setattr(in_memory, "free_bytes", lambda device: free)
        for cache in ckpt.parent.glob("features_*.pt"):
            cache.unlink()
        held.clear()
        evaluate.main([*argv, *more])
        return list(held)

    assert evaluate_with(1000) == []  # bytes: far below any split
    assert evaluate.load(ckpt.parent / "eval.json")[0]["results"]["R@1"] >= 0
    features = ["features", str(ckpt), *argv[2:], "--out", str(tmp_path / "f.npz")]
    monkeypatch.setattr(in_memory, "free_bytes", lambda device: 1000)
    analyse.main(features)
    assert held == [] and (tmp_path / "f.npz").is_file()
    assert len(evaluate_with(1000, "--preload", "on")) == 2  # both splits: the spy sees a preload when there is one
    assert len(evaluate_with(2**40)) == 2


def test_an_eval_json_of_another_format_is_named_in_one_line_and_set_aside_never_lost(ucf_data, video_manifest, ckpt):
    """A file of another format (a newer version's) is read as no records of this one's: the report names it, and
    the next evaluation sets it aside whole before it writes its own."""
    path = ckpt.parent / "eval.json"
    newer = json.dumps({"format": 3, "records": [{"task": "retrieval", "results": {"R@1": 0.5}}]})
    path.write_text(newer)
    with pytest.raises(ValueError, match=f"{path} is not an evaluation records file .*format 3, not 2"):
        evaluate.load(path)
    with pytest.raises(SystemExit) as stop:
        analyse.main(["report", str(ckpt)])
    said = str(stop.value.code)
    assert "\n" not in said and "format 3" in said and said.endswith("the next evaluation sets it aside"), said
    evaluate.main(["retrieval", str(ckpt), *ucf(ucf_data, "--fold", 1, "--manifest", video_manifest)])
    (aside,) = ckpt.parent.glob("eval.json.corrupt-*")
    assert aside.read_text() == newer and [r["task"] for r in evaluate.load(path)] == ["retrieval"]


def test_the_folds_of_one_command_measure_one_version_of_a_checkpoint_still_being_written(
    ucf_data, video_manifest, ckpt, monkeypatch
):
    """A run that goes on training replaces ckpt.pt between folds: --fold 1 2 reads it once, so the mean is
    over one version (each fold re-read it, and fold_table averaged two)."""
    real, reads = evaluate.read_pretrained, []

    def read_then_train_on(path):
        reads.append(real(path))
        save_version(ckpt, 8, seed=1)  # the run's next epoch lands after this read
        return reads[-1]

    monkeypatch.setattr(evaluate, "read_pretrained", read_then_train_on)
    evaluate.main(["retrieval", str(ckpt), *ucf(ucf_data, "--fold", 1, 2, "--manifest", video_manifest)])
    kept = evaluate.load(ckpt.parent / "eval.json")
    assert sorted(r["fold"] for r in kept) == [1, 2]
    assert {(r["checkpoint_epoch"], r["checkpoint_digest"]) for r in kept} == {(7, reads[0].digest)}


def test_an_evaluation_reads_its_split_lists_once_and_hands_every_protocol_those_records(
    ucf_data, video_manifest, ckpt, monkeypatch
):
    """retrieval, few-shot and a fine-tune of one command, and `features` with both encoders: each split is
    resolved once (evaluate.resolve), and every protocol reads those records; none goes back to the
    lists or the manifest (a rescan mid-way would give one protocol other videos than the next)."""
    real, calls = manifest.load_split, []
    monkeypatch.setattr(manifest, "load_split", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    tune = ["all", str(ckpt), *ucf(ucf_data, "--fold", 1, "--manifest", video_manifest), *TUNE]
    tune[tune.index("4")] = "1"  # one fine-tune epoch
    evaluate.main(tune)
    assert sorted(calls) == ["test", "train"]
    assert {r["task"] for r in evaluate.load(ckpt.parent / "eval.json")} == {"retrieval", "fewshot", "finetune"}
    calls.clear()
    out = ckpt.parent / "both.npz"
    analyse.main(["features", str(ckpt), *ucf(ucf_data, "--fold", 1, "--manifest", video_manifest, "--out", out)])
    assert sorted(calls) == ["test", "train"]  # the audio encoder's rows too: the records' audio decides
    f = np.load(out)
    assert [Path(p).name for p, heard in zip(f["path"], f["has_audio"]) if not heard] == [UCF_SILENT]


def test_a_run_folder_stands_for_its_checkpoint_and_the_numbers_print_in_percent(
    ucf_data, video_manifest, ckpt, capsys
):
    """evaluate.py RUN_DIR reads RUN_DIR/ckpt.pt, and prints its numbers in %, as the tables give them."""
    evaluate.main(["retrieval", str(ckpt.parent), *ucf(ucf_data, "--fold", 1, "--manifest", video_manifest)])
    out = capsys.readouterr().out
    assert "| fold | R@1 | R@5 | R@20 |" in out and "in %; every number with its protocol" in out
    cells = [float(c) for c in next(x for x in out.splitlines() if x.startswith("| 1 |")).strip("| ").split("|")[1:]]
    assert cells[-1] == 100.0  # R@20 of 2 classes: every query finds its class, 100 in %, not 1.0
    with pytest.raises(SystemExit):
        evaluate.main(["retrieval", str(ckpt.parent / "nothing_here")])


def test_a_missing_dataset_root_is_named_as_such_not_as_a_missing_list(ckpt, tmp_path, capsys):
    missing = tmp_path / "UCF101"
    with pytest.raises(SystemExit) as stop:
        evaluate.main(["retrieval", str(ckpt), "--data", str(missing), "--layout", "ucf101", *FAST])
    assert str(stop.value.code) == f"evaluate.py: dataset folder not found: {missing} (--data)"
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as stop:
        evaluate.main(["retrieval", str(tmp_path / "empty")])
    assert "a folder without a ckpt.pt" in capsys.readouterr().err
