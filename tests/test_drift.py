"""tools/bank_report.py: the label-free signals (agreement, the soft targets' positive mass) and the warning rule
train.py prints when a soft-target stage (Soft- or Robust-xID, eqs. (7)-(14)) loses the bank's
cross-modal agreement (lab/results/ccp_drift/).

    python -m pytest tests/test_drift.py
"""

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from config import parse_config
from memory_bank import MemoryBank
from tools.bank_report import MARGIN, PATIENCE, BankReport, agreement, bank_signals, drift_warning, positive_mass


def paired(n=200, d=16, noise=0.3, seed=0):
    """Video memories and audio memories near their own pair: `noise` 0 agrees fully, large noise not at all."""
    g = torch.Generator().manual_seed(seed)
    video = F.normalize(torch.randn(n, d, generator=g), dim=1)
    audio = F.normalize(video + noise * torch.randn(n, d, generator=g), dim=1)
    return video, audio


def test_agreement_is_one_for_matching_pairs_chance_for_unrelated_ones_and_falls_with_noise():
    video, audio = paired(noise=0.0)
    assert agreement(video, audio) == pytest.approx(1.0)
    video, audio = paired(noise=100.0)  # audio memories unrelated to their video: a rank among others at random
    assert agreement(video, audio) == pytest.approx(0.5, abs=0.05)
    values = [agreement(*paired(noise=s)) for s in (0.3, 1.0, 3.0)]
    assert values[0] > values[1] > values[2]


def test_agreement_reads_the_audio_memory_against_every_video_memory_and_subsamples_a_large_bank():
    video, audio = paired(n=5, noise=0.0)
    audio[0] = video[1]  # slot 0's audio memory is slot 1's video: slot 1 now ranks above slot 0's own
    own_rank = (audio[0] @ video.T < audio[0] @ video[0]).sum().item() / 4  # at most 3 of its 4 others below
    assert own_rank <= 0.75
    expected = (own_rank + 4 * 1.0) / 5  # the other four still pick their own
    assert agreement(video, audio) == pytest.approx(expected)
    big_v, big_a = paired(n=300, noise=0.5)
    assert agreement(big_v, big_a, max_items=100) == pytest.approx(agreement(big_v, big_a), abs=0.05)
    assert agreement(big_v, big_a, max_items=100) == agreement(big_v, big_a, max_items=100)  # a fixed subset


def test_positive_mass_is_the_ccp_share_on_the_positive_and_falls_as_the_pairs_come_apart():
    tight = positive_mass(*paired(noise=0.1), "ccp", num_negatives=64, tau_s=0.02, tau_t=0.07)
    loose = positive_mass(*paired(noise=2.0), "ccp", num_negatives=64, tau_s=0.02, tau_t=0.07)
    assert 0 < loose < tight <= 1
    assert tight > 0.9  # a bank that knows its pairs: S(i|i) takes nearly everything
    assert positive_mass(*paired(), "oracle", 64, 0.02, 0.07) is None  # its S needs labels


def test_bank_signals_read_the_bank_with_the_runs_soft_targets():
    cfg = parse_config(["--preset", "demo", "--num-negatives", "32"])
    bank = MemoryBank(60, dim=8, seed=0)
    video, audio = paired(n=60, d=8, noise=0.2)
    bank.video.copy_(video), bank.audio.copy_(audio)
    rng = torch.get_rng_state()
    out = bank_signals(bank, cfg)
    assert torch.equal(torch.get_rng_state(), rng)  # its draws leave training's random stream as it was
    assert out["agreement"] == pytest.approx(agreement(video, audio))
    assert out["positive_mass"] == pytest.approx(
        positive_mass(video, audio, cfg.soft_targets, 32, cfg.tau_s, cfg.tau_t)
    )


def records(values, stage="soft", warmup=(0.80,), **first):
    """A log: xID warm-up epochs with the given agreement, then a soft-target stage's epochs."""
    log = [{"epoch": k, "stage": "xid", "agreement": x} for k, x in enumerate(warmup)]
    log += [{"epoch": len(warmup) + k, "stage": stage, "agreement": x} for k, x in enumerate(values)]
    if first:
        log[len(warmup)].update(first)
    return log


@pytest.mark.parametrize("stage", ["soft", "robust"])
def test_the_warning_fires_on_a_falling_series_once_it_stayed_below_for_two_epochs(stage):
    falling = [0.80, 0.79, 0.77, 0.75, 0.72]  # start 0.80; below 0.78 from the third soft epoch on
    fired = [drift_warning(records(falling[:k], stage)) for k in range(1, len(falling) + 1)]
    assert fired[:3] == [None, None, None]  # 0.77 alone is one epoch below
    assert fired[3] and fired[4]
    assert "0.770 (epoch 3), 0.750 (epoch 4)" in fired[3] and "0.800" in fired[3]
    assert len(fired[3].splitlines()) == 1 and fired[3].startswith("train.py: warning:")
    assert (MARGIN, PATIENCE) == (0.02, 2)


def test_the_warning_stays_quiet_on_flat_rising_or_barely_lower_series_and_outside_soft_stages():
    assert drift_warning(records([0.80] * 6)) is None
    assert drift_warning(records([0.81, 0.83, 0.84, 0.86])) is None
    assert drift_warning(records([0.79, 0.785, 0.79, 0.781])) is None  # within the margin
    assert drift_warning(records([0.77, 0.79, 0.77, 0.79])) is None  # below once at a time, never twice running
    for stage in ("xid", "weighted", "oracle"):  # no soft targets, nothing to warn about
        assert drift_warning(records([0.70, 0.60, 0.50], stage)) is None
    old_log = [{"epoch": k, "stage": "soft"} for k in range(5)]  # logs from before the signal
    assert drift_warning(old_log) is None


def test_the_start_is_the_warmups_last_epoch_or_the_given_banks_or_else_the_first_soft_epoch():
    # the last xID epoch, not an earlier one
    assert drift_warning(records([0.74, 0.74], warmup=(0.60, 0.75))) is None
    assert drift_warning(records([0.74, 0.74], warmup=(0.75, 0.80))) is not None
    # an --init branch: the bank it was given, kept in its first record
    branch = records([0.74, 0.72], warmup=(), drift_start={"agreement": 0.80})
    assert "below 0.800" in drift_warning(branch)
    assert drift_warning(records([0.80, 0.79], warmup=(), drift_start={"agreement": 0.80})) is None
    # a branch resumed inside its first epoch: its first epoch is the start, and is not watched itself
    assert drift_warning(records([0.80, 0.77], warmup=())) is None
    assert drift_warning(records([0.80, 0.77, 0.76], warmup=())) is not None


def test_the_report_measures_a_fresh_branchs_bank_before_training_and_warns_once_naming_the_run(capsys):
    cfg = parse_config(["--preset", "demo", "--num-negatives", "16", "--warmup-epochs", "0", "--loss", "soft"])
    cfg.out = "runs/s1/soft"
    bank = MemoryBank(40, dim=8, seed=0)
    video, audio = paired(n=40, d=8, noise=0.1)
    bank.video.copy_(video), bank.audio.copy_(audio)
    dataset = SimpleNamespace(labels=torch.arange(40) % 4, faulty=torch.arange(40) < 4)
    report = BankReport(cfg)
    report(None, bank, dataset, [])
    start = report.start["agreement"]
    bank.audio.copy_(paired(n=40, d=8, seed=1)[1])  # the branch's first epoch scrambles the pairs
    log = []
    for epoch in (0, 1, 2):
        report(record := {"epoch": epoch, "stage": "soft", "loss": 1.0}, bank, dataset, log)
        log.append(record)
    assert log[0]["drift_start"]["agreement"] == start > log[0]["agreement"] + 0.2
    assert "drift_start" not in log[1] and {"knn_class", "score_hist", "soft_share"} <= set(log[1])
    err = capsys.readouterr().err  # from epoch 1 on it holds: said once, naming which of the side-by-side runs
    assert err.startswith("train.py: warning: runs/s1/soft (soft):") and err.count("warning") == 1
    resumed = BankReport(cfg)  # resumed, or with a warm-up in the same run: nothing to measure up front
    resumed(None, bank, dataset, log)
    with_warmup = BankReport(parse_config(["--preset", "demo", "--warmup-epochs", "2", "--loss", "soft"]))
    with_warmup(None, bank, dataset, [])
    assert resumed.start is None and with_warmup.start is None
