"""media/loader_workers.py: which cores DataLoader workers are held to, and that a held worker runs one thread."""

import os

import pytest
import torch

from media import loader_workers


def test_worker_cores_leave_the_main_processes_theirs_and_never_share_a_core():
    sixteen = list(range(16))
    assert loader_workers.worker_cores(4, "auto", sixteen, slot=(0, 1)) == [15, 14, 13, 12]
    assert loader_workers.worker_cores(14, "auto", sixteen, slot=(0, 1)) == list(range(15, 1, -1))  # cores 0-1 for main
    assert loader_workers.worker_cores(15, "auto", sixteen, slot=(0, 1)) is None  # main would have only one core
    assert loader_workers.worker_cores(1, "auto", [0, 1], slot=(0, 1)) is None  # this 2-core machine: left free
    assert loader_workers.worker_cores(1, "on", [0, 1], slot=(0, 1)) == [1]
    assert loader_workers.worker_cores(4, "off", sixteen, slot=(0, 1)) is None
    two = [loader_workers.worker_cores(4, "auto", sixteen, slot=(r, 2)) for r in (0, 1)]  # torchrun, 2 local ranks
    assert two == [[15, 14, 13, 12], [11, 10, 9, 8]] and not set(two[0]) & set(two[1])
    with pytest.raises(ValueError, match="--pin-workers 'yes'"):
        loader_workers.worker_cores(1, "yes", sixteen)


class _WhereAmI(torch.utils.data.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        return torch.tensor(sorted(os.sched_getaffinity(0))), torch.get_num_threads()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity on this OS")
def test_a_loader_worker_is_held_to_its_core_with_one_thread():
    cores = sorted(os.sched_getaffinity(0))
    loader = torch.utils.data.DataLoader(
        _WhereAmI(), batch_size=None, num_workers=1, worker_init_fn=loader_workers.worker_init_fn(1, "on")
    )
    for where, threads in loader:
        assert where.tolist() == [cores[-1]] and threads == 1
    free = torch.utils.data.DataLoader(
        _WhereAmI(), batch_size=None, num_workers=1, worker_init_fn=loader_workers.worker_init_fn(1, "off")
    )
    assert next(iter(free))[0].tolist() == cores
