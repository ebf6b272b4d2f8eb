"""The claims' judge (experiments/claims_report.py) follows its plan: Holm's step-down over the two
primary endpoints, a verdict only with every planned seed, and the direction of a rejected test."""
import pytest

from experiments import claims_report as cr


def test_holm_adjusts_the_smaller_p_by_two_and_keeps_the_order():
    assert cr.holm([0.02, 0.04]) == [0.04, 0.04]
    assert cr.holm([0.03, 0.01]) == [0.03, 0.02]
    assert cr.holm([0.3, 0.001]) == [0.3, 0.002]


def settings(gain_1shot, gain_5shot, seeds=5):
    """xID and Weighted at 50% on `seeds` seeds, Weighted ahead by the given per-seed gains."""
    res = {0.5: {}}
    for s in range(seeds):
        base = {"R@1": 0.5, "R@5": 0.8, "1-shot": 0.3 + 0.05 * s, "5-shot": 0.5 + 0.03 * s}
        res[0.5][s] = {"xid": base, "weighted": {**base, "1-shot": base["1-shot"] + gain_1shot[s],
                                                 "5-shot": base["5-shot"] + gain_5shot[s]}}
    return res


def test_a_claim_holds_is_contradicted_or_is_not_shown_as_its_tests_say():
    claim = next(c for c in cr.CLAIMS if c.name == "F3a")
    steady = [0.05, 0.06, 0.04, 0.05, 0.055]
    noise = [0.03, -0.02, 0.01, -0.04, 0.02]
    assert cr.judge(claim, settings(steady, noise))["verdict"] == "holds (1-shot)"
    assert cr.judge(claim, settings([-g for g in steady], noise))["verdict"] == "contradicted (1-shot)"
    assert cr.judge(claim, settings(noise, noise))["verdict"] == "not shown"
    assert cr.judge(claim, settings(steady, steady, seeds=4))["verdict"] == "incomplete (4 of 5 seeds)"


def test_oracle_at_zero_is_xid_and_gain_growth_is_paired_by_seed(tmp_path):
    import json
    folder = tmp_path / "settings"
    folder.mkdir()
    for level, gain in ((0.0, 0.01), (0.5, 0.04)):
        for seed in range(2):
            row = {"R@1": 0.5, "R@5": 0.8, "1-shot": 0.3 + seed / 10, "5-shot": 0.5}
            rows = {"xid": row, "weighted": {**row, "1-shot": row["1-shot"] + gain}}
            (folder / f"seed{seed}_faulty{round(100 * level)}.json").write_text(json.dumps(
                {"key": {}, "seed": seed, "faulty": level, "delta": 0.0, "rows": rows}))
    res = cr.load(tmp_path)
    assert res[0.0][1]["oracle"] == res[0.0][1]["xid"] and "oracle" not in res[0.5][1]
    grow = cr.gain_growth("weighted", "xid", 0.0, 0.5)
    assert abs(grow(res, 1, "1-shot") - 0.03) < 1e-9 and grow(res, 2, "1-shot") is None


def test_a_packed_checkpoint_gives_the_encoder_load_pretrained_gives(tmp_path):
    """The fine-tune column carries slim checkpoints to a GPU (experiments/claims_finetune.py): the
    encoder rebuilt from one must equal, weight for weight and buffer for buffer, the full one's."""
    from dataclasses import asdict
    import torch
    from config import Config
    from experiments import claims_finetune
    from memory_bank import MemoryBank
    from model import AVModel
    from persistence import checkpoint
    model = AVModel(video_depth=9, width=0.125)
    for buf in model.buffers():  # BN statistics unlike a fresh model's, so a lost buffer shows
        buf.add_(torch.rand_like(buf.float()).to(buf.dtype))
    ckpt = tmp_path / "runs" / "seed1_faulty50" / "weighted" / "ckpt.pt"
    ckpt.parent.mkdir(parents=True)
    torch.save({"model": model.state_dict(), "bank": MemoryBank(20, seed=0).state_dict(), "instances": None,
                "config": asdict(Config(video_depth=9, width=0.125)), "epoch": 3,
                "model_args": {"video_depth": 9, "width": 0.125}, "format": checkpoint.CHECKPOINT_FORMAT}, ckpt)
    claims_finetune.pack(tmp_path / "runs", tmp_path / "ft.tar.xz", seeds=(1,), methods=("weighted",))
    (slim,) = claims_finetune.unpack(tmp_path / "ft.tar.xz", tmp_path / "work")
    assert slim.stem == claims_finetune.setting_name(1, "weighted")
    cfg, encoder, meta = claims_finetune.encoder_of(slim)
    full = checkpoint.load_pretrained(ckpt)[1].video.state_dict()
    assert encoder.state_dict().keys() == full.keys()
    assert all(torch.equal(encoder.state_dict()[k], full[k]) for k in full)
    assert (cfg.width, meta["seed"], meta["method"]) == (0.125, 1, "weighted")


def test_the_documents_change_only_after_their_marker(tmp_path):
    from experiments import claims_docs
    doc = tmp_path / "CLAIMS.md"
    doc.write_text("# hand\nkept\n<!-- VERDICT -->\nold table\n## Next\nalso kept\n")
    claims_docs.replace_after(doc, "<!-- VERDICT -->", "new table\n\n", until="## ")
    assert doc.read_text() == "# hand\nkept\n<!-- VERDICT -->\nnew table\n\n## Next\nalso kept\n"
    doc.write_text("no marker here\n")
    with pytest.raises(ValueError, match="no <!-- VERDICT --> marker"):
        claims_docs.replace_after(doc, "<!-- VERDICT -->", "x")
