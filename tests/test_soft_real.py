"""lab/soft_real.py: the plans' rule for Soft and Robust against xID can say each of its three things, and a
branch's record says whether train.py's drift warning fired in it, replayed from its log."""

import json

from lab.soft_real import signals, verdict


def test_the_rule_reads_loses_does_not_lose_and_unsettled():
    assert verdict([-1.0, -0.2, -3.0]).startswith("loses")
    assert verdict([+1.0, -0.2, +3.0]) == "does not lose"
    assert verdict([+0.5, -4.0, +0.5]) == "not settled by 3 seeds"  # positive on 2, mean negative
    assert verdict([-1.0, -2.0]).startswith("not read")


def test_a_branch_records_the_epoch_its_drift_warning_fired(tmp_path):
    def record(epoch, stage, agreement):
        return {"epoch": epoch, "stage": stage, "agreement": agreement, "soft_share": {"ccp": 0.3}}

    def branch(name, agreements):
        run = tmp_path / name
        run.mkdir()
        recs = [record(0, "xid", 0.80)] + [record(e + 1, "soft", a) for e, a in enumerate(agreements)]
        (run / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        return signals(run)

    assert branch("drifts", [0.79, 0.77, 0.77, 0.76])["warned"] == 3  # 2 epochs more than 0.02 below 0.80
    assert branch("holds", [0.79, 0.785, 0.81, 0.83])["warned"] is None
