"""How a run survives faults: what a checkpoint holds and how it is written atomically (checkpoint),
resuming, the log, SIGTERM and one run per folder (runstate). train.py and evaluate.py use them."""
