"""Shared test set-up: import the flat top-level modules and keep every test single-threaded and seeded."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
