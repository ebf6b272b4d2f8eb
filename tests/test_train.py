"""train.py end to end on a tiny generated dataset: learning, DDP replicas, variant equivalence, --init, the
oracle's weights, faults and a final evaluation. Resuming (kill and resume, the resume guard): test_resume.py."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import checkpoint
import data
import train
from config import Config, parse_config

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
    return checkpoint.read_log(Path(out) / "log.jsonl")


def weights(out):
    return checkpoint.load_checkpoint(Path(out) / "ckpt.pt")


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
    assert not {"agreement", "positive_mass", "knn_class", "score_hist"} & set(last)  # make demo's report's
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


def reported(tiny_data, out, *more):
    """train.main in process with make demo's report (tools/bank_report.BankReport): the log the demo's runs write."""
    from tools.bank_report import BankReport

    argv = ["--preset", "demo", "--data", str(tiny_data), "--out", str(out), *map(str, more), *TINY]
    cfg = parse_config([*argv, "--workers", "0"])
    train.main(cfg, report=BankReport(cfg))


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


def test_a_soft_branch_reported_logs_the_label_free_signals_from_the_bank_it_was_given(tiny_data, tmp_path):
    """With make demo's report (tools/bank_report.BankReport), an --init branch's drift start is its warm-up's last
    bank: the same agreement that the warm-up's own last record logged."""
    reported(tiny_data, tmp_path / "warm", "--warmup-epochs", "1", "--epochs", "0")
    init = tmp_path / "warm" / "ckpt.pt"
    reported(tiny_data, tmp_path / "soft", "--warmup-epochs", "0", "--epochs", "2", "--loss", "soft", "--init", init)
    warm, soft = log(tmp_path / "warm"), log(tmp_path / "soft")
    assert {"knn_class", "xmodal_class", "score_hist", "soft_share"} <= set(soft[-1])
    assert soft[0]["drift_start"] == {k: warm[-1][k] for k in ("agreement", "positive_mass")}
    assert "drift_start" not in soft[1] and all(0 <= r["agreement"] <= 1 for r in warm + soft)
    assert all(0 < r["positive_mass"] <= 1 for r in warm + soft)


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


@pytest.mark.parametrize("exit_by", ["unwritable checkpoint", "non-finite loss"])
def test_a_ddp_run_that_stops_early_still_drops_its_wrapper_then_leaves_the_group(
    tiny_data, tmp_path, monkeypatch, exit_by
):
    """end_distributed after the wrapper went (the order that does not hang at exit), on the exit after a
    checkpoint that cannot be written and on the non-finite-loss exit too, not only at the end: one process with
    ddp=True and DDP faked."""

    class FakeDDP(torch.nn.Module):
        def __init__(self, module, device_ids=None):
            super().__init__()
            self.module = module

        def forward(self, *args):
            return self.module(*args)

    made, wrapped_at_teardown, real = {}, [], train.build_parts
    monkeypatch.setattr(train, "DDP", FakeDDP)
    monkeypatch.setattr(train, "build_parts", lambda *a: made.setdefault("parts", real(*a)))
    monkeypatch.setattr(train, "end_distributed", lambda together=True: wrapped_at_teardown.append(made["parts"].model))
    more = ["--tau", "1e-45"] if exit_by == "non-finite loss" else []  # logits / tau overflow: a NaN loss
    if exit_by == "unwritable checkpoint":

        def full_disk(path, **state):
            raise checkpoint.CheckpointError(f"could not write the checkpoint {path}: the disk is full")

        monkeypatch.setattr(checkpoint, "save_checkpoint", full_disk)
    argv = ["--preset", "demo", "--data", str(tiny_data), "--out", str(tmp_path), "--warmup-epochs", "1"]
    cfg = parse_config([*argv, "--epochs", "0", *more, *TINY, "--workers", "0"])
    with pytest.raises(SystemExit) as stop:
        train.run(cfg, True, 0, 1, torch.device("cpu"))
    assert ("could not write" if exit_by == "unwritable checkpoint" else "non-finite") in str(stop.value.code)
    assert len(wrapped_at_teardown) == 1 and not isinstance(wrapped_at_teardown[0], FakeDDP)


def test_evaluation_of_a_trained_checkpoint_stores_protocols_and_draws_the_figures(tiny_data, tmp_path):
    import evaluate

    run(tiny_data, tmp_path, "--warmup-epochs", "1", "--epochs", "0", "--faulty-fraction", "0.25")
    from tools import analyse

    res = evaluate.evaluate(tmp_path / "ckpt.pt", ["retrieval", "fewshot"], workers=0, shots=(1,), trials=2)
    res |= analyse.analysis(tmp_path / "ckpt.pt", workers=0)
    saved = {r["task"]: r for r in evaluate.load(tmp_path / "eval.json")}
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


def test_the_multi_tensor_adam_train_py_uses_steps_as_the_per_parameter_loop_does_bit_for_bit():
    """train.py asks Adam for foreach=True, faster on a CPU (lab.bench fold), where the default is a loop over the
    parameters: three steps of the demo's model give the same parameters to the bit either way."""
    import copy

    from augment import ClipSpec
    from model import AVModel

    torch.manual_seed(0)
    start, got = AVModel(9, 0.125), {}
    for foreach in (False, True):
        model = copy.deepcopy(start)
        opt = torch.optim.Adam(model.parameters(), lr=5e-4, foreach=foreach)
        g = torch.Generator().manual_seed(1)
        for _ in range(3):
            v, a = model(torch.randn(4, 3, 2, 32, 32, generator=g), torch.randn(4, 1, 16, 16, generator=g))
            opt.zero_grad()
            (-(v * a).sum()).backward()
            opt.step()
        got[foreach] = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert torch.equal(got[False], got[True]) and not torch.equal(
        got[True], torch.cat([p.flatten() for p in start.parameters()])
    )

    class Slots:  # what build_parts reads of a training set
        spec, labels, injected = ClipSpec(), torch.zeros(40, dtype=torch.long), torch.zeros(40, dtype=torch.bool)

        def __len__(self):
            return 40

    parts = train.build_parts(parse_config(["--preset", "demo"]), Slots(), torch.device("cpu"))
    assert parts.optimizer.param_groups[0]["foreach"] is True
