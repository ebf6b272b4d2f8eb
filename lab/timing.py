"""Timing on a device: waiting for it, a function's seconds per call, and the bare model step a training step is set
against (encoders, heads and Adam on one ready batch). Shared by lab/bench.py and lab/bench_epoch.py.

    from lab.timing import bare_model_step, sync, time_per_call      # no command of its own
"""

import time

import torch


def sync(device):
    """Wait for the device's queued kernels (a GPU's; a CPU has none), so that a clock reading counts them."""
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_per_call(fn, steps, device):
    fn()  # warm-up: allocations, cuDNN algorithm choice
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    sync(device)
    return (time.perf_counter() - t0) / steps


def bare_model_step(model, optimizer, autocast, video, audio):
    """The floor a training step is measured against: encoders, heads and Adam on one ready batch,
    with a stand-in loss (lab/bench.py's `model`, lab/bench_epoch.py's model column)."""

    def step():
        with autocast:
            v, a = model(video, audio)
        loss = -(v.float() * a.float()).sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step
