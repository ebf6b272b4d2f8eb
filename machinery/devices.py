"""Where the work runs: the device a run asks for, torchrun's processes, and gathering a tensor from every
process (paper Sec. 5.1 trains on 8 GPUs under DDP; Sec. 6 on more).

    resolve_device       --device auto | cuda | cuda:N | cpu: cuda without a usable GPU is an error naming the
                         driver problem; auto falls back to the CPU, warning in one line where an NVIDIA
                         device is present but CUDA cannot use it (a driver too old for the torch wheel)
    default_device       the GPU if there is one, else the CPU (library calls that name no device)
    setup_distributed    one process, or torchrun's process group: (ddp, rank, world, device)
    start_line           what a run prints first: device, world size, precision, loader workers
    precision_on         --amp on a device: auto is bf16 on a GPU, fp32 on a CPU
    all_gather_cat       a same-shaped tensor from every rank, concatenated in rank order (the
                         memory bank's update)
    gather_on_host       the same for a small CPU tensor, without a device sync (train.py's
                         indices of files that failed to decode)

    .venv/bin/torchrun --nproc_per_node=8 train.py ...   # setup_distributed reads torchrun's environment
    .venv/bin/python train.py --device cuda ...           # stops in one line where no GPU is usable

Tests: tests/test_devices.py, tests/test_ddp_objective.py, the torchrun tests of tests/test_train.py
"""

import gc
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

DEVICES = ("auto", "cuda", "cpu")
# What the NVIDIA kernel driver leaves on a machine that has a GPU, whether or not this torch can use it
NVIDIA_FILES = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/nvidia0")


class DeviceError(RuntimeError):
    """The device a run asked for cannot be used; the message names why, in one line."""


def nvidia_present() -> bool:
    """Whether the machine has an NVIDIA device with its kernel driver loaded."""
    return any(Path(p).exists() for p in NVIDIA_FILES)


def driver_version() -> str | None:
    """The loaded NVIDIA kernel driver's version (e.g. 535.104.05), or None."""
    try:
        text = Path(NVIDIA_FILES[0]).read_text()
    except OSError:
        return None
    found = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", text)
    return found.group(1) if found else None


def cuda_problem() -> str | None:
    """None when CUDA is usable, else why not, in words: no NVIDIA driver, a CPU-only torch build, or
    a driver this torch cannot use (torch's own warning says which, e.g. "too old")."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # torch warns once per process; here we want its words
        usable = torch.cuda.is_available()
    if usable:
        return None
    build = f"torch {torch.__version__}" + (f" (CUDA {torch.version.cuda})" if torch.version.cuda else "")
    if not nvidia_present():
        return f"no NVIDIA GPU driver is loaded on this machine (no {NVIDIA_FILES[0]}); {build}"
    if torch.version.cuda is None:
        return f"{build} is a CPU-only build; install the CUDA wheel that matches driver {driver_version()}"
    said = next((str(w.message).strip().splitlines()[0] for w in caught), "torch.cuda.is_available() is False")
    return f"{build} cannot use the NVIDIA driver {driver_version() or '(version unknown)'}: {said}"


def resolve_device(request: str = "auto", say: bool = True) -> torch.device:
    """The device `--device request` means. cuda (or cuda:N) without a usable GPU (or that GPU) raises
    DeviceError; auto on a
    machine whose NVIDIA device CUDA cannot use warns in one line on stderr (`say`), then takes the
    CPU, so that a GPU run never falls back silently."""
    index = request[5:] if request.startswith("cuda:") else None
    if request not in DEVICES and not (index or "").isdigit():
        raise DeviceError(f"--device {request!r}: expected one of {', '.join(DEVICES)} or cuda:N")
    if request == "cpu":
        return torch.device("cpu")
    problem = cuda_problem()
    if problem is None and index is not None and int(index) >= torch.cuda.device_count():
        n = torch.cuda.device_count()
        raise DeviceError(f"--device {request}: CUDA sees {n} GPU(s) here, cuda:0 to cuda:{n - 1}")
    if problem is None:
        return torch.device(request if index is not None else "cuda")
    if request != "auto":
        raise DeviceError(f"--device {request}: no usable GPU: {problem}")
    if say and nvidia_present():
        print(f"warning: --device auto: an NVIDIA device is present but {problem}; running on the CPU", file=sys.stderr)
    return torch.device("cpu")


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def setup_distributed(request: str = "auto") -> tuple[bool, int, int, torch.device]:
    """torchrun's environment decides: (ddp, rank, world, device). Plain python is one process. The
    device is resolve_device(request)'s (rank 0 alone warns); under torchrun on GPUs, cuda:LOCAL_RANK."""
    device = resolve_device(request, say=int(os.environ.get("RANK", 0)) == 0)
    if "RANK" not in os.environ:
        return False, 0, 1, device
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend)
    if backend == "nccl":
        device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}")
        torch.cuda.set_device(device)
    return True, dist.get_rank(), dist.get_world_size(), device


def end_distributed() -> None:
    """Destroys the process group once the caller has dropped its DDP wrapper. In the other order DDP's
    reducer is the group's last owner, and its destructor, run with the GIL held, waits for gloo's
    worker threads while one of them waits for the GIL to free a tensor: a hang at exit
    (pytorch/pytorch#56297, seen in tests/test_gpu_check.py's smoke run). The barrier first lets the
    workers finish the last collectives while this thread waits without the GIL."""
    dist.barrier()
    gc.collect()  # the wrapper's reference cycles: the reducer goes now, while the group still has an owner
    dist.destroy_process_group()


def leave_group(parts: Any, ddp: bool) -> None:
    """Under torchrun, on the way out of a run that ended and of one that stopped alike: train.py's Parts
    drops its DDP wrapper, then end_distributed, in that order (see there)."""
    if ddp:
        parts.model = parts.unwrapped()
        end_distributed()


def any_rank(flag: bool, device: torch.device) -> bool:
    """Whether `flag` holds on any rank (one process: on this one): an exit every rank then takes together,
    where end_distributed's barrier meets the others'."""
    if not dist.is_initialized():
        return flag
    t = torch.tensor(float(flag), device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def start_line(program: str, device: torch.device, world: int, precision: str, workers: int) -> str:
    """What a run says before it starts: where it computes, with how many processes, in which
    precision, with how many loader workers each."""
    where = f"{device} ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else str(device)
    return f"{program}: device {where}, world size {world}, precision {precision}, {workers} loader workers per process"


def precision_on(amp: str, device: torch.device) -> str:
    """--amp as it applies on `device`: auto is bf16 on a GPU, off (fp32) on a CPU."""
    return amp if amp != "auto" else ("bf16" if device.type == "cuda" else "off")


def all_gather_cat(t: Tensor, group: dist.ProcessGroup | None = None) -> Tensor:
    """Concatenate the same-shaped tensor `t` from every rank of `group` (default: all), in rank order."""
    out = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(out, t.contiguous(), group=group)
    return torch.cat(out, dim=0)


def gather_on_host(t: Tensor) -> Tensor:
    """A small CPU tensor (B,) from every rank, concatenated, without a device sync: under NCCL it
    travels over a gloo group of its own (made once). One process: t itself."""
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return t
    global _HOST_GROUP
    if _HOST_GROUP is None:
        _HOST_GROUP = dist.new_group(backend="gloo") if dist.get_backend() != "gloo" else dist.group.WORLD
    return all_gather_cat(t, _HOST_GROUP)


_HOST_GROUP = None
