"""Smoke runs of bench.py at CPU sizes: every figure's command works and prints its table."""

import re
from types import SimpleNamespace

import pytest
import torch

from lab import bench, bench_profile
from tools import synthetic


def test_step_and_model_benchmarks_run_on_cpu(capsys):
    # demo2000's encoders: a FLOP count large enough to check to two decimals
    bench.main(["step", "--preset", "demo2000", "--batch", "4", "--steps", "1", "--bank", "300"])
    out = capsys.readouterr().out
    row = [line for line in out.splitlines() if line.strip().startswith("fp32")][0].split()
    gflop, model_rate, tflops, _, step_rate, ratio = map(float, row[1:7])
    assert model_rate > 0 and step_rate > 0
    assert 0.15 < gflop < 0.3  # demo encoders at 4x64x64: 0.21 GFLOP per clip forward + backward
    assert abs(tflops - gflop * model_rate / 1e3) < 0.02 * tflops + 1e-3
    rounding = ratio * (0.05 / step_rate + 0.05 / model_rate)  # the rates are printed to 0.1 clips/s
    assert abs(ratio - step_rate / model_rate) < 0.02 * ratio + 0.01 + rounding  # the columns must agree
    if not torch.cuda.is_available():  # an empty column says why
        assert "nan: peak GiB (torch tracks the peak memory on a GPU only)" in out


def test_the_model_benchmark_says_why_its_step_columns_are_empty(capsys):
    bench.main(["model", "--preset", "demo", "--batch", "2", "--steps", "1", "--bank", "100"])
    out = capsys.readouterr().out
    assert "step clips/s and step/model (`lab.bench step` times train.train_step)" in out


@pytest.fixture(scope="module")
def tiny_synth(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    synthetic.main(
        [
            "--out",
            str(out),
            "--classes",
            "2",
            "--train-per-class",
            "4",
            "--test-per-class",
            "2",
            "--pool",
            "0",
            "--size",
            "48",
            "--gop",
            "250",
            "--seconds",
            "2.5",
            "2.5",
        ]
    )
    return out


def test_data_benchmark_prepares_and_reports_both_sources(tiny_synth, tmp_path, capsys):
    bench.main(
        [
            "data",
            "--preset",
            "demo",
            "--root",
            str(tiny_synth),
            "--prepared",
            str(tmp_path / "prep"),
            "--workers",
            "1",
            "--n",
            "4",
        ]
    )
    out = capsys.readouterr().out
    rows = {
        line.split()[0]: line.split()[-3:]
        for line in out.splitlines()
        if line.startswith("  as") or line.startswith("  prep")
    }
    assert set(rows) == {"as", "prepared"} and all(float(v) > 0 for r in rows.values() for v in r)
    assert (tmp_path / "prep" / "manifest.csv").exists()


def test_eval_benchmark_runs(tiny_synth, capsys):
    bench.main(["eval", "--preset", "demo", "--root", str(tiny_synth), "--workers", "0"])
    out = capsys.readouterr().out
    assert "features, test (4 videos x 10 clips)" in out and "few-shot SVM" in out
    assert "same numbers: True" in out  # the parallel trials reproduce the one-by-one figures


def test_parts_benchmark_times_each_part_of_a_clip_and_sees_the_index_and_sidecar_paths(tiny_synth, tmp_path, capsys):
    """`parts` on a prepared copy and on the same copy without frame indexes and sidecars (as made before
    them): four parts each, the sum printed; without them the open (the container, not the index) and
    the audio (a decode, not a read) cost more."""
    import shutil

    from tools import prepare

    prepare.prepare(tiny_synth, tmp_path / "now", workers=1)
    shutil.copytree(tmp_path / "now", tmp_path / "old", ignore=shutil.ignore_patterns("*.pcm16", "*.index"))
    ms = {
        side: bench.bench_parts(bench.argparse.Namespace(preset="demo", root=str(tmp_path / side), n=4, rounds=2))
        for side in ("now", "old")
    }
    assert all(v > 0 for side in ms.values() for v in side.values())
    assert ms["old"]["audio"] > ms["now"]["audio"] and ms["old"]["open"] > ms["now"]["open"]
    assert "| sum |" in capsys.readouterr().out


def test_the_epoch_benchmarks_ready_path_cuts_and_augments_outside_the_timed_epoch(tiny_synth, monkeypatch):
    """`epoch --preload ready` makes each epoch's batches before its clock starts: inside the timed epoch
    (train.train_epoch) it neither cuts a batch nor augments one, where `--preload on` does both once a step;
    both still train through train.train_step (objective and model timed)."""
    import argparse

    import config
    import train
    from augment import ClipAugment
    from lab import bench_epoch
    from media.in_memory import InMemoryClips

    tiny = config.PRESETS["demo"] | dict(batch_size=4, num_negatives=4, data=str(tiny_synth))
    monkeypatch.setitem(config.PRESETS, "tiny", tiny)
    calls, inside = {"cut": 0, "augment": 0}, [False]

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += inside[0]
            return fn(*args, **kwargs)

        return wrapper

    def timed_epoch(*args, **kwargs):
        inside[0] = True
        try:
            return epoch(*args, **kwargs)
        finally:
            inside[0] = False

    epoch = train.train_epoch
    monkeypatch.setattr(train, "train_epoch", timed_epoch)
    monkeypatch.setattr(InMemoryClips, "batch", counted("cut", InMemoryClips.batch))
    monkeypatch.setattr(ClipAugment, "forward", counted("augment", ClipAugment.forward))
    seen = {}
    for path in ("ready", "on"):
        calls.update(cut=0, augment=0)
        args = argparse.Namespace(preset="tiny", root=None, epochs=2, faulty=0.0, preload=[path])
        row, epoch_rate, model_rate, clips = bench_epoch.split(args)[path]
        assert clips == 8 and epoch_rate > 0 and model_rate > 0
        assert row["model fwd+bwd+Adam"] > 0 and row["objective"] > 0
        seen[path] = dict(calls)
    assert seen == {"ready": {"cut": 0, "augment": 0}, "on": {"cut": 4, "augment": 4}}  # 2 epochs of 2 steps


def test_the_profile_groups_the_bare_models_cpu_time_and_sums_to_all_of_it(capsys):
    """`profile` on a 1-step run of a tiny batch: the groups' printed shares add up to 100% (each op in one group),
    and the convolutions' backward, their forward and Adam each take some of it."""
    bench.main(["profile", "--preset", "demo", "--batch", "2", "--steps", "1"])
    out = capsys.readouterr().out
    groups = out.split("| group | ms/step | share |", 1)[1].splitlines()[2:]
    shares = {row.split("|")[1].strip(): float(row.split("|")[3].strip(" %")) for row in groups if row.startswith("|")}
    assert set(shares) == {g for g, _ in bench_profile.GROUPS} | {bench_profile.OTHER}
    assert abs(sum(shares.values()) - 100) <= 0.05 * len(shares)  # each printed to 0.1%
    assert min(shares["convolution backward"], shares["convolution forward"], shares["Adam (optimizer)"]) > 0
    assert "| aten::convolution_backward |" in out


def test_an_op_takes_the_group_of_its_nearest_caller_that_names_one():
    event = SimpleNamespace
    adam = event(name="Optimizer.step#Adam.step", cpu_parent=None)
    backward = event(name="autograd::engine::evaluate_function: ConvolutionBackward0", cpu_parent=None)
    assert bench_profile.group_of(event(name="aten::mul_", cpu_parent=adam)) == "Adam (optimizer)"
    assert bench_profile.group_of(event(name="aten::empty", cpu_parent=backward)) == "convolution backward"
    assert bench_profile.group_of(event(name="aten::convolution", cpu_parent=None)) == "convolution forward"
    assert bench_profile.group_of(event(name="aten::addmm", cpu_parent=None)) == bench_profile.OTHER


@pytest.mark.slow  # two spawned processes importing torch: ~10-20 s on 2 cores
def test_processes_side_by_side_start_together_and_their_clips_add_up():
    rate = bench_profile.run_setting("processes side by side, 1 thread each", "demo", 2, 1, cores=2)
    assert rate > 0


@pytest.mark.parametrize("spatial", [True, False])
def test_the_folded_video_convolutions_compute_what_the_conv3d_do_forward_and_backward(spatial):
    """lab.bench fold's levers: every (1,k,k) and (k,1,1) Conv3d of the video encoder (or the (k,1,1) ones only) as
    a Conv2d over folded axes, the same weights, the same outputs and gradients up to the order of float sums (float64
    here: batch norm over a batch of 2 would blow float32's rounding up)."""
    import torch

    from lab.bench_profile import Folded, folded
    from model import VideoEncoder

    torch.manual_seed(0)
    plain, fold = VideoEncoder(9, 0.125).double(), folded(VideoEncoder(9, 0.125), spatial).double()
    names = {k.replace(".conv.weight", ".weight"): k for k in fold.state_dict()}
    fold.load_state_dict({names[k]: v for k, v in plain.state_dict().items()})
    assert sum(isinstance(m, Folded) for m in fold.modules()) == 21
    x = torch.randn(2, 3, 4, 32, 32, dtype=torch.float64)
    calls = []
    conv2d = torch.nn.functional.conv2d
    torch.nn.functional.conv2d = lambda *a, **k: calls.append(a[1].shape) or conv2d(*a, **k)
    try:
        fold(x)
    finally:
        torch.nn.functional.conv2d = conv2d
    # 9 spatial (1,k,k) and 9 temporal (k,1,1) convolutions; the 3 downsampling 1x1x1 ones stay 3-D
    assert len(calls) == (18 if spatial else 9) and (spatial or all(k[-1] == 1 for k in calls))
    y, y_fold = plain(x), fold(x)
    assert torch.allclose(y, y_fold, atol=1e-10)
    y.sum().backward(), y_fold.sum().backward()
    grads = dict(plain.named_parameters())
    for name, p in fold.named_parameters():
        assert torch.allclose(p.grad, grads[name.replace(".conv.weight", ".weight")].grad, atol=1e-8), name


def _fake_checkout(root, table_row):
    """A folder lab.branch_share can run: its demo.py writes a one-row table and make demo's split line."""
    import sys

    (root / ".venv/bin").mkdir(parents=True)
    (root / ".venv/bin/python").symlink_to(sys.executable)
    (root / "demo.py").write_text(
        "import sys, pathlib\n"
        "runs = pathlib.Path(sys.argv[sys.argv.index('--runs') + 1])\n"
        "assert (runs / 'seed0_faulty25/warmup/ckpt.pt').is_file(), 'the warm-up, not under --runs'\n"
        "out = pathlib.Path(sys.argv[sys.argv.index('--results') + 1])\n"
        f"(out / 'demo.md').write_text('text\\n{table_row}\\n')\n"
        "print('Time split: warm-up 0.1 min, branches and evaluations, side by side 0.5 min, other 0.0 min')\n"
    )
    return root


def test_branch_share_alternates_the_variants_and_says_whose_table_differs(tmp_path, capsys, monkeypatch):
    from lab import branch_share

    warmup = tmp_path / "warmup"
    warmup.mkdir()
    (warmup / "ckpt.pt").write_bytes(b"x")
    a, b = _fake_checkout(tmp_path / "a", "| xID | 1.0 |"), _fake_checkout(tmp_path / "b", "| xID | 2.0 |")
    argv = ["--warmup", str(warmup), "--scratch", "s", "--rounds", "2"]  # relative: each checkout is another cwd
    monkeypatch.chdir(tmp_path)
    results = branch_share.main(argv + ["--variant", f"{a}:5", f"{a}:2", f"{b}:5"])
    out = capsys.readouterr().out
    assert [line.split(": ")[1] for line in out.splitlines() if line.startswith("round")] == [
        f"{a}:5",
        f"{a}:2",
        f"{b}:5",
    ] * 2  # alternated
    assert all(len(runs) == 2 and runs[0][1] == 0.5 for runs in results.values())
    table = {
        line.split(" | ")[0].lstrip("| "): line.rstrip(" |").rsplit("| ", 1)[1]
        for line in out.splitlines()
        if line.startswith(f"| {tmp_path}")
    }
    assert table == {f"{a}:5": "yes", f"{a}:2": "yes", f"{b}:5": "no"}


def test_branch_share_names_a_missing_warm_up_or_a_bad_variant(tmp_path):
    from lab import branch_share

    with pytest.raises(SystemExit, match="--warmup .*no ckpt.pt"):
        branch_share.main(["--warmup", str(tmp_path), "--variant", ".:5"])
    (tmp_path / "ckpt.pt").write_bytes(b"x")
    for bad in (".", f"{tmp_path}:5", ".:five", ".:1"):
        with pytest.raises(SystemExit, match=f"--variant {re.escape(bad)}: expected CHECKOUT:JOBS"):
            branch_share.main(["--warmup", str(tmp_path), "--variant", bad])
    with pytest.raises(SystemExit, match="a variant twice"):
        branch_share.main(["--warmup", str(tmp_path), "--variant", ".:5", ".:5"])
    broken = _fake_checkout(tmp_path / "broken", "| xID | 1.0 |")
    (broken / "demo.py").write_text("print('no table')\n")
    with pytest.raises(SystemExit, match="wrote no branch phase or no table"):
        branch_share.main(["--warmup", str(tmp_path), "--variant", f"{broken}:5", "--scratch", str(tmp_path / "s")])
