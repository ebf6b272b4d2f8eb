"""Measurements beside the method: what the memory bank knows against the ground truth (diagnostics,
logged every epoch), the few-shot SVMs of the evaluation protocol (fewshot), what the weights and soft
targets would do against the ground truth (weights), the claims' t-tests and intervals (statistics),
the figures, including the pictures of a run folder (`python -m analysis.figures RUN_DIR`), and a
checkpoint's evaluation records as the paper's table rows (report: `evaluate.py report CKPT`)."""
