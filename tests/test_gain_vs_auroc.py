"""experiments/gain_vs_auroc.py: one point per run, paired gains, runs shared by sweeps counted once."""
import json

from experiments.gain_vs_auroc import collect


def row(r1, shot5, auroc=0.7):
    return {"R@1": r1, "5-shot": shot5, "AUROC": auroc}


def write(folder, name, seed, faulty, rows):
    key = {"data": "data/synth", "manifest_sha1": "abc", "warmup_epochs": 75, "epochs": 8}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps({"key": key, "seed": seed, "faulty": faulty, "delta": 0.0, "rows": rows}))


def test_collect_pairs_each_method_with_its_own_xid_and_counts_a_shared_run_once(tmp_path):
    xid = row(0.50, 0.40, auroc=0.66)
    write(tmp_path / "noisy_settings", "seed0_faulty50.json", 0, 0.5,
          {"xid": xid, "weighted": row(0.55, 0.43), "oracle": row(0.60, 0.50)})
    # the delta sweep reuses the same warm-up and xID row: the same run, its "known" row is Weighted-xID
    write(tmp_path / "delta_settings", "seed0_faulty50.json", 0, 0.5, {"xid": xid, "known": row(0.70, 0.70)})
    write(tmp_path / "noisy_settings", "seed1_faulty50.json", 1, 0.5, {"xid": row(0.40, 0.30), "oracle": row(0.38, 0.31)})
    write(tmp_path / "noisy_settings", "seed0_faulty0.json", 0, 0.0, {"xid": xid, "weighted": row(0.9, 0.9)})
    runs = sorted(collect(tmp_path), key=lambda r: r["seed"])
    assert len(runs) == 2  # the 0% setting has nothing faulty to find; the shared run counts once
    first, second = runs
    assert len(first["files"]) == 2 and first["auroc"] == 0.66
    assert abs(first["gain"]["weighted"]["R@1"] - 0.05) < 1e-9  # the Weighted row, not the sweep's "known"
    assert abs(first["gain"]["oracle"]["5-shot"] - 0.10) < 1e-9
    assert "weighted" not in second["gain"] and abs(second["gain"]["oracle"]["R@1"] + 0.02) < 1e-9
