"""The demo's runs (demo.py): the generator and the demo never write into a user's folder;
settings run side by side or one after another give the same numbers, a finished one is read back,
and the options are typed fields. Its tables: tests/test_demo_report.py."""

import os
from dataclasses import fields, replace
from pathlib import Path

import pytest

import demo
from config import PRESETS
from demo import TRANSFER, DemoArgs, parse_args
from tools import demo_report, synthetic


def test_the_generator_refuses_a_folder_it_did_not_make(tmp_path):
    user = tmp_path / "mine"
    (user / "cats").mkdir(parents=True)
    (user / "train.txt").write_text("cats/1.mp4\n")
    with pytest.raises(FileExistsError, match="not made by synthetic.py"):
        synthetic.generate(user, classes=1, train_per_class=1, test_per_class=1, pool=0, size=32, seconds=(2.2, 2.2))
    assert (user / "train.txt").read_text() == "cats/1.mp4\n" and sorted(p.name for p in user.iterdir()) == [
        "cats",
        "train.txt",
    ]


def test_the_demo_uses_a_user_folder_as_it_is_and_regenerates_only_its_own(tmp_path, capsys, monkeypatch):
    user = tmp_path / "mine"
    (user / "cats").mkdir(parents=True)
    (user / "ground_truth.csv").write_text("path,faulty_audio\n")
    made = []
    monkeypatch.setattr(synthetic, "main", lambda argv: made.append(argv))
    synthetic.ensure(user)
    assert made == [] and "not a synthetic set" in capsys.readouterr().out
    assert (user / "ground_truth.csv").read_text() == "path,faulty_audio\n"
    synthetic.ensure(tmp_path / "new")  # a folder that does not exist yet
    assert made == [["--out", str(tmp_path / "new")]]
    own = tmp_path / "own"
    own.mkdir()
    (own / synthetic.MARKER).write_text("")
    synthetic.ensure(own)  # made by the generator, manifest missing: regenerate
    assert made[-1] == ["--out", str(own)]
    (own / "manifest.csv").write_text("")
    synthetic.ensure(own)  # made before the injection pool existed: regenerate
    assert len(made) == 3
    (own / "_heldout").mkdir()
    synthetic.ensure(own)  # complete: used as it is
    assert len(made) == 3


@pytest.mark.slow
def test_demo_end_to_end_writes_the_paired_table_of_each_level(tmp_path):
    """The whole demo at toy size: two noise levels, two seeds, three methods; make test-all."""
    import json

    data = tmp_path / "synth"
    synthetic.generate(
        data, classes=2, train_per_class=8, test_per_class=2, pool=0, faulty=0.25, size=32, seconds=(2.2, 2.6)
    )
    argv = [
        "--data",
        str(data),
        "--runs",
        str(tmp_path / "runs"),
        "--results",
        str(tmp_path / "res"),
        "--seeds",
        "0",
        "1",
        "--faulty",
        "0",
        "0.5",
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
        "15",
        "--width",
        "0.125",
    ]
    demo.main(argv)
    text = (tmp_path / "res" / "demo.md").read_text()
    assert "## 50% injected faulty positives" in text and "| Oracle-xID |" in text and "Δ R@1" in text
    saved = json.loads((tmp_path / "res" / "demo.json").read_text())
    assert len(saved["results"]) == 2 and set(saved["results"][0]) == {"0.0", "0.5"}
    assert "minutes in all" in text
    demo.main(argv)  # a rerun reads every setting back, and its table says its time is not theirs
    again = (tmp_path / "res" / "demo.md").read_text()
    assert "for the 0 of 4 settings not read from earlier runs' files" in again
    assert again.split("## ")[1:3] == text.split("## ")[1:3]  # both levels' tables; pictures of what ran here only


def test_jobs_run_settings_side_by_side_and_their_results_are_merged(tmp_path, capsys):
    """--jobs 2: two (seed, level) settings in two processes at once, one table over both seeds, and
    the time split over both processes' phases."""
    import json

    data = tmp_path / "synth"
    synthetic.generate(
        data,
        classes=2,
        train_per_class=8,
        test_per_class=2,
        pool=0,
        faulty=0.25,
        size=32,
        seconds=(2.2, 2.6),
        workers=1,
    )
    demo.main(
        [
            "--data",
            str(data),
            "--runs",
            str(tmp_path / "runs"),
            "--results",
            str(tmp_path / "res"),
            "--methods",
            "xid",
            "oracle",
            "--seeds",
            "0",
            "1",
            "--faulty",
            "0.5",
            "--jobs",
            "2",
            "--warmup-epochs",
            "1",
            "--epochs",
            "1",
            "--trials",
            "2",
            "--workers",
            "1",
            "--no-figures",
            "--frames",
            "4",
            "--size",
            "32",
            "--batch-size",
            "8",
            "--num-negatives",
            "15",
            "--width",
            "0.125",
            "--compare",
            str(Path(demo.__file__).parent / "lab" / "results" / "demo.json"),
        ]
    )
    saved = json.loads((tmp_path / "res" / "demo.json").read_text())
    assert [sorted(r) for r in saved["results"]] == [["0.5"], ["0.5"]]
    table = (tmp_path / "res" / "demo.md").read_text()  # what stdout says is in demo.md too
    beside = table.split("## This run beside the reference, and the seeds' spread\n", 1)[1]
    assert (
        "50%: the reference has no such setting" in beside and " threads. The same seed on another CPU kind" in beside
    )
    assert "## Where the time went\n\nTime split: data generation" in table
    files = sorted(p.name for p in (tmp_path / "res" / "demo_settings").iterdir())
    assert files == ["seed0_faulty50.json", "seed1_faulty50.json"]
    assert "over 2 seeds" in (tmp_path / "res" / "demo.md").read_text()
    for seed in (0, 1):  # each process trained its own setting to the end
        assert (tmp_path / "runs" / f"seed{seed}_faulty50" / "oracle" / "ckpt.pt").exists()
        split = json.loads((tmp_path / "runs" / f"seed{seed}_faulty50" / "time_split.json").read_text())
        assert set(split) == {"warm-up", "branch xid", "branch oracle", "evaluation"}
    *_, line, _, wrote = capsys.readouterr().out.strip().splitlines()
    assert line.startswith("Time split: data generation") and "branch oracle" in line and "min in all" in line
    assert wrote == f"[demo] wrote {tmp_path / 'res' / 'demo.md'} (the table; its numbers: demo.json)"  # no figures


@pytest.mark.slow
def test_branches_side_by_side_give_the_numbers_of_branches_one_after_another_at_one_thread(tmp_path):
    """--branch-jobs 3 trains and evaluates the branches in three processes of one thread each (on 2 cores taking
    turns, an epoch at a time: tools/turns.py): the same rows, to the last digit, as --branch-jobs 1 run with one
    thread (only the thread count may change the arithmetic, and here it does not), and the phase timed as one."""
    import faulthandler
    import json

    import torch

    data = tmp_path / "synth"
    synthetic.generate(
        data, classes=2, train_per_class=8, test_per_class=2, pool=0, faulty=0.25, size=32, seconds=(2.2, 2.6)
    )
    common = ["--data", str(data), "--methods", "xid", "weighted", "soft", "--faulty", "0.5", "--warmup-epochs", "1"]
    common += ["--epochs", "2", "--trials", "2", "--workers", "0", "--no-figures", "--frames", "4", "--size", "32"]
    common += ["--batch-size", "8", "--num-negatives", "15", "--width", "0.125"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    faulthandler.dump_traceback_later(900, exit=True)  # a turn that never comes hangs: end with the stacks instead
    try:
        for jobs in ("1", "3"):
            out = tmp_path / f"jobs{jobs}"
            demo.main(common + ["--runs", str(out / "runs"), "--results", str(out), "--branch-jobs", jobs])
    finally:
        faulthandler.cancel_dump_traceback_later()
        torch.set_num_threads(threads)
    one, two = (json.loads((tmp_path / f"jobs{j}" / "demo.json").read_text())["results"] for j in ("1", "3"))
    assert one == two
    split = json.loads((tmp_path / "jobs3" / "runs" / "seed0_faulty50" / "time_split.json").read_text())
    assert set(split) == {"warm-up", "branches and evaluations, side by side"}


def test_a_finished_setting_is_read_back_and_a_changed_one_runs_again(tmp_path, monkeypatch):
    """A later checkout (runs/ gone) skips the settings whose small result file was committed."""
    import json

    args = DemoArgs(
        data="d",
        results=str(tmp_path),
        settings="noisy_settings",
        warmup_epochs=70,
        epochs=8,
        trials=50,
        train_args=[],
        methods=["xid", "oracle"],
        runs=str(tmp_path / "runs"),
        workers=0,
    )
    done = demo.setting_file(args, 1, 0.25)
    assert done == tmp_path / "noisy_settings" / "seed1_faulty25.json"
    done.parent.mkdir()
    rows = {"xid": {"R@1": 0.4}, "oracle": {"R@1": 0.5}, "weighted": {"R@1": 0.3}}
    done.write_text(json.dumps({"key": demo.setting_key(args, 0.25), "delta": -0.5, "rows": rows}))
    monkeypatch.setattr(demo.train, "main", lambda cfg: pytest.fail("a finished setting was trained again"))
    got, delta, root = demo.run_setting(args, 1, 0.25)
    assert {m: row["R@1"] for m, row in got.items()} == {"xid": 0.4, "oracle": 0.5} and delta == -0.5 and root is None
    assert got["xid"]["ran_with"] == {"lr_min": 1e-4}  # what the row ran with, beside its numbers

    class Ran(Exception):
        pass

    def ran(*a, **k):
        raise Ran

    monkeypatch.setattr(demo, "warm_up", ran)
    args.epochs = 9  # other settings: the file is not used
    with pytest.raises(Ran):
        demo.run_setting(args, 1, 0.25)


def test_the_command_line_fills_the_typed_args_and_passes_the_rest_to_train_py():
    """parse_args gives a DemoArgs whose defaults are the dataclass's (make demo's regime); options the demo
    does not know go to train.py, and a method it does not know is refused."""
    args = parse_args(["--faulty", "0", "0.5", "--seeds", "4", "--lr", "3e-4"])
    assert isinstance(args, DemoArgs) and args.train_args == ["--lr", "3e-4"] and args.seeds == [4]
    assert args.faulty == [0.0, 0.5] and args.methods == DemoArgs().methods
    with pytest.raises(SystemExit):
        parse_args(["--methods", "xid", "weighted@shares"])
    assert parse_args([]) == DemoArgs()  # one default per field, the command line's and the dataclass's
    assert DemoArgs(methods=["xid", "soft"]).side_by_side_branches() == (2 if (os.cpu_count() or 1) >= 2 else 1)
    assert DemoArgs(jobs=2).side_by_side_branches() == 1 and DemoArgs(branch_jobs=3).side_by_side_branches() == 3
    assert DemoArgs(transfer="t").columns[-4:] == TRANSFER


def test_make_demo_writes_outside_the_tracked_tree():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    line = next(x for x in text.splitlines() if "demo.py" in x and "$(PY)" in x)
    assert "--runs runs/" in line and "--results runs/" in line and "--compare lab/results/demo.json" in line


def test_the_time_split_adds_each_phase_over_the_settings_and_accounts_for_the_rest(tmp_path):
    for name, times in (
        ("a", {"warm-up": 120.0, "branch xid": 30.0, "evaluation": 12.0}),
        ("b", {"warm-up": 60.0, "evaluation": 6.0}),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "time_split.json").write_text(__import__("json").dumps(times))
    text = demo_report.time_split(30.0, [tmp_path / "a", tmp_path / "b"], 300.0)
    assert text.startswith(
        "Time split: data generation 0.5 min, warm-up 3.0 min, branch xid 0.5 min, evaluation 0.3 min"
    )
    assert "other (start-up, tables, figures) 0.7 min; 5.0 min in all, on " in text
    kind = f"{demo_report.torch.backends.cpu.get_cpu_capability()}, {demo_report.torch.get_num_threads()} threads."
    assert text.endswith(kind) or "AMX" in text  # the CPU kind: the demo's minutes depend on it
    split = {}
    with demo_report.timed(split, "x"):
        pass
    with demo_report.timed(split, "x"):
        pass
    assert set(split) == {"x"} and split["x"] >= 0


def fake_analysis(ckpt, **kwargs):
    """tools/analyse.py's analysis as the demo reads it, without a checkpoint."""
    weights = {"faulty_auroc": 0.7, "mean_weight_faulty": 0.4, "mean_weight_clean": 0.8}
    return {"weights": weights, "soft_targets_same_class": {}}


def test_delta_follows_the_injected_share_and_is_fixed_at_zero():
    """Sec. 5.2: the weights' midpoint at the quantile of the known injected share, Phi^-1(share), so
    that share of normal scores lies below mu + delta sigma; at 0% the rule has no midpoint, so the
    fixed DELTA_AT_ZERO is used instead of -inf."""
    from statistics import NormalDist

    assert demo.paper_delta(0.5) == 0.0
    assert abs(NormalDist().cdf(demo.paper_delta(0.25)) - 0.25) < 1e-9
    assert demo.paper_delta(0.75) > 0 > demo.paper_delta(0.25)
    assert demo.paper_delta(0.0) == demo.DELTA_AT_ZERO == -1.0
    assert demo_report.method_name("soft:oracle") == "Soft-xID (oracle targets)"


@pytest.mark.slow
def test_a_ddp_warm_up_runs_under_torchrun_and_its_settings_are_not_mixed_with_one_process(tmp_path):
    """--warmup-ranks 2: the warm-up trains as two gloo ranks (torchrun), the branches start from its
    checkpoint, and the finished setting's key says so, so a one-process run does not reuse it."""
    import json

    data = tmp_path / "synth"
    synthetic.generate(
        data, classes=2, train_per_class=8, test_per_class=2, pool=8, faulty=0.25, size=32, seconds=(2.2, 2.6)
    )
    argv = ["--data", str(data), "--runs", str(tmp_path / "runs"), "--results", str(tmp_path / "res")]
    argv += ["--methods", "xid", "weighted", "--faulty", "0.2", "--warmup-epochs", "1", "--epochs", "1"]
    argv += ["--trials", "2", "--workers", "0", "--no-figures", "--frames", "4", "--size", "32", "--batch-size", "8"]
    argv += ["--num-negatives", "15", "--width", "0.125", "--warmup-ranks", "2"]
    demo.main(argv)
    log = (tmp_path / "runs" / "seed0_faulty20" / "warmup" / "log.jsonl").read_text().splitlines()
    assert len(log) == 1 and (tmp_path / "runs" / "seed0_faulty20" / "weighted" / "ckpt.pt").exists()
    saved = json.loads((tmp_path / "res" / "demo_settings" / "seed0_faulty20.json").read_text())
    one = DemoArgs(data=str(data), warmup_epochs=1, epochs=1, trials=2, train_args=saved["key"]["train_args"])
    assert demo.setting_key(replace(one, warmup_ranks=2), 0.2) == saved["key"]
    assert demo.setting_key(one, 0.2) == {k: v for k, v in saved["key"].items() if k != "warmup_ranks"}


def test_every_demo_option_is_a_documented_field_and_make_demos_set_can_be_generated():
    """Each DemoArgs field but train_args has its command-line flag and a help; make demo's set, the demo
    preset's, is one of tools/synthetic.py's named sets."""
    import argparse

    seen = []
    real = argparse.ArgumentParser.add_argument
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "add_argument", lambda p, *a, **k: seen.append(k) or real(p, *a, **k))
        parse_args([])
    helps = {k["dest"]: k.get("help") for k in seen if "dest" in k}
    assert {f.name for f in fields(DemoArgs)} - {"train_args"} <= set(helps) and all(helps.values())
    assert (DemoArgs().data, DemoArgs().epochs) == (PRESETS["demo"]["data"], PRESETS["demo"]["epochs"])
    assert Path(DemoArgs().data).name in synthetic.SETS  # make demo can generate it


def test_transfer_evaluates_each_branch_again_on_the_transfer_set_and_keys_the_setting(tmp_path, monkeypatch):
    """--transfer: retrieval and few-shot of the same checkpoint on the other set (its own manifest),
    in columns of their own; a setting evaluated without it is not answered from one with it."""
    calls = []
    monkeypatch.setattr(demo.train, "main", lambda cfg, report=None: None)

    def fake_evaluate(ckpt, tasks, overrides=None, **kwargs):
        calls.append((tasks, overrides))
        other = bool(overrides)  # the transfer set's numbers differ from the training set's
        return {
            "retrieval": {"R@1": 0.2 if other else 0.5, "R@5": 0.6 if other else 0.8, "protocol": {}},
            "fewshot": {"1-shot": [0.15 if other else 0.3], "5-shot": [0.25 if other else 0.4], "protocol": {}},
        }

    monkeypatch.setattr(demo.evaluate, "evaluate", fake_evaluate)
    monkeypatch.setattr(demo.analyse, "analysis", fake_analysis)
    args = DemoArgs(epochs=2, warmup_epochs=3, trials=5, workers=0, figures=False, data="d", transfer="data/t")
    row = demo.run_branch(args, tmp_path, ["--preset", "demo", "--data", "d"], "xid", ["--loss", "xid"])
    assert calls[1] == (["retrieval", "fewshot"], {"data": "data/t", "manifest": ""})
    assert row["1-shot"] == 0.3 and row["transfer 1-shot"] == 0.15 and row["transfer R@5"] == 0.6
    assert set(TRANSFER) <= set(row)
    key = demo.setting_key(replace(args, data=str(tmp_path)), 0.0)
    assert key["transfer"] == "data/t"
    assert "transfer" not in demo.setting_key(replace(args, data=str(tmp_path), transfer=None), 0.0)


def test_ctrl_c_is_one_line_naming_the_command_that_goes_on_without_fresh(monkeypatch, capsys):
    """Ctrl-C: no traceback; the command printed resumes (without --fresh, which would delete what was done)."""

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(demo, "main", interrupted)
    with pytest.raises(SystemExit) as stop:
        demo.cli(["--fresh", "--runs", "runs/my demo"])
    assert stop.value.code == 130
    assert capsys.readouterr().err.strip().splitlines() == [
        "[demo] stopped by Ctrl-C; the finished epochs are kept, and this goes on: "
        ".venv/bin/python demo.py --runs 'runs/my demo'"
    ]
    from concurrent.futures.process import BrokenProcessPool

    def broken(argv):  # a side-by-side process that died without a Ctrl-C: not taken for one
        raise BrokenProcessPool("a worker died")

    monkeypatch.setattr(demo, "main", broken)
    with pytest.raises(BrokenProcessPool):
        demo.cli([])
