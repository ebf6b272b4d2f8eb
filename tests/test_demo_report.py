"""The demo's tables and Fig. 7 (tools/demo_report.py, lab/figures.py): paired differences
against xID with 95% t-intervals over seeds (the paired panel of Fig. 7), the soft-targets column only
where a method uses them, a capped few-shot column that says which shot it holds, and the table printed
beside the committed reference."""

from demo import DemoArgs
from tools import demo_report


def test_paired_differences_come_with_a_confidence_interval():
    def rows(a, b):
        return {0.5: {"xid": {"R@1": a, "AUROC": None}, "weighted": {"R@1": b, "AUROC": None}}}

    results = [rows(0.20, 0.25), rows(0.30, 0.33), rows(0.10, 0.16)]
    text = demo_report.tables(results, 0.5, ["xid", "weighted"], ["R@1", "AUROC"])
    assert "| xID | ✗ | 20.0 ± 10.0 | - |" in text  # the sample SD (ddof 1) of 20, 30, 10 and "over 3 seeds" in text
    # differences +5, +3, +6: mean 4.67, sd 1.53, t(0.975, 2) = 4.303 -> half-width 3.79
    assert "| Weighted-xID | +4.7 [+0.9, +8.5] |" in text


def test_the_table_shows_the_soft_targets_column_only_when_a_method_uses_them():
    rows = {0.5: {m: {"R@1": 0.2, "AUROC": 0.6} for m in ("xid", "weighted", "soft:oracle")}}
    plain = demo_report.tables([rows], 0.5, ["xid", "weighted"], ["R@1", "AUROC"])
    assert "Soft targets" not in plain and "| Weighted-xID | scores | 20.0 | 60.0 |" in plain
    assert "one seed, so no interval" in plain
    soft = demo_report.tables([rows], 0.5, ["xid", "soft:oracle"], ["R@1", "AUROC"])
    assert "| Method | Weights | Soft targets | R@1 | AUROC |" in soft and "| xID | ✗ | ✗ | 20.0 | 60.0 |" in soft
    assert "| Soft-xID (oracle targets) | ✗ | oracle | 20.0 | 60.0 |" in soft


def test_a_capped_shot_column_says_which_shot_it_holds():
    capped = {"fewshot": {"text": "t", "capped": {"5": 4}}}
    rows = {0.5: {m: {"5-shot": 0.3, "AUROC": 0.6, "protocols": capped} for m in ("xid", "weighted")}}
    text = demo_report.tables([rows], 0.5, ["xid", "weighted"], ["5-shot", "AUROC"])
    assert "5-shot: the 4-shot figure (the smallest class has 4 training videos)" in text
    rows = {0.5: {m: {"5-shot": 0.3, "AUROC": 0.6} for m in ("xid", "weighted")}}
    assert "figure" not in demo_report.tables([rows], 0.5, ["xid", "weighted"], ["5-shot", "AUROC"])


def test_fig7_paired_panel_cancels_the_spread_the_methods_share(tmp_path):
    """Seeds 20 points apart, a method always 2 points above the baseline: the paired differences are
    exactly 2 with a zero-width interval, while the per-method means' intervals are wide."""
    from lab import figures

    base = {0.0: [0.9, 0.7, 0.8], 0.5: [0.5, 0.3, 0.4]}
    curves = {"xID": base, "Weighted-xID": {lv: [v + 0.02 for v in vs] for lv, vs in base.items()}}
    diffs = figures.paired_differences(curves, "xID")
    assert set(diffs) == {"Weighted-xID"} and set(diffs["Weighted-xID"]) == {0.0, 0.5}
    for d in diffs["Weighted-xID"].values():
        assert abs(sum(d) / len(d) - 0.02) < 1e-9 and demo_report.ci95(d) < 1e-9
    assert demo_report.ci95(base[0.0]) > 0.2
    figures.noisy([0.0, 0.5], curves, "R@5", tmp_path / "n.png", baseline="xID")
    assert (tmp_path / "n.png").stat().st_size > 1000


def test_the_main_job_prints_its_table_beside_the_reference():
    row = {"R@1": 0.30, "R@5": 0.70, "1-shot": 0.20, "5-shot": 0.31, "AUROC": 0.58}
    mine = [{0.5: {"xid": row, "weighted": {**row, "R@1": 0.35}}}]
    reference = {"results": [{"0.5": {"xid": {**row, "R@1": 0.28}, "weighted": row}}]}
    args = DemoArgs(faulty=[0.5], methods=["xid", "weighted"], compare="lab/results/demo.json")
    text = demo_report.compare(mine, reference, args)
    assert "| xID | 30.0 / 28.0 (+2.0) |" in text and "| Weighted-xID | 35.0 / 30.0 (+5.0) |" in text
    assert "the reference has no such setting" in demo_report.compare(
        mine, reference, DemoArgs(faulty=[0.25], methods=["xid"], compare="x")
    )


def test_a_capped_few_shot_column_reads_the_shot_evaluate_ran():
    """evaluate.py caps n-shot at the fewest training videos of a class and names it: the demo's 5-shot
    column then reads that shot's numbers, not a key that is missing."""
    from demo import shot

    fewshot = {"1-shot": (0.4, 0.1), "2-shot": (0.6, 0.1), "protocol": {"capped": {"5": 2}}}
    assert shot(fewshot, 5) == (0.6, 0.1) and shot(fewshot, 1) == (0.4, 0.1)
    assert shot({"5-shot": (0.7, 0.0), "protocol": {}}, 5) == (0.7, 0.0)


def test_the_table_links_the_pictures_it_writes_and_names_every_file(tmp_path, monkeypatch):
    """write_results copies the last setting's pictures beside demo.md, which links each; it returns every file
    it wrote, for the demo's last line."""
    root = tmp_path / "runs" / "seed0_faulty25"
    (root / "weighted").mkdir(parents=True)
    (root / "weighted" / "scores_weights.png").write_bytes(b"png")
    (root / "curves.png").write_bytes(b"png")
    monkeypatch.setattr(demo_report.figures, "run_pictures", lambda folder: [folder / "curves.png"])
    args = DemoArgs(results=str(tmp_path / "res"), methods=["xid", "weighted"])
    rows = {0.25: {m: dict.fromkeys(demo_report.COLUMNS, 0.5) for m in args.methods}}
    written = demo_report.write_results(args, [rows], {0.25: -0.67}, root, 1.0, [], 0, ("weighted", "Weighted-xID"))
    assert [p.name for p in written] == ["demo.md", "demo.json", "demo_scores_weights.png", "demo_curves.png"]
    text = (tmp_path / "res" / "demo.md").read_text()
    assert "![demo_scores_weights](demo_scores_weights.png)" in text and "![demo_curves](demo_curves.png)" in text
    assert "Weighted-xID's evaluation" in text


def test_the_comparison_puts_each_difference_from_xid_beside_where_the_committed_seeds_put_it(tmp_path):
    """The footer of --compare: each method's difference from xID on this run, inside or outside the 95% range
    of the paired differences over the committed settings files of the same regime (other regimes left out)."""
    import json

    key = {"data": "d", "epochs": 24, "train_args": []}
    folder = tmp_path / "lab" / "results" / "claims" / "rerun" / "settings"
    folder.mkdir(parents=True)
    for seed, (x, s) in enumerate([(0.30, 0.35), (0.40, 0.47), (0.20, 0.24)]):  # soft - xid: 5, 7, 4 points
        rows = {m: dict.fromkeys(demo_report.COLUMNS, v) for m, v in (("xid", x), ("soft", s))}
        saved = {"key": key | {"transfer": "t"}, "seed": seed, "faulty": 0.25, "rows": rows}
        (folder / f"seed{seed}_faulty25.json").write_text(json.dumps(saved))
    other = {"key": key | {"epochs": 8}, "seed": 9, "faulty": 0.25, "rows": rows}  # another regime
    (folder / "seed9_faulty25.json").write_text(json.dumps(other))
    spread = demo_report.paired_spread({0.25: key | {"train_args": ["--lam", "0.3"]}}, root=tmp_path)
    assert sorted(round(100 * d) for d in spread[0][(0.25, "soft", "R@1")]) == [4, 5, 7]
    assert spread[1] == ["lab/results/claims/rerun/settings"]
    args = DemoArgs(faulty=[0.25], methods=["xid", "soft"], compare="r", train_args=["--lam", "0.3"])
    mine = [{0.25: {"xid": dict.fromkeys(demo_report.COLUMNS, 0.30), "soft": dict.fromkeys(demo_report.COLUMNS, 0.27)}}]
    text = demo_report.compare(mine, {"results": [{"0.25": mine[0][0.25]}]}, args, spread)
    # mean 5.3, SD 1.5, t(0.975, 2) = 4.303: 5.3 ± 4.303 x 1.53 x sqrt(1 + 1/3) = -2.3 ... +12.9
    assert "| Soft-xID | -3.0, OUTSIDE -2.3 … +12.9 (3 seeds) |" in text
    assert "they ran without this run's --lam 0.3" in text and "in lab/results/claims/rerun/settings" in text


def test_the_footer_reads_todays_evidence_at_the_demos_regime_never_a_superseded_folder():
    """The committed settings at make demo's regime (the key of R0's 8-seed check, which is the demo's: its
    warm-up, branch length, trials and clips are DemoArgs' defaults) give the footer its ranges from the 8-seed
    check and the claims rerun only, each row from at least 8 seeds; the first claims run and the branch-length
    screen, which ran older code, never enter."""
    import json

    check = sorted((demo_report.ROOT / "lab/results/spread/check_r0/demo_settings").glob("seed*_faulty25.json"))
    key = json.loads(check[0].read_text())["key"]
    demo = DemoArgs()
    assert (key["warmup_epochs"], key["epochs"], key["trials"], key["eval_clips"]) == (
        demo.warmup_epochs,
        demo.epochs,
        demo.trials,
        demo.eval_clips,
    )
    measured, sources = demo_report.paired_spread({0.25: key})
    assert sources == ["lab/results/claims/rerun/settings", "lab/results/spread/check_r0/demo_settings"]
    # the first claims run and the branch-length screen ran older code: never read, though they hold this key
    assert not {"lab/results/claims/settings", "lab/results/demo_screen"} & set(demo_report.SPREAD_FROM)
    for method in ("weighted", "soft", "robust", "oracle"):
        for column in demo_report.DIFF_COLUMNS:
            assert len(measured[(0.25, method, column)]) >= 8, (method, column)
