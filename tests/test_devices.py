"""Where a run computes, said before it starts: --device auto | cuda | cpu (config.resolve_device), a GPU
run that cannot quietly fall back to the CPU, and the default loader workers (data.py)."""

import os
import subprocess
import sys
import warnings

import pytest
import torch

import config as devices
import data
from test_train import ROOT, TINY


def nvidia_driver(monkeypatch, folder, version="450.51"):
    """The kernel driver's file as a machine with an NVIDIA device has it, of `version`."""
    path = folder / "version"
    path.write_text(f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Sat Aug 19 01:15:15 UTC 2023\n")
    monkeypatch.setattr(devices, "NVIDIA", str(path))


def gpu_broken(monkeypatch, folder, said="The NVIDIA driver on your system is too old (found version 11040)."):
    """A machine with an NVIDIA device and driver 450.51, and a CUDA 13.0 torch that cannot use it."""

    def unusable():
        warnings.warn(said, UserWarning, stacklevel=2)
        return False

    monkeypatch.setattr(torch.cuda, "is_available", unusable)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    nvidia_driver(monkeypatch, folder)


def test_cuda_with_a_driver_torch_cannot_use_is_an_error_naming_the_driver_and_torchs_words(monkeypatch, tmp_path):
    gpu_broken(monkeypatch, tmp_path)
    with pytest.raises(devices.DeviceError) as err:
        devices.resolve_device("cuda")
    text = str(err.value)
    assert "\n" not in text and "--device cuda" in text and "450.51" in text and "too old" in text, text


def test_auto_with_an_unusable_nvidia_device_warns_in_one_line_then_takes_the_cpu(monkeypatch, capsys, tmp_path):
    gpu_broken(monkeypatch, tmp_path)
    assert devices.resolve_device("auto") == torch.device("cpu")
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("warning: --device auto") and "too old" in err, err


def test_auto_without_any_nvidia_device_takes_the_cpu_silently(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(devices, "nvidia_present", lambda: False)
    assert devices.resolve_device("auto") == torch.device("cpu")
    assert capsys.readouterr().err == ""
    assert "no NVIDIA GPU driver" in devices.cuda_problem()


def test_cuda_n_names_one_gpu_and_one_the_machine_lacks_is_an_error_naming_the_count(monkeypatch, capsys):
    monkeypatch.setattr(devices, "cuda_problem", lambda: None)  # two usable GPUs
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert devices.resolve_device("cuda:1") == torch.device("cuda:1")
    with pytest.raises(devices.DeviceError, match=r"--device cuda:2: CUDA sees 2 GPU\(s\) here, cuda:0 to cuda:1"):
        devices.resolve_device("cuda:2")
    import evaluate

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "a GPU of the test's")
    with pytest.raises(SystemExit):  # evaluate.py's --device takes cuda:N too: it gets as far as the checkpoint
        evaluate.main(["retrieval", "no/such/ckpt.pt", "--device", "cuda:1"])
    assert "device cuda:1 (a GPU of the test's)" in capsys.readouterr().out


def test_the_driver_version_is_read_from_the_kernel_module_line(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)  # a CPU-only build: the message names the driver to match
    nvidia_driver(monkeypatch, tmp_path, "535.104.05")
    assert "is a CPU-only build; install the CUDA wheel that matches driver 535.104.05" in devices.cuda_problem()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a usable GPU")
@pytest.mark.parametrize("program", ["train.py", "evaluate.py"])
def test_device_cuda_on_a_machine_without_a_usable_gpu_exits_non_zero_with_one_line(tiny_data, tmp_path, program):
    args = ["--preset", "demo", "--data", tiny_data, "--out", tmp_path / "run", *TINY]
    if program == "evaluate.py":
        args = ["retrieval", tmp_path / "ckpt.pt"]
        (tmp_path / "ckpt.pt").write_bytes(b"")  # never read: the device is checked first
    cmd = [sys.executable, str(ROOT / program), *map(str, args), "--device", "cuda"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    err = res.stderr.strip()
    assert res.returncode != 0 and "\n" not in err and "Traceback" not in err, err
    assert err.startswith(f"{program}: --device cuda: no usable GPU"), err
    assert not (tmp_path / "run" / "ckpt.pt").exists()


def test_default_workers_are_the_cores_per_process_at_most_the_best_measured():
    assert data.workers_per_process(3, cores=64, processes=8) == 3  # asked for: as asked
    assert data.workers_per_process(0) == 0
    assert data.workers_per_process(-1, cores=64, processes=8) == 8
    assert data.workers_per_process(-1, cores=64, processes=1) == data.BEST_WORKERS == 16
    assert data.workers_per_process(-1, cores=2, processes=1) == 2
    assert data.workers_per_process(-1, cores=4, processes=8) == 1  # never none by default


def test_best_workers_is_the_count_results_gpu_md_measured_fastest():
    """BEST_WORKERS quotes lab/results/gpu.md: the column of its prepared-files loader row that is highest."""
    row = next(
        line for line in (ROOT / "lab" / "results" / "gpu.md").read_text().splitlines() if line.startswith("| prepared")
    )
    header = next(
        line for line in (ROOT / "lab" / "results" / "gpu.md").read_text().splitlines() if "workers clips/s" in line
    )
    counts = [int(c.split()[0]) for c in header.strip("|").split("|") if "workers clips/s" in c]
    rates = [float(c) for c in row.strip("|").split("|")[2 : 2 + len(counts)]]
    assert counts[rates.index(max(rates))] == data.BEST_WORKERS


class _WhereAmI(torch.utils.data.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        return torch.tensor(cores), torch.get_num_threads()


def test_a_loader_worker_runs_one_thread_on_every_core_of_the_main_process():
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    for where, threads in data.loader(_WhereAmI(), None, 1):
        assert threads == 1 and (cores is None or where.tolist() == cores)
