"""gpu_check.py: harmless without CUDA, and every part of it runs on the CPU at toy sizes."""

import pytest
import torch

from lab import gpu_check


def test_without_cuda_it_says_so_and_exits_zero(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main(["--out", str(tmp_path / "gpu.md"), "--work", str(tmp_path / "w")]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "no usable CUDA device" in out[0]
    assert not (tmp_path / "gpu.md").exists()


@pytest.mark.slow  # 50 s, the suite's slowest: make test-all (CI keeps its 15 minutes)
def test_cpu_smoke_runs_every_part_and_writes_the_table(tmp_path):
    parts = ["--parts", "step", "data", "train", "ddp", "cut"]  # the demo part: the slow test below
    assert (
        gpu_check.main(["--cpu-smoke", "--out", str(tmp_path / "gpu.md"), "--work", str(tmp_path / "w"), *parts]) == 0
    )
    text = (tmp_path / "gpu.md").read_text()
    for heading in (
        "a. Training step",
        "b. Loader",
        "c. torchrun train.py",
        "d. DDP",
        "f. The in-memory cut",
        "Verdict",
    ):
        assert heading in text
    assert "the test skipped: no CUDA here" in text and "GPU cut within 1 level of the CPU's: n/a (no GPU)" in text
    assert "| demo | 4 | fp32 |" in text and "| prepared |" in text
    assert "train + resume + eval: yes" in text and "DDP replicas identical: yes" in text
    assert "losses finite yes" in text and "resumed yes" in text


@pytest.mark.slow
def test_cpu_smoke_times_make_demos_command_and_reads_its_warm_ups_data_wait(tmp_path):
    work = ["--work", str(tmp_path / "w")]
    assert gpu_check.main(["--cpu-smoke", "--out", str(tmp_path / "gpu.md"), *work, "--parts", "train", "demo"]) == 0
    text = (tmp_path / "gpu.md").read_text()
    assert "e. make demo" in text and "s from the command to the table" in text and "waited for data" in text
