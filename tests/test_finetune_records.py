"""A fine-tune that evaluate.py runs (finetune.py, paper Sec. 5.1) keeps its state and its result
in files of its own beside the checkpoint: killed mid-way and rerun, it ends as one never stopped; its
result survives an eval.json that cannot be written; it is found under its own key whatever dots the
checkpoint's name has; and a result made on fewer videos is not reused once the set is whole. On the tiny
UCF101 layout of tests/conftest.py, as a user runs it."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import evaluate
import finetune
from conftest import TUNE, ucf

ROOT = Path(__file__).resolve().parents[1]


def finetune_cmd(ckpt, ucf_data, video_manifest):
    argv = ["finetune", str(ckpt), *ucf(ucf_data, "--fold", 1, "--manifest", video_manifest), *TUNE]
    return [sys.executable, str(ROOT / "evaluate.py"), *argv]


def epoch_lines(text):
    """The fine-tune's epoch lines without their wall-clock seconds (which no rerun repeats): the losses and
    train accuracies to the digits printed, what a resumed run must reproduce."""
    return [re.sub(r", \d+ s\b", "", line) for line in text.splitlines() if line.startswith("fine-tune epoch ")]


def test_a_fine_tune_killed_mid_way_and_rerun_ends_as_one_never_stopped(ucf_data, video_manifest, trained, tmp_path):
    """Its epoch lines reach a pipe (no terminal); killed with SIGKILL after an epoch, the same command
    resumes from the state it kept, and ends at the same losses and the same top-1."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ckpts = [Path(shutil.copy(trained, (tmp_path / name).mkdir() or tmp_path / name / "ckpt.pt")) for name in "ab"]
    whole = subprocess.run(finetune_cmd(ckpts[0], ucf_data, video_manifest), capture_output=True, text=True, env=env)
    assert whole.returncode == 0, whole.stderr
    assert [line.split(":")[0] for line in epoch_lines(whole.stdout)] == [
        f"fine-tune epoch {e}/4" for e in (1, 2, 3, 4)
    ]
    stopped = subprocess.Popen(
        finetune_cmd(ckpts[1], ucf_data, video_manifest), stdout=subprocess.PIPE, text=True, env=env
    )
    for line in stopped.stdout:
        if line.startswith("fine-tune epoch 2/4"):
            stopped.kill()  # SIGKILL: nothing runs after it
            break
    stopped.wait()
    assert stopped.returncode == -9 and list(ckpts[1].parent.glob("finetune_ckpt_*.pt"))
    assert not (ckpts[1].parent / "eval.json").exists()
    again = subprocess.run(finetune_cmd(ckpts[1], ucf_data, video_manifest), capture_output=True, text=True, env=env)
    assert again.returncode == 0, again.stderr
    assert re.search(r"fine-tune: resuming from .*finetune_ckpt_\w+\.pt after epoch [23]/4", again.stdout)
    assert epoch_lines(again.stdout) == epoch_lines(whole.stdout)[-len(epoch_lines(again.stdout)) :]
    a, b = (evaluate.load(c.parent / "eval.json")[0]["results"]["test_acc"] for c in ckpts)
    assert a == b
    assert not list(ckpts[1].parent.glob("finetune_*.pt*"))  # the state goes once the result is kept


def test_a_fine_tunes_result_is_kept_in_its_own_file_when_eval_json_cannot_be_written(
    ucf_data, video_manifest, ckpt, capsys, monkeypatch
):
    argv = ["finetune", str(ckpt), *ucf(ucf_data, "--fold", 1, "--manifest", video_manifest), *TUNE]
    argv[argv.index("4")] = "1"  # one epoch
    with monkeypatch.context() as m:
        m.setattr(
            evaluate, "write_atomically", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left on device"))
        )
        with pytest.raises(SystemExit) as stop:
            evaluate.main(argv)
    assert "\n" not in str(stop.value.code) and "could not write" in str(stop.value.code)
    (kept,) = ckpt.parent.glob("finetune_ckpt_*.json")
    result = json.loads(kept.read_text())
    capsys.readouterr()
    evaluate.main(argv)
    out = capsys.readouterr().out
    assert "fine-tune: finished before" in out and not epoch_lines(out)  # not trained again
    (rec,) = evaluate.load(ckpt.parent / "eval.json")
    assert rec["task"] == "finetune" and rec["results"]["test_acc"] == result["test_acc"]


def test_a_fine_tunes_result_is_read_from_its_own_key_whatever_dots_the_checkpoint_name_has(tmp_path):
    stem = evaluate.version_file("finetune", tmp_path / "ckpt.pt.prev", "c" * 40, "a key")
    Path(f"{stem}.json").write_text(json.dumps({"test_acc": 0.5}))
    (tmp_path / "finetune_ckpt.json").write_text(json.dumps({"test_acc": 0.9}))  # what with_suffix made of it
    assert finetune.finetune(None, None, None, resume=stem)["test_acc"] == 0.5


def test_a_fine_tune_on_fewer_videos_is_not_reused_once_the_set_is_whole(ucf_data, video_manifest, ckpt, capsys):
    """--allow-missing fine-tunes without the silent video; after the rescan the message asks for, the same
    command trains again on every video (its result was reused, under a record saying missing: 0)."""
    tune = ["finetune", str(ckpt), *ucf(ucf_data, "--fold", 1), *TUNE]
    tune[tune.index("4")] = "1"  # one epoch
    evaluate.main([*tune, "--allow-missing"])  # the default manifest leaves the silent video out
    capsys.readouterr()
    evaluate.main([*tune, "--manifest", str(video_manifest)])
    out = capsys.readouterr().out
    assert "finished before" not in out and len(epoch_lines(out)) == 1
    (rec,) = evaluate.load(ckpt.parent / "eval.json")  # the same key: the whole set's record replaced the other
    assert rec["videos"]["test"]["missing"] == 0 and len(list(ckpt.parent.glob("finetune_*.json"))) == 2
