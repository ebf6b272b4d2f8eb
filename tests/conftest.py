"""Shared test set-up: keep every test seeded (pytest.ini puts the repository root on the path)."""
import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


RATE = 22050  # sample rate of the generated test files


def clicks(seconds, at):
    """Silence with 50 ms 1 kHz bursts starting at the times `at`."""
    t = np.arange(int(RATE * seconds)) / RATE
    wav = np.zeros_like(t, dtype=np.float32)
    for s in at:
        on = (t >= s) & (t < s + 0.05)
        wav[on] = 0.5 * np.sin(2 * np.pi * 1000 * t[on])
    return wav


def counter_frames(seconds, fps, size=32):
    """Frame k is uniformly grey at level 3k: the decoded level tells which source frame it is."""
    return np.stack([np.full((size, size, 3), 3 * k, np.uint8) for k in range(int(round(seconds * fps)))])
