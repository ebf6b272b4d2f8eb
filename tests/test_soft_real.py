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


def test_warnings_counts_the_firing_branches_of_whole_demo_runs_and_keeps_them_once_runs_are_gone(tmp_path):
    import demo
    from lab.soft_real import drift_warnings

    def record(epoch, stage, agreement):
        return {"epoch": epoch, "stage": stage, "agreement": agreement, "soft_share": {"ccp": 0.3}}

    runs = tmp_path / "runs"
    (runs / "demo_settings").mkdir(parents=True)
    rows = {m: {"1-shot": shot, "AUROC": 0.85} for m, shot in {"xid": 0.40, "soft": 0.35, "robust": 0.45}.items()}
    (runs / "demo_settings" / f"{demo.setting_name(7, 0.25)}.json").write_text(json.dumps({"rows": rows}))
    for name, agreements in {"soft": [0.79, 0.77, 0.77], "robust": [0.80, 0.82, 0.84]}.items():
        run = runs / "seed7_faulty25" / name
        run.mkdir(parents=True)
        recs = [record(0, "xid", 0.80)] + [record(e + 1, name, a) for e, a in enumerate(agreements)]
        (run / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "warnings.json"
    kept = drift_warnings(runs, [7, 8], out)  # seed 8 never ran: nothing to read
    by = {b["branch"]: b for b in kept["branches"]}
    assert (kept["fired"], kept["of"]) == (1, 2) and by["soft"]["warned"] == 3 and by["robust"]["warned"] is None
    assert abs(by["soft"]["vs xid"] - -5.0) < 1e-9 and abs(by["robust"]["vs xid"] - 5.0) < 1e-9
    import shutil

    shutil.rmtree(runs)
    assert drift_warnings(runs, [7], out)["branches"] == kept["branches"]  # read back from the kept file
