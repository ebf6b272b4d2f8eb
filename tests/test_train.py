"""train.py end to end on a tiny generated dataset: learning, DDP replicas, kill-and-resume, variant
equivalence, the resume guard, --init, and the oracle's weights."""

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import data
import train
from config import Config, parse_config, result_changes
from machinery import devices
from persistence import checkpoint, records, runstate

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "--frames",
    "4",
    "--size",
    "32",
    "--n-mels",
    "40",
    "--n-time",
    "40",
    "--width",
    "0.125",
    "--batch-size",
    "8",
    "--num-negatives",
    "15",
    "--workers",
    "1",
    "--lr",
    "2e-3",
    "--lr-min",
    "2e-4",
]


def run(tiny_data, out, *args, env=None, wait=True):
    cmd = [sys.executable, str(ROOT / "train.py"), "--preset", "demo", "--data", str(tiny_data), "--out", str(out)]
    cmd += TINY + [str(a) for a in args]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )
    if not wait:
        return proc
    text, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, text
    return text


def log(out):
    return runstate.read_log(Path(out) / "log.jsonl")


def weights(out):
    return checkpoint.load_checkpoint(Path(out) / "ckpt.pt")


def restorer(cfg, parts, dataset):
    """The run management of cfg.out, for calling its restore alone (one process, CPU)."""
    return runstate.Run(cfg, parts, dataset.instances(), {}, 1, rank=0, device=torch.device("cpu"))


def assert_same_state(a, b):
    for key in ("model", "bank"):
        assert a[key].keys() == b[key].keys()
        for k in a[key]:
            assert torch.equal(a[key][k], b[key][k]), f"{key}.{k} differs"


def test_config_presets_and_unknown_options():
    cfg = parse_config(["--preset", "sota", "--lam", "0.25"])
    assert (cfg.video_depth, cfg.size, cfg.batch_size, cfg.lr, cfg.lam) == (18, 112, 512, 5e-4, 0.25)
    assert parse_config([]).num_negatives == 1024
    with pytest.raises(SystemExit):
        parse_config(["--no-such-option", "1"])
    with pytest.raises(SystemExit):
        parse_config(["--loss", "magic"])


def test_a_resume_may_change_only_the_settings_that_leave_the_result_alone():
    """preload and amp change the numbers (AAC's restart after a seek; rounding), so they are result
    settings a resume must keep; the rest of the engineering group is bookkeeping and speed."""
    from config import result_changes

    base = parse_config(["--preset", "demo"])

    def changed(*opts):
        return set(result_changes(base, parse_config(["--preset", "demo", *opts])))

    assert changed("--preload", "off") == {"preload"} and changed("--amp", "bf16") == {"amp"}
    for opts in (
        ["--workers", "3"],
        ["--pin-workers", "off"],
        ["--out", "elsewhere"],
        ["--init", "a.pt"],
        ["--no-channels-last"],
        ["--max-bad-fraction", "0.2"],
        ["--allow-config-change"],
        ["--device", "cpu"],
        ["--save-every", "3"],
    ):
        assert changed(*opts) == set(), opts


def test_lr_schedule_is_constant_then_cosine():
    cfg = Config(lr=1.0, lr_min=0.1, warmup_epochs=2, epochs=2)
    lrs = [train.lr_at(s, cfg, 10) for s in range(40)]
    assert lrs[:20] == [1.0] * 20 and lrs[20] == pytest.approx(1.0) and lrs[30] == pytest.approx(0.55)
    assert all(b <= a for a, b in zip(lrs[20:], lrs[21:])) and lrs[-1] > 0.1


def test_a_short_run_lowers_the_loss_says_where_it_runs_and_keeps_every_nth_checkpoint(tiny_data, tmp_path):
    text = run(tiny_data, tmp_path, "--warmup-epochs", "12", "--epochs", "0", "--save-every", "5")
    losses = [r["loss"] for r in log(tmp_path)]
    assert len(losses) == 12 and "epoch  11 | xid" in text
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.3, losses
    last = log(tmp_path)[-1]
    assert {"mu", "sigma", "weight", "soft_mass", "clips_per_s", "faulty_auroc", "lr", "data_wait"} <= set(last)
    assert {"agreement", "positive_mass"} <= set(last)  # analysis/drift.py's label-free signals
    assert 0 <= last["data_wait"] <= 1 and "waiting for data" in text
    assert text.splitlines()[0] == "train.py: device cpu, world size 1, precision fp32, 1 loader workers per process"
    kept = sorted(p.name for p in tmp_path.glob("ckpt_epoch*.pt"))
    assert kept == ["ckpt_epoch0004.pt", "ckpt_epoch0009.pt"]  # after the 5th and the 10th epoch
    assert checkpoint.load_checkpoint(tmp_path / "ckpt_epoch0004.pt")["epoch"] == 4
    assert checkpoint.load_checkpoint(tmp_path / "ckpt.pt")["epoch"] == 11


def test_robust_with_lambda_zero_and_w_min_one_is_xid_step_for_step(tiny_data, tmp_path):
    run(tiny_data, tmp_path / "xid", "--warmup-epochs", "1", "--epochs", "2", "--loss", "xid")
    run(
        tiny_data,
        tmp_path / "rob",
        "--warmup-epochs",
        "1",
        "--epochs",
        "2",
        "--loss",
        "robust",
        "--lam",
        "0",
        "--w-min",
        "1",
    )
    assert [r["loss"] for r in log(tmp_path / "xid")] == [r["loss"] for r in log(tmp_path / "rob")]
    assert_same_state(weights(tmp_path / "xid"), weights(tmp_path / "rob"))
    # and the default robust stage really is different
    run(tiny_data, tmp_path / "rob2", "--warmup-epochs", "1", "--epochs", "2", "--loss", "robust")
    second = log(tmp_path / "rob2")[-1]
    assert second["soft_mass"] > 0.3 and second["weight"] < 1.0


def test_killed_run_resumes_to_the_same_weights(tiny_data, tmp_path):
    args = ("--warmup-epochs", "2", "--epochs", "3")
    run(tiny_data, tmp_path / "full", *args)
    proc = run(tiny_data, tmp_path / "killed", *args, wait=False)
    ckpt = tmp_path / "killed" / "ckpt.pt"
    deadline = time.time() + 120
    while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(log(tmp_path / "killed")) < 5
    text = run(tiny_data, tmp_path / "killed", *args)
    assert "resuming from" in text
    assert [r["epoch"] for r in log(tmp_path / "killed")][-1] == 4
    assert_same_state(weights(tmp_path / "full"), weights(tmp_path / "killed"))


def test_a_relative_data_is_the_checkpoints_from_anywhere_and_a_finished_run_says_it_has_finished(tiny_data, tmp_path):
    """--data relative to where train.py ran: the checkpoint names the folder itself, so evaluation from
    another directory finds it; the same command again (relative, same place) resumes nothing and says so."""
    import evaluate

    data = os.path.relpath(tiny_data, tmp_path)  # ../../synth0
    cmd = [sys.executable, str(ROOT / "train.py"), "--preset", "demo", "--data", data, "--out", "run"]
    cmd += TINY + ["--warmup-epochs", "1", "--epochs", "0", "--workers", "0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    assert weights(tmp_path / "run")["config"]["data"] == str(tiny_data.resolve())
    res = evaluate.evaluate(tmp_path / "run" / "ckpt.pt", ["retrieval"], workers=0, clips=1)  # from the repository
    assert 0 <= res["retrieval"]["R@1"] <= 1
    again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "train.py: run has finished: all 1 epochs are in run/ckpt.pt; nothing to train" in again.stdout
    assert "resuming" not in again.stdout and len(log(tmp_path / "run")) == 1


def test_init_starts_the_branchs_first_epoch_from_the_warmups_model_and_bank(tiny_data, tmp_path, monkeypatch):
    """train.main with --init, in process: the state its first epoch trains from is the warm-up's model
    and bank, with a fresh optimizer at epoch 0 (a branch of Table 2), not a freshly built model."""
    run(tiny_data, tmp_path / "warm", "--warmup-epochs", "1", "--epochs", "0")
    warm = weights(tmp_path / "warm")
    seen, real = [], train.train_epoch

    def first_epoch(parts, loader, cfg, epoch, *args):
        state = {"model": parts.unwrapped().state_dict(), "bank": parts.bank.state_dict()}
        fresh = parts.optimizer.state_dict()["state"] == {}  # no step taken, none loaded
        seen.append((epoch, {k: {n: t.clone() for n, t in v.items()} for k, v in state.items()}, fresh))
        return real(parts, loader, cfg, epoch, *args)

    monkeypatch.setattr(train, "train_epoch", first_epoch)
    argv = ["--preset", "demo", "--data", str(tiny_data), "--out", str(tmp_path / "branch"), "--warmup-epochs", "0"]
    more = ["--epochs", "1", "--loss", "weighted", "--init", str(tmp_path / "warm" / "ckpt.pt")]
    train.main(parse_config(argv + more + TINY + ["--workers", "0"]))
    assert [(epoch, fresh) for epoch, _, fresh in seen] == [(0, True)]
    assert_same_state(warm, seen[0][1])
    assert [r["stage"] for r in log(tmp_path / "branch")] == ["weighted"]


def test_a_soft_branch_logs_the_label_free_signals_from_the_bank_it_was_given(tiny_data, tmp_path):
    """analysis/drift.py's start for an --init branch is its warm-up's last bank: the same agreement that the
    warm-up's own last record logged."""
    run(tiny_data, tmp_path / "warm", "--warmup-epochs", "1", "--epochs", "0")
    init = tmp_path / "warm" / "ckpt.pt"
    run(tiny_data, tmp_path / "soft", "--warmup-epochs", "0", "--epochs", "2", "--loss", "soft", "--init", init)
    warm, soft = log(tmp_path / "warm"), log(tmp_path / "soft")
    assert soft[0]["drift_start"] == {k: warm[-1][k] for k in ("agreement", "positive_mass")}
    assert "drift_start" not in soft[1] and all(0 <= r["agreement"] <= 1 for r in warm + soft)
    assert all(0 < r["positive_mass"] <= 1 for r in warm + soft)


def test_a_guarded_branch_stopped_inside_its_first_epoch_keeps_the_start_its_init_bank_gave(
    tiny_data, tmp_path, monkeypatch
):
    """The start is measured before the branch's first step and logged with its first epoch: a stop before that
    epoch's end keeps it in the checkpoint, so the resumed run's rule measures from the same start as an unstopped
    run's, not from the end of epoch 0."""
    run(tiny_data, tmp_path / "warm", "--warmup-epochs", "1", "--epochs", "0")
    argv = ["--preset", "demo", "--data", str(tiny_data), "--out", str(tmp_path / "soft"), "--warmup-epochs", "0"]
    argv += ["--epochs", "1", "--loss", "soft", "--soft-guard", "--init", str(tmp_path / "warm" / "ckpt.pt")]
    monkeypatch.setattr(runstate.Run, "stop_requested", lambda self, i: True)  # SIGTERM during the first step
    with pytest.raises(SystemExit):
        train.main(parse_config([*argv, *TINY, "--workers", "0"]))
    assert weights(tmp_path / "soft")["partial"]["steps"] == 1
    monkeypatch.undo()
    train.main(parse_config([*argv, *TINY, "--workers", "0"]))
    warm, soft = log(tmp_path / "warm"), log(tmp_path / "soft")
    assert soft[0]["drift_start"] == {k: warm[-1][k] for k in ("agreement", "positive_mass")}


def test_a_longer_warm_up_resumes_and_a_changed_setting_stops_in_one_line_before_the_data(tiny_data, tmp_path):
    """Extending the warm-up resumes it (lam is not read by a warm-up either); a setting its trained epochs read
    stops the run in one train.py line, before the data is read, and the flag lets a user continue anyway. Each
    epoch line says the time per epoch and the time left."""
    first = run(tiny_data, tmp_path, "--warmup-epochs", "1", "--epochs", "0")
    assert re.search(r"s/epoch, \d+ s left", first)
    text = run(tiny_data, tmp_path, "--warmup-epochs", "2", "--epochs", "0", "--lam", "0.3")
    assert "resuming from" in text and len(log(tmp_path)) == 2
    proc = run(tiny_data, tmp_path, "--warmup-epochs", "3", "--epochs", "0", "--faulty-fraction", "0.25", wait=False)
    text, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0 and len(log(tmp_path)) == 2  # nothing was trained under the new settings
    last = text.strip().splitlines()[-1]
    assert last.startswith("train.py: ") and "faulty_fraction 0.0 -> 0.25" in last and "--allow-config-change" in last
    assert "warmup_epochs" not in last and "Traceback" not in text
    assert "data in memory" not in text and "scan" not in text  # refused before the data was read
    text = run(tiny_data, tmp_path, "--warmup-epochs", "3", "--epochs", "0", "--allow-config-change", "--workers", "0")
    assert "resuming from" in text and len(log(tmp_path)) == 3


def test_a_resume_is_refused_only_for_the_settings_its_trained_epochs_read():
    """config.result_changes given the epochs a checkpoint trained: a warm-up reads none of the second stage's
    settings and may grow; a branch reads only its variant's (soft targets: lam, tau_s...; weights: kappa...)."""
    warm = Config(warmup_epochs=2, epochs=0)
    assert result_changes(warm, replace(warm, lam=0.3, loss="soft", epochs=5, kappa=0.7), trained=2) == {}
    assert result_changes(warm, replace(warm, warmup_epochs=3), trained=2) == {}
    assert set(result_changes(warm, replace(warm, warmup_epochs=1), trained=2)) == {"warmup_epochs"}
    assert set(result_changes(warm, replace(warm, tau=0.1), trained=2)) == {"tau"}
    soft = Config(warmup_epochs=0, epochs=3, loss="soft")
    assert set(result_changes(soft, replace(soft, lam=0.3, kappa=0.7), trained=1)) == {"lam"}
    assert set(result_changes(soft, replace(soft, epochs=4), trained=1)) == {"epochs"}  # the cosine's length
    xid = replace(soft, loss="xid")
    assert result_changes(xid, replace(xid, lam=0.3, kappa=0.7, tau_s=0.05), trained=1) == {}
    weighted = replace(soft, loss="weighted")
    assert set(result_changes(weighted, replace(weighted, lam=0.3, kappa=0.7), trained=1)) == {"kappa"}
    assert set(result_changes(warm, replace(warm, lam=0.3))) == {"lam"}  # without the epochs: every field


def test_a_checkpoint_made_with_other_injected_positives_is_refused():
    """Resuming or branching off a bank trained on other faulty positives (an older injection draw)
    would mix two experiments silently."""

    injected = torch.tensor([True, False, False, True])
    runstate.same_injection({"instances": {"injected": injected.clone()}}, injected, "same.pt")  # no error
    with pytest.raises(SystemExit, match="other.pt was trained with other injected faulty positives"):
        runstate.same_injection(
            {"instances": {"injected": torch.tensor([False, True, False, True])}}, injected, "other.pt"
        )
    runstate.same_injection({"instances": {"injected": ~injected}}, injected, "other.pt", allow=True)


def test_a_checkpoint_without_fp16_resumes_under_fp16(tiny_data, tmp_path):
    """A bf16 or fp32 run saves an empty GradScaler state; resuming it in fp16 must not load it."""
    run(tiny_data, tmp_path, "--warmup-epochs", "1", "--epochs", "0", "--amp", "off")
    cfg = parse_config(
        [
            "--preset",
            "demo",
            "--data",
            str(tiny_data),
            "--out",
            str(tmp_path),
            "--amp",
            "fp16",
            "--warmup-epochs",
            "2",
            "--epochs",
            "0",
            "--allow-config-change",
        ]
        + TINY
        + ["--workers", "0"]
    )
    dataset = data.build_train_set(cfg)
    parts = train.build_parts(cfg, dataset, torch.device("cpu"))
    assert parts.scaler.is_enabled()
    assert restorer(cfg, parts, dataset).restore()[0] == 1


def test_oracle_weights_are_zero_exactly_on_the_injected_instances(tiny_data):
    """Oracle-xID (Sec. 5.2): w_i = 0 on the injected faulty positives, 1 on every other instance,
    the natural faulty positives of the data included."""
    cfg = parse_config(
        [
            "--preset",
            "demo",
            "--data",
            str(tiny_data),
            "--faulty-fraction",
            "0.5",
            "--loss",
            "oracle",
            "--warmup-epochs",
            "0",
            "--epochs",
            "1",
        ]
        + TINY
        + ["--workers", "0"]
    )
    dataset = data.build_train_set(cfg)
    parts = train.build_parts(cfg, dataset, torch.device("cpu"))
    n = len(dataset)
    idx = torch.arange(n)
    v, a = parts.bank.video[idx].clone().requires_grad_(), parts.bank.audio[idx].clone().requires_grad_()
    captured = {}
    original = train.robust_xid_loss

    def spy(v, a, vbar, abar, weights, targets, tau):
        captured["w"], captured["targets"] = weights, targets
        return original(v, a, vbar, abar, weights, targets, tau)

    train.robust_xid_loss = spy
    try:
        train.objective(v, a, idx, parts.bank, cfg, "oracle", parts.truth)
    finally:
        train.robust_xid_loss = original
    assert torch.equal(captured["w"], (~dataset.injected).float()) and captured["targets"] is None
    assert dataset.injected.sum() == round(0.5 * n) and (dataset.faulty & ~dataset.injected).any()
    assert set(captured["w"].tolist()) == {0.0, 1.0}


def test_a_non_finite_loss_stops_the_run_naming_the_step(tiny_data, tmp_path):
    cfg = parse_config(
        [
            "--preset",
            "demo",
            "--data",
            str(tiny_data),
            "--out",
            str(tmp_path),
            "--tau",
            "1e-45",  # allowed (above 0), and logits / tau overflow to inf whatever the logits: the loss is NaN
            "--warmup-epochs",
            "1",
            "--epochs",
            "0",
        ]
        + TINY
        + ["--workers", "0"]
    )
    with pytest.raises(SystemExit, match=r"non-finite loss .* at or before step \d+ \(epoch 0\): .*--tau"):
        train.main(cfg)


@pytest.mark.parametrize("exit_by", ["sigterm", "non-finite loss"])
def test_a_ddp_run_that_stops_early_still_drops_its_wrapper_then_leaves_the_group(
    tiny_data, tmp_path, monkeypatch, exit_by
):
    """end_distributed after the wrapper went (the order that does not hang at exit), on the SIGTERM stop and
    the non-finite-loss exit too, not only at the end: one process with ddp=True and DDP faked."""

    class FakeDDP(torch.nn.Module):
        def __init__(self, module, device_ids=None):
            super().__init__()
            self.module = module

        def forward(self, *args):
            return self.module(*args)

    made, wrapped_at_teardown, real = {}, [], train.build_parts
    monkeypatch.setattr(train, "DDP", FakeDDP)
    monkeypatch.setattr(train, "build_parts", lambda *a: made.setdefault("parts", real(*a)))
    monkeypatch.setattr(devices, "end_distributed", lambda: wrapped_at_teardown.append(made["parts"].model))
    more = ["--tau", "1e-45"] if exit_by == "non-finite loss" else []  # logits / tau overflow: a NaN loss
    if exit_by == "sigterm":
        monkeypatch.setattr(runstate.Run, "stop_requested", lambda self, i: True)
    argv = ["--preset", "demo", "--data", str(tiny_data), "--out", str(tmp_path), "--warmup-epochs", "1"]
    cfg = parse_config([*argv, "--epochs", "0", *more, *TINY, "--workers", "0"])
    with pytest.raises(SystemExit) as stop:
        train.run(cfg, True, 0, 1, torch.device("cpu"))
    assert (stop.value.code == 128 + signal.SIGTERM) if exit_by == "sigterm" else "non-finite" in str(stop.value.code)
    assert len(wrapped_at_teardown) == 1 and not isinstance(wrapped_at_teardown[0], FakeDDP)


def test_evaluation_of_a_trained_checkpoint_stores_protocols_and_draws_the_figures(tiny_data, tmp_path):
    import evaluate

    run(tiny_data, tmp_path, "--warmup-epochs", "1", "--epochs", "0", "--faulty-fraction", "0.25")
    res = evaluate.evaluate(tmp_path / "ckpt.pt", ["retrieval", "fewshot", "analysis"], workers=0, shots=(1,), trials=2)
    saved = {r["task"]: r for r in records.load(tmp_path / "eval.json")}
    assert (
        "Euclidean" in saved["retrieval"]["protocol"]["text"] and saved["fewshot"]["protocol"]["standardise"] is False
    )
    assert saved["analysis"]["results"]["weights"] == res["weights"] and saved["retrieval"]["checkpoint_epoch"] == 0
    assert res["weights"]["faulty_auroc"] is not None and 0 <= res["weights"]["faulty_auroc"] <= 1
    for png in ("scores_weights.png", "per_class_r1.png", "retrievals.png"):  # Fig. 5, 10, 11
        assert (tmp_path / png).stat().st_size > 1000


def test_a_missing_dataset_is_one_line_naming_the_folder_and_how_to_make_it(tmp_path):
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "train.py"),
            "--preset",
            "demo",
            "--data",
            str(tmp_path / "synth2000"),
            "--out",
            str(tmp_path / "run"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert f"dataset folder not found: {tmp_path / 'synth2000'} (--data). make demo makes it" in res.stderr
