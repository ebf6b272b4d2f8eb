"""Measurements beside the method: what the memory bank knows against the ground truth (diagnostics,
logged every epoch), the claims' t-tests and intervals (statistics), and the figures, including the
pictures of a run folder (`python -m analysis.figures RUN_DIR`)."""
