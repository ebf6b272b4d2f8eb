"""How a run survives faults: what a checkpoint holds and how it is written atomically (checkpoint),
and the run management around train.py's loop, runstate.Run: resuming, the log, SIGTERM; one run per
folder (runstate); evaluate.py's records, one per dataset, fold and protocol, kept beside a checkpoint
(records). train.py and evaluate.py use them."""
