"""tools/bank_report.py's ground-truth measures on banks with planted structure: each finds what was planted."""

import torch
import torch.nn.functional as F

from memory_bank import scores_auroc as faulty_auroc
from tools.bank_report import bank_report, bank_structure, soft_target_share


def clustered(n=60, classes=3, d=16, spread=0.2, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % classes
    centres = F.normalize(torch.randn(classes, d, generator=g), dim=1)
    video = F.normalize(centres[labels] + spread * torch.randn(n, d, generator=g), dim=1)  # (N, D)
    return video, labels, g


def test_class_clusters_and_matching_audio_score_one_and_random_memories_score_chance():
    video, labels, g = clustered()
    faulty = torch.zeros(60, dtype=torch.bool)
    planted = bank_structure(video, video.clone(), labels, faulty)
    assert planted["knn_class"] == 1.0 and planted["xmodal_class"] > 0.95 and planted["own_audio"] == 1.0
    assert planted["own_audio_faulty"] is None  # no faulty positives here
    noise = F.normalize(torch.randn(60, 16, generator=g), dim=1)
    random = bank_structure(noise, F.normalize(torch.randn(60, 16, generator=g), dim=1), labels, faulty)
    assert random["knn_class"] < 0.6 and random["xmodal_class"] < 0.6 and random["own_audio"] < 0.2


def test_class_level_audio_without_the_instance_shows_in_xmodal_not_in_own_audio():
    video, labels, _ = clustered()
    audio = video.roll(3, 0)  # every audio memory moved to another instance of the same class (3 classes)
    res = bank_structure(video, audio, labels, torch.zeros(60, dtype=torch.bool))
    assert res["xmodal_class"] > 0.9 and res["own_audio"] < 0.1


def test_own_audio_counts_clean_instances_only_and_a_large_bank_is_subsampled():
    video, labels, _ = clustered(n=90)
    audio = video.clone()
    faulty = torch.arange(90) % 2 == 1
    audio[faulty] = -audio[faulty]  # faulty positives: their audio says nothing of the picture
    res = bank_structure(video, audio, labels, faulty)
    assert res["own_audio"] == 1.0 and res["own_audio_faulty"] == 0.0  # the faulty pairs were not memorised
    assert bank_structure(video, audio, labels, faulty, max_items=30)["knn_class"] >= 0.9
    scores = (video * audio).sum(1)
    assert faulty_auroc(scores, faulty) == 1.0 and faulty_auroc(scores, torch.zeros(90, dtype=torch.bool)) is None


def test_bank_report_reads_the_bank():
    from memory_bank import MemoryBank

    video, labels, _ = clustered(n=30)
    bank = MemoryBank(30, dim=16)
    bank.video.copy_(video), bank.audio.copy_(video)
    faulty = torch.arange(30) % 3 == 0
    bank.audio[faulty] = -bank.audio[faulty]
    report = bank_report(bank, labels, faulty)
    assert report["faulty_auroc"] == 1.0 and report["own_audio"] == 1.0 and report["own_audio_faulty"] == 0.0


def test_ccp_puts_its_mass_on_the_class_of_clustered_memories_and_leaves_trainings_random_stream_alone():
    """Oracle targets give all of S(j|i) to the anchor's class; CCP does on class clusters whose audio
    matches, and gives about chance on random memories. Logging it draws nothing from torch's stream."""
    video, labels, g = clustered(n=90, spread=0.1)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    planted = soft_target_share(video, video.clone(), labels, num_negatives=32)
    assert torch.equal(torch.get_rng_state(), before)
    assert abs(planted["oracle"] - 1) < 1e-6 and abs(planted["chance"] - 1 / 3) < 0.05
    assert planted["ccp"] > 0.9
    noise_v = F.normalize(torch.randn(90, 16, generator=g), dim=1)
    noise_a = F.normalize(torch.randn(90, 16, generator=g), dim=1)
    random = soft_target_share(noise_v, noise_a, labels, num_negatives=32)
    assert abs(random["ccp"] - random["chance"]) < 0.15
