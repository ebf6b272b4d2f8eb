"""Shared test set-up: every test seeded, generated media, and the two datasets several test files use
(pytest.ini puts the repository root on the path)."""

import numpy as np
import pytest
import torch

from tools import synthetic


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


# Module-scoped: each test file that asks for one gets its own, made once.
@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    synthetic.main(
        [
            "--out",
            str(out),
            "--classes",
            "2",
            "--train-per-class",
            "8",
            "--test-per-class",
            "2",
            "--pool",
            "4",
            "--faulty",
            "0.25",
            "--size",
            "32",
            "--seconds",
            "2.2",
            "2.6",
            "--noise",
            "0.5",
        ]
    )
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("clips")
    out = {}
    out["25fps"] = d / "c25.mp4"
    synthetic.write_mp4(out["25fps"], counter_frames(3.0, 25), clicks(3.0, (0.5, 1.5, 2.5)), 25, RATE)
    out["10fps"] = d / "c10.mp4"
    synthetic.write_mp4(out["10fps"], counter_frames(3.0, 10), clicks(3.0, (1.0,)), 10, RATE)
    for k in range(6):  # a pool of 6 silent files: each injected instance needs one of its own
        out["silent_pool"] = d / "pool" / f"silent{k}.mp4"
        out["silent_pool"].parent.mkdir(exist_ok=True)
        synthetic.write_mp4(out["silent_pool"], None, np.zeros(RATE * 4, np.float32), 25, RATE)
    return out
