"""evaluate.py's records, one per dataset, fold and protocol, kept beside a checkpoint (records). What a
checkpoint holds, resuming and the run folder's lock are the top-level checkpoint.py's."""
