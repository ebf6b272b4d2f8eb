"""The cosine that both learning-rate schedules follow: pre-training's second stage, after the constant
xID warm-up (train.lr_at; paper Sec. 4.3, 5.1 "Pretraining"), and fine-tuning's groups (Sec. 5.1,
"Downstream"; protocols/finetune.py).

    python train.py ...                # train.lr_at, every step
    python evaluate.py finetune CKPT   # every step of the fine-tune

Tests: tests/test_train.py (the pre-training schedule), tests/test_evaluate.py (fine-tuning)
"""

import math


def cosine(progress: float, start: float, end: float) -> float:
    """From `start` at progress 0 to `end` at progress 1, half a cosine period."""
    return end + 0.5 * (start - end) * (1 + math.cos(math.pi * progress))
