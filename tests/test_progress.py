"""The demo's progress line (experiments/progress.py): the stage, the share done and a time left that
follows the measured pace; work found done counts as done, not as time; train.py reports each epoch."""

from experiments.progress import EVAL_EPOCHS, Progress


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_time_left_follows_the_pace_of_the_last_epochs_and_the_first_evaluation_never_the_preloading_one():
    clock, lines = Clock(), []
    p = Progress("seed 0, 50%", warmup_epochs=4, epochs=2, methods=2, clock=clock, say=lines.append)
    assert p.left_seconds() is None and "time left: measuring" in p.line("start")
    clock.t += 100  # the first epoch also preloads the data: left out of the pace, which waits for the next
    p.trained("warm-up epoch 1/4")
    assert p.left_seconds() is None and "time left: measuring" in lines[-1]
    for e in range(1, 4):  # 10 s an epoch from then on
        clock.t += 10
        p.trained(f"warm-up epoch {e + 1}/4")
    # left: 2 x 2 branch epochs and 2 evaluations of EVAL_EPOCHS epochs each, at 10 s per epoch
    assert p.left_seconds() == (4 + 2 * EVAL_EPOCHS) * 10
    assert lines[-1].startswith("[demo] seed 0, 50%: warm-up epoch 4/4 |") and "left" in lines[-1]
    for e in range(2):
        clock.t += 10
        p.trained(f"xid epoch {e + 1}/2")
    p.evaluating("xid")
    clock.t += 50  # an evaluation measured at 50 s: the next one is expected to cost as much
    p.evaluated("xid")
    assert p.left_seconds() == 2 * 10 + 50
    for e in range(2):
        clock.t += 10
        p.trained(f"weighted epoch {e + 1}/2")
    p.evaluating("weighted")
    clock.t += 50
    p.evaluated("weighted")
    assert p.left_seconds() == 0 and "100% done" in lines[-1]


def test_work_found_done_is_not_counted_as_time():
    clock = Clock()
    p = Progress("s", warmup_epochs=10, epochs=1, methods=1, clock=clock, say=lambda _: None)
    clock.t += 1000  # a resume found 8 warm-up epochs already trained by an earlier run
    p.skipped(epochs=8)
    clock.t += 30  # this process's first epoch: it preloads the data
    p.trained("warm-up epoch 9/10")
    clock.t += 10
    p.trained("warm-up epoch 10/10")
    assert p.left_seconds() == (1 + EVAL_EPOCHS) * 10


def test_train_main_reports_every_epoch_it_runs(tiny_data, tmp_path):
    import train
    from analysis.drift import BankReport
    from config import parse_config
    from test_train import TINY

    seen = []
    cfg = parse_config(
        ["--preset", "demo", "--data", str(tiny_data), "--out", str(tmp_path / "run"), *TINY]
        + ["--workers", "0", "--warmup-epochs", "2", "--epochs", "1"]
    )
    train.main(cfg, report=BankReport(cfg, then=seen.append))
    assert seen == [0, 1, 2]


def test_side_by_side_the_pace_is_wall_time_per_unit_after_each_branch_finished_its_first():
    """Branches side by side: epochs and evaluations of different branches interleave, an evaluating event does
    not drop the time since the last event, and the time left is the work left at the wall time per unit (an
    evaluation EVAL_EPOCHS units) finished after each branch had finished one: their start-up is left out, as
    the warm-up's first epoch is, and until then the warm-up's pace holds, so the estimate does not jump."""
    clock, lines = Clock(), []
    p = Progress("s", warmup_epochs=2, epochs=2, methods=2, clock=clock, say=lines.append)
    for e in range(2):
        clock.t += 10
        p.trained(f"warm-up epoch {e + 1}/2")
    p.side_by_side(2)
    clock.t += 30  # both branches start up (processes, the preloaded data): a slow first unit
    p.trained("xid epoch 1/2")
    assert p.left_seconds() == (3 + 2 * EVAL_EPOCHS) * 10  # the warm-up's pace until each branch did one
    clock.t += 2
    p.trained("weighted epoch 1/2")
    assert p.left_seconds() == (2 + 2 * EVAL_EPOCHS) * 10
    clock.t += 4
    p.trained("xid epoch 2/2")  # 1 unit in 4 s since each had finished one
    assert p.left_seconds() == (1 + 2 * EVAL_EPOCHS) * 4
    p.evaluating("xid")
    clock.t += 10
    p.trained("weighted epoch 2/2")
    p.evaluated("xid")  # 2 + EVAL_EPOCHS units in 14 s
    assert p.left_seconds() == EVAL_EPOCHS * 14 / (2 + EVAL_EPOCHS)
    assert p.spent == 66  # the wall time, counted once
