"""The judge of lab/results/warmup_ranks/PLAN.md adopts the two-rank warm-up only when it can fail to."""

import json
from pathlib import Path

from lab import warmup_ranks

ONE = Path(__file__).resolve().parent.parent / "lab" / "results" / "warmup_ranks" / "one_process"


def _two_ranks(tmp_path, shift):
    """The one-process settings, with `shift` added to one method's 1-shot accuracy on every seed."""
    (tmp_path / "settings").mkdir(parents=True)
    for seed in warmup_ranks.SEEDS:
        name = f"seed{seed}_faulty50.json"
        saved = json.loads((ONE / "settings" / name).read_text())
        saved["rows"]["weighted"]["1-shot"] += shift(seed)
        (tmp_path / "settings" / name).write_text(json.dumps(saved))
    return tmp_path


def test_equal_arms_are_adopted_and_a_shift_beyond_the_seed_spread_or_missing_seeds_are_not(tmp_path):
    text, adopt = warmup_ranks.judge(_two_ranks(tmp_path / "same", lambda s: 0.0), ONE)
    assert adopt and "**Adopted**" in text
    noisy = _two_ranks(tmp_path / "noisy", lambda s: (-0.01, 0.01, 0.0)[s])  # a point either way: noise
    assert warmup_ranks.judge(noisy, ONE)[1]
    down = _two_ranks(tmp_path / "down", lambda s: -0.3 - 0.01 * s)  # 30 points lower on every seed
    text, adopt = warmup_ranks.judge(down, ONE)
    assert not adopt and "**Not adopted**" in text and "| Weighted-xID | 1-shot |" in text
    (tmp_path / "same" / "settings" / "seed2_faulty50.json").unlink()  # 2 of the plan's 3 seeds
    text, adopt = warmup_ranks.judge(tmp_path / "same", ONE)
    assert not adopt and "2 of the plan's 3 seeds ran" in text
