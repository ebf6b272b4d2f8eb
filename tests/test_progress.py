"""The demo's progress lines (tools/demo_report.py's Progress): each run's step and a time left that follows the
measured pace, its first unit (which also decodes the data) left out; work found done is not work left; train.py
reports each epoch."""

from tools.bank_report import BankReport
from tools.demo_report import EVAL_EPOCHS, Progress


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_time_left_follows_the_pace_since_the_first_epoch_and_counts_the_evaluation():
    clock, lines = Clock(), []
    p = Progress("seed0_faulty25 weighted", epochs=4, evals=1, clock=clock, say=lines.append)
    clock.t += 100  # the first epoch also preloads the data: left out of the pace, which waits for the next
    p.trained(0)
    assert lines[-1] == "[demo] seed0_faulty25 weighted: epoch 1/4 | time left: measuring"
    for e in range(1, 3):  # 10 s an epoch from then on
        clock.t += 10
        p.trained(e)
    # left: 1 epoch and an evaluation of EVAL_EPOCHS epochs, at 10 s per epoch
    assert lines[-1] == f"[demo] seed0_faulty25 weighted: epoch 3/4 | about {(1 + EVAL_EPOCHS) * 10:.0f} s left"
    clock.t += 10
    p.trained(3)
    clock.t += 10 * EVAL_EPOCHS
    p.evaluated("weighted")
    assert lines[-1] == "[demo] seed0_faulty25 weighted: weighted evaluated | about 0 s left"


def test_work_found_done_is_not_work_left():
    clock, lines = Clock(), []
    p = Progress("warm-up", epochs=10, evals=0, done=8, clock=clock, say=lines.append)
    clock.t += 30  # this process's first epoch: it preloads the data
    p.trained(8)
    clock.t += 600  # a slow epoch: 1 of 2 left was done in it, so the pace is 600 s an epoch
    p.trained(9)
    assert lines[-1] == "[demo] warm-up: epoch 10/10 | about 0 s left"
    p = Progress("warm-up", epochs=10, evals=0, done=7, clock=clock, say=lines.append)
    p.trained(7)
    clock.t += 120
    p.trained(8)
    assert lines[-1] == "[demo] warm-up: epoch 9/10 | about 2 min left"


def test_train_main_reports_every_epoch_it_runs(tiny_data, tmp_path):
    import train
    from config import parse_config
    from test_train import TINY

    seen = []
    cfg = parse_config(
        ["--preset", "demo", "--data", str(tiny_data), "--out", str(tmp_path / "run"), *TINY]
        + ["--workers", "0", "--warmup-epochs", "2", "--epochs", "1"]
    )
    train.main(cfg, report=BankReport(cfg, then=seen.append))
    assert seen == [0, 1, 2]
