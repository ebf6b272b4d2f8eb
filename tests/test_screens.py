"""The screens' scripts from their room, lab/screens/: each collector remakes the committed report it names
from the committed records, the merged files keep every entry and section, a candidate of the branch-length
screen reuses its seed's warm-up and folds its report in, and criterion (a)'s record reads a warm-up's log.

    python -m pytest tests/test_screens.py
"""

import json
from pathlib import Path

import torch

from lab.screens import ccp_drift, demo_screen, epoch_branches, epoch_equivalence, faults_screen, merged

ROOT = Path(__file__).resolve().parents[1]


def test_each_collector_remakes_the_committed_report_it_names(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)  # the screens read lab/results/ from the repository root, as their commands run
    made = {
        "lab/results/epoch_speed/EQUIVALENCE.md": epoch_equivalence.report(),
        "lab/results/epoch_speed/BRANCHES.md": epoch_branches.report(),
        "lab/results/demo_screen/RESULTS.md": demo_screen.verdict(),
        # no runs: the series come from epochs.json, and nothing is rewritten
        "lab/results/ccp_drift/RESULTS.md": ccp_drift.report(ccp_drift.COMMAND.split()[3:], runs=tmp_path / "none"),
    }
    for path, text in made.items():
        assert text == (ROOT / path).read_text(), path
        assert text.split("\n\n")[1].startswith("Made by `python -m lab.screens."), path  # names its command


def test_a_merged_file_keeps_every_entry_and_section_and_replaces_one_in_place(tmp_path):
    keyed = tmp_path / "demos.json"
    merged.put(keyed, "E8", {"a": [0.5, None]}, "cmd", "note")
    merged.put(keyed, "E12", {"b": 1}, "cmd")
    merged.put(keyed, "E8", {"a": 2}, "cmd2")
    whole = json.loads(keyed.read_text())
    assert whole == {"made_by": "cmd2", "note": "note", "entries": {"E8": {"a": 2}, "E12": {"b": 1}}}
    log = tmp_path / "timings.log"
    texts = {"one.log": "| a | b |\n|---|---|\n", "two.time": "225.19\n", "three.md": "# T\n\ntext\n\n"}
    for name, text in texts.items():
        merged.put_section(log, name, text, "# what this log is\n")
    assert merged.sections(log) == ("# what this log is\n\n", texts)  # each file back, byte for byte
    merged.put_section(log, "one.log", "new\n")
    assert list(merged.sections(log)[1].items())[0] == ("one.log", "new\n")
    assert "| a | b |\n|---|---|\n\n==> two.time <==\n" not in log.read_text()  # replaced, order kept
    assert "new\n\n==> two.time <==\n" in log.read_text()  # a blank line ends a table before the next header


def test_a_candidate_reuses_its_seeds_warm_up_and_folds_its_report(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    first = tmp_path / "runs/demo_screen/E8/seed700_faulty25/warmup"
    first.mkdir(parents=True)
    (first / "ckpt.pt").write_text("the warm-up")
    ran = []

    def demo(cmd, check):  # demo.py, as it leaves its files
        ran.append(cmd)
        out = Path(cmd[cmd.index("--results") + 1])
        (out / "demo_settings").mkdir(parents=True)
        (out / "demo.json").write_text(json.dumps({"args": {"epochs": 12}}))
        (out / "demo.md").write_text("# Demo results\n\n| x |\n|---|\n")

    monkeypatch.setattr(demo_screen.subprocess, "run", demo)
    demo_screen.run(12, 700)
    assert (tmp_path / "runs/demo_screen/E12/seed700_faulty25/warmup/ckpt.pt").read_text() == "the warm-up"
    assert ran[0][ran[0].index("--epochs") + 1] == "12" and "--no-figures" in ran[0]
    here = tmp_path / "lab/results/demo_screen"
    assert sorted(p.name for p in (here / "E12").iterdir()) == ["demo_settings"]
    assert merged.entries(here / "demos.json") == {"E12": {"args": {"epochs": 12}}}
    assert merged.sections(here / "demos.md")[1] == {"E12/demo.md": "# Demo results\n\n| x |\n|---|\n"}


def test_criterion_a_reads_the_warm_ups_log_and_checkpoint(tmp_path):
    run = tmp_path / "L3" / "seed600"
    run.mkdir(parents=True)
    log = [
        {"epoch": e, "faulty_auroc": 0.5 + e / 100, "knn_class": 0.4, "xmodal_class": 0.3, "loss": 5.0} for e in (0, 1)
    ]
    (run / "log.jsonl").write_text("\n".join(json.dumps(r) for r in [{"epoch": 1, "split": 1.0}, *log]) + "\n")
    torch.save({"config": {"faulty_fraction": 0.5}}, run / "ckpt.pt")
    out = faults_screen.record("L3", "600", "data/synth_src2p", ["--lr", "3e-3"], runs=tmp_path)
    assert out["options"] == "--lr 3e-3" and out["seed"] == 600 and out["epochs"] == 2 and out["own_audio"] is None
    assert out["auroc_by_epoch"] == [0.5, 0.51] and out["faulty_auroc"] == 0.51
    # the committed entries hold the fields record() writes (the first 14, of an earlier form, no own_audio)
    kept = merged.entries(ROOT / faults_screen.RECORD)
    assert kept and all(set(entry) <= set(out) for entry in kept.values())
