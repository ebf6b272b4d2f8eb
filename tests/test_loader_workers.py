"""media/loader_workers.py: a DataLoader worker runs one thread, on the cores the main process has."""

import os

import torch

from media import loader_workers


class _WhereAmI(torch.utils.data.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        return torch.tensor(cores), torch.get_num_threads()


def test_a_loader_worker_runs_one_thread_on_every_core_of_the_main_process():
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    loader = torch.utils.data.DataLoader(
        _WhereAmI(), batch_size=None, num_workers=1, worker_init_fn=loader_workers.worker_init
    )
    for where, threads in loader:
        assert threads == 1 and (cores is None or where.tolist() == cores)
