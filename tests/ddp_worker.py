"""Run by tests/test_train.py under torchrun: train, then save this rank's model and bank for comparison."""

import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import train
from config import parse_config

if __name__ == "__main__":
    cfg = parse_config(sys.argv[1:])
    model, bank = train.main(cfg)
    rank = int(__import__("os").environ["RANK"])
    torch.save({"model": model.state_dict(), "bank": bank.state_dict()}, Path(cfg.out) / f"rank{rank}.pt")
    assert not dist.is_initialized()
