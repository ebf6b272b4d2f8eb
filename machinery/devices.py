"""Where the work runs: the default device, torchrun's processes, and gathering a tensor from every
process (paper Sec. 5.1 trains on 8 GPUs under DDP; Sec. 6 on more).

    default_device       the GPU if there is one, else the CPU (training, evaluation, tools)
    setup_distributed    one process, or torchrun's process group: (ddp, rank, world, device)
    all_gather_cat       a same-shaped tensor from every rank, concatenated in rank order (the
                         memory bank's update)
    gather_on_host       the same for a small CPU tensor, without a device sync (train.py's
                         indices of files that failed to decode)

    torchrun --nproc_per_node=8 train.py ...     # setup_distributed reads torchrun's environment

Tests: tests/test_ddp_objective.py, the torchrun tests of tests/test_train.py
"""

import os

import torch
import torch.distributed as dist
from torch import Tensor


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def setup_distributed() -> tuple[bool, int, int, torch.device]:
    """torchrun's environment decides: (ddp, rank, world, device). Plain python is one process."""
    if "RANK" not in os.environ:
        return False, 0, 1, default_device()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}")
        torch.cuda.set_device(device)
    return True, dist.get_rank(), dist.get_world_size(), device


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
