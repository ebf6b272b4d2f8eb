"""train.py with make demo's report in its log (analysis/drift.BankReport: the bank's diagnostics and the drift
warning), for the demo's runs that train in processes of their own: its warm-up under torchrun (--warmup-ranks).

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m experiments.train_reported [train.py options]
"""

import train
from analysis.drift import BankReport
from config import parse_config

if __name__ == "__main__":
    cfg = parse_config()
    train.main(cfg, report=BankReport(cfg))
