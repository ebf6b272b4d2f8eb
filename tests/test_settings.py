"""Bad settings end in one line that names the option, its value and what is allowed: exit status 2
for train.py's and evaluate.py's options (config.py's checks, beside each option), 1 for a dataset
that holds nothing usable; never a traceback."""

import contextlib
import io
import subprocess
import sys

import numpy as np
import pytest

import evaluate
from config import parse_config
from test_train import ROOT, TINY
from tools import synthetic

BAD_TRAIN = {  # option and value -> words the one line must hold
    ("--faulty-fraction", "1.5"): "[0, 1)",
    ("--faulty-fraction", "-0.1"): "[0, 1)",
    ("--delta", "nan"): "finite",
    ("--lam", "inf"): "finite",
    ("--size", "8"): "at least 32",
    ("--frames", "0"): "at least 1",
    ("--batch-size", "-3"): "at least 2",
    ("--batch-size", "1"): "at least 2",
    ("--lr", "-1"): "above 0",
    ("--tau", "0"): "above 0",
    ("--tau-s", "-0.02"): "above 0",
    ("--kappa", "0"): "above 0",
    ("--w-min", "1.5"): "[0, 1]",
    ("--lam", "2"): "[0, 1]",
    ("--momentum", "-0.5"): "[0, 1]",
    ("--num-negatives", "0"): "at least 1",
    ("--fold", "4"): "[1, 3]",
    ("--video-depth", "10"): "9 or 18",
    ("--width", "0"): "above 0",
    ("--fps", "0"): "above 0",
    ("--audio-rate", "100"): "at least 1000",
    ("--workers", "-2"): "-1 (the cores per process) or a count of at least 0",
    ("--device", "gpu"): "auto, cuda, cuda:N or cpu",
    ("--device", "cuda:x"): "auto, cuda, cuda:N or cpu",
    ("--save-every", "-1"): "at least 0",
    ("--seed", "-1"): "at least 0",
    ("--loss", "wighted"): "one of xid, weighted",
    ("--layout", "ucf"): "one of ucf101",
    ("--amp", "fp8"): "one of auto, bf16",
    ("--lr-min", "1"): "at most --lr",
    ("--n-mels", "200"): "each mel band needs an FFT bin",
    ("--frames", "x"): "invalid int value",
    ("--no-such-option", "1"): "unrecognized arguments",
}


def one_line_error(capsys, argv, parse=parse_config):
    with pytest.raises(SystemExit) as stop:
        parse(argv)
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and "\n" not in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("option,value", sorted(BAD_TRAIN))
def test_a_bad_training_option_ends_in_one_line_naming_it(capsys, option, value):
    argv = ["--preset", "demo", option, value]
    if (option, value) == ("--n-mels", "200"):
        argv += ["--n-time", "160"]  # 2 s at 11025 Hz in 160 steps: 139 FFT bins
    err = one_line_error(capsys, argv)
    assert option in err and BAD_TRAIN[option, value] in err, err
    if option != "--no-such-option":
        assert value in err or str(float(value)) in err, err


def test_a_mistyped_option_names_the_nearest_one(capsys):
    err = one_line_error(capsys, ["--lamda", "0.3", "--tua=0.1"])
    assert "unrecognized arguments: --lamda 0.3 --tua=0.1" in err, err
    assert "--lamda: did you mean --lam?" in err and "--tua: did you mean --tau?" in err, err
    err = one_line_error(capsys, ["fewshot", "ckpt.pt", "--trails", "3"], parse=evaluate.main)
    assert "--trails: did you mean --trials?" in err, err


def test_warmup_and_second_stage_of_zero_epochs_are_refused(capsys):
    err = one_line_error(capsys, ["--warmup-epochs", "0", "--epochs", "0"])
    assert "nothing to train" in err


def test_every_training_option_states_what_it_allows_in_its_help(capsys):
    with pytest.raises(SystemExit):
        parse_config(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("--faulty-fraction", "allowed: a value in [0, 1)", "allowed: a value above 0", "allowed: 9 or 18"):
        assert words in text


def test_help_under_a_preset_shows_the_values_that_preset_runs_with(capsys):
    with pytest.raises(SystemExit):
        parse_config(["--preset", "sota", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "[default: 18 under --preset sota; ablation: 9;" in text  # --video-depth
    assert "[default: 512 under --preset sota; ablation: 224;" in text  # --batch-size
    assert "[default: 0.5; allowed" in text  # --lam: the same in both
    with pytest.raises(SystemExit):
        parse_config(["--help"])
    assert "[default: 9; allowed" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--trials", "0"], "--trials 0: expected a value of at least 1"),
        (["--finetune-lr", "nan"], "--finetune-lr nan: expected a finite number"),
        (["--accumulate", "5"], "--accumulate 5: expected a divisor of --finetune-batch (192)"),
        (["--fold", "0"], "--fold 0"),
        (["--layout", "nope"], "--layout 'nope'"),
        (["--jobs", "0"], "--jobs 0"),
        (["--preload", "maybe"], "--preload 'maybe'"),
    ],
)
def test_a_bad_evaluation_option_ends_in_one_line_naming_it(capsys, argv, words):
    err = one_line_error(capsys, ["fewshot", "ckpt.pt", *argv], parse=evaluate.main)
    assert words in err, err


def run_train(*args):
    cmd = [sys.executable, str(ROOT / "train.py"), "--preset", "demo", *TINY, *map(str, args)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_more_negatives_than_training_videos_is_refused_before_training(tiny_data, tmp_path):
    res = run_train("--data", tiny_data, "--out", tmp_path / "run", "--num-negatives", 100000)
    last = res.stderr.strip().splitlines()[-1]
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    assert "--num-negatives 100000: expected fewer than the 16 training videos" in last
    assert not (tmp_path / "run" / "ckpt.pt").exists()


def test_a_folder_of_unusable_files_is_refused_in_one_line_after_the_scan_names_each_with_its_reason(tmp_path):
    from tools import scan

    root = tmp_path / "bad"
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        (root / cls / "empty.mp4").write_bytes(b"")
        (root / cls / "text.mp4").write_text("not a video")
        synthetic.write_mp4(root / cls / "silent.mp4", np.zeros((20, 32, 32, 3), np.uint8), None, 10, 22050)
        (root / cls / "junk.mp4").write_bytes(b"\0" * 100)
    for needs, fix in (("no train.txt or test.txt", [str(root), "--split"]), ("no manifest", [str(root)])):
        res = run_train("--data", root, "--out", tmp_path / "run")
        last = res.stderr.strip().splitlines()[-1]
        assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
        assert needs in last and f"python -m tools.scan {' '.join(fix)}" in last, last
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            scan.main([*fix, "--jobs", "1"])
    reasons = [line.split(": ")[-1] for line in out.getvalue().splitlines() if line.startswith("unusable:")]
    assert len(reasons) == 8 and reasons.count("empty file") == 2 and reasons.count("no audio stream") == 2, reasons
    res = run_train("--data", root, "--out", tmp_path / "run")
    last = res.stderr.strip().splitlines()[-1]
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    assert last.startswith("train.py: no usable train videos under") and f"python -m tools.scan {root} names" in last


def test_a_batch_larger_than_the_training_set_is_one_line(tiny_data, tmp_path):
    res = run_train("--data", tiny_data, "--out", tmp_path / "run", "--batch-size", "64")
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "--batch-size 64: expected at most the 16 training videos" in res.stderr.strip().splitlines()[-1]


def test_an_empty_dataset_folder_says_so_in_one_line_and_gets_no_file_written_into_it(tmp_path):
    """Nothing is written into a folder that yields no videos (no split lists, no manifest), so that once
    the videos are added the same command finds them."""
    (tmp_path / "empty" / "cats").mkdir(parents=True)
    res = run_train("--data", tmp_path / "empty", "--out", tmp_path / "run")
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "no train videos found under" in res.stderr.strip().splitlines()[-1]
    assert sorted(p.name for p in (tmp_path / "empty").rglob("*")) == ["cats"]


def test_an_out_that_is_a_file_is_one_line_and_the_file_stays(tiny_data, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    res = run_train("--data", tiny_data, "--out", tmp_path / "notes.txt")
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    assert f"--out {tmp_path / 'notes.txt'} is a file; expected a run folder" in res.stderr.strip().splitlines()[-1]
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--classes", "0"], "--classes 0: expected a value in [1, 25]"),
        (["--test-per-class", "-2"], "--test-per-class -2: expected a value of at least 0"),
        (["--train-per-class", "0"], "--train-per-class 0: expected a value of at least 1"),
        (["--size", "33"], "--size 33: expected an even value of at least 16"),
        (["--seconds", "4", "3"], "--seconds 4 3: expected the shortest first"),
        (["--faulty", "2"], "--faulty 2.0: expected a value in [0, 1]"),
        (["--clips-per-source", "3"], "clips_per_source=3: expected a positive divisor"),
    ],
)
def test_a_bad_generator_option_ends_in_one_line_naming_it(tmp_path, capsys, argv, words):
    with pytest.raises(SystemExit) as stop:
        synthetic.main(["--out", str(tmp_path / "set"), "--train-per-class", "4", *argv])
    said = str(stop.value.code) if stop.value.code != 2 else capsys.readouterr().err.strip()
    assert stop.value.code != 0 and said.startswith("tools/synthetic.py: ") and "\n" not in said, said
    assert words in said, said
    assert not (tmp_path / "set").exists()


def test_a_missing_or_unreadable_init_checkpoint_is_one_line(tiny_data, tmp_path):
    (tmp_path / "junk.pt").write_text("not a checkpoint")
    for path, words in ((tmp_path / "none.pt", "no such checkpoint"), (tmp_path / "junk.pt", "cannot be read")):
        res = run_train("--data", tiny_data, "--out", tmp_path / "run", "--init", path)
        last = res.stderr.strip().splitlines()[-1]
        assert res.returncode != 0 and "Traceback" not in res.stderr and f"--init {path}" in last and words in last


def test_a_missing_checkpoint_for_evaluation_is_one_line():
    res = subprocess.run(
        [sys.executable, str(ROOT / "evaluate.py"), "retrieval", "no/such/ckpt.pt"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode != 0 and "Traceback" not in res.stderr
    # a relative path is named with the working directory it was looked for in
    said = f"evaluate.py: checkpoint not found: no/such/ckpt.pt (in the working directory {ROOT})"
    assert res.stderr.strip().splitlines() == [said]


def test_a_missing_relative_dataset_folder_names_the_working_directory(tmp_path, monkeypatch):
    from data import build_train_set

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        build_train_set(parse_config(["--preset", "demo"]))
    assert f"not found: data/synth_src2p (in the working directory {tmp_path}) (--data)" in str(stop.value)


def test_the_options_and_the_values_the_docs_use_pass_the_checks():
    """The presets themselves, and the tests' tiny setting, are allowed."""
    for preset in ("ablation", "sota", "demo"):
        parse_config(["--preset", preset])
    parse_config(["--preset", "demo", *TINY])
    assert parse_config(["--device", "cuda:1"]).device == "cuda:1"
