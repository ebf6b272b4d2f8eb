"""The learning-rate schedules: pre-training's constant xID warm-up then cosine (paper Sec. 5.1,
"Pretraining"; Sec. 4.3's two stages), and the cosine that fine-tuning scales its groups by (Sec. 5.1,
"Downstream"). One cosine for both.

    python train.py ...          # lr_at, every step
    python evaluate.py finetune CKPT   # cosine, every step of the fine-tune

Tests: tests/test_train.py (the pre-training schedule), tests/test_evaluate.py (fine-tuning)
"""

import math

from config import Config


def cosine(progress: float, start: float, end: float) -> float:
    """From `start` at progress 0 to `end` at progress 1, half a cosine period."""
    return end + 0.5 * (start - end) * (1 + math.cos(math.pi * progress))


def lr_at(step: int, cfg: Config, steps_per_epoch: int) -> float:
    """Constant during the xID warm-up, then cosine from lr to lr_min over the second stage."""
    warm = cfg.warmup_epochs * steps_per_epoch
    if step < warm:
        return cfg.lr
    return cosine((step - warm) / max(1, cfg.epochs * steps_per_epoch), cfg.lr, cfg.lr_min)
