"""evaluate.py on hand-made inputs with known answers."""
import pytest
import torch
import torch.nn.functional as F

import data
import evaluate
import train
from memory_bank import MemoryBank
from model import VideoEncoder


def test_recall_at_k_is_exact_on_hand_made_features():
    gallery = torch.eye(4)                      # four gallery videos along the axes
    gallery_labels = torch.tensor([0, 1, 2, 2])
    query = torch.tensor([[1.0, 0.1, 0, 0],     # nearest: g0 (label 0), then g1
                          [0.1, 1.0, 0.5, 0],   # nearest: g1 (label 1) ... but its label is 2
                          [0, 0, 0.2, 1.0]])    # nearest: g3 (label 2)
    query_labels = torch.tensor([0, 2, 2])
    recall, top1 = evaluate.recall_at_k(query, query_labels, gallery, gallery_labels, ks=(1, 2, 3),
                                        device=torch.device("cpu"))
    assert recall == {1: pytest.approx(2 / 3), 2: pytest.approx(1.0), 3: pytest.approx(1.0)}
    assert top1.tolist() == [True, False, True]
    recall, _ = evaluate.recall_at_k(query, torch.tensor([3, 3, 3]), gallery, gallery_labels, ks=(1, 20),
                                     device=torch.device("cpu"))
    assert recall == {1: 0.0, 20: 0.0}  # k larger than the gallery is fine


def test_few_shot_separable_features_are_perfect_and_random_labels_are_not():
    g = torch.Generator().manual_seed(0)
    centres = torch.randn(5, 32, generator=g) * 5
    def make(n):
        y = torch.arange(5).repeat_interleave(n)
        return centres[y] + torch.randn(len(y), 32, generator=g), y
    (xtr, ytr), (xte, yte) = make(20), make(10)
    res = evaluate.few_shot(xtr, ytr, xte, yte, shots=(1, 5), trials=5)
    assert res[1][0] == pytest.approx(1.0) and res[5] == (pytest.approx(1.0), pytest.approx(0.0))
    shuffled = yte[torch.randperm(len(yte), generator=g)]
    assert evaluate.few_shot(xtr, ytr, xte, shuffled, shots=(5,), trials=5)[5][0] < 0.5


@pytest.mark.parametrize("freeze", [True, False])
def test_finetune_step_moves_only_what_it_should(freeze):
    clf = evaluate.Classifier(VideoEncoder(9, width=0.125), num_classes=3)
    opt = evaluate.finetune_optimizer(clf, lr=1e-2, freeze_backbone=freeze)
    before = {k: v.clone() for k, v in clf.state_dict().items()}
    evaluate.finetune_step(clf, opt, torch.randn(4, 3, 4, 32, 32), torch.tensor([0, 1, 2, 0]), freeze)
    after = clf.state_dict()
    enc_changed = [k for k in before if k.startswith("encoder.") and not torch.equal(before[k], after[k])]
    assert not torch.equal(before["fc.weight"], after["fc.weight"])
    if freeze:  # weights and BatchNorm statistics of the backbone stay as they were
        assert enc_changed == []
        assert len(opt.param_groups) == 1
    else:
        assert any(k.endswith("conv1.0.0.weight") for k in enc_changed)
        assert opt.param_groups[1]["lr"] == pytest.approx(1e-3)  # backbone lr x0.1


def test_weight_analysis_finds_planted_low_scores():
    bank = MemoryBank(200, dim=16, seed=0)
    faulty = torch.zeros(200, dtype=torch.bool)
    faulty[::10] = True
    bank.audio.copy_(bank.video)  # clean pairs: perfect correspondence
    other = torch.randn(20, 16, generator=torch.Generator().manual_seed(7))
    bank.audio[faulty] = F.normalize(other, dim=1)  # planted: unrelated audio memory
    cfg = train.Config(delta=-1.0)
    res, scores, w = evaluate.weight_analysis(bank, faulty, cfg)
    assert res["faulty_auroc"] == pytest.approx(1.0) and res["faulty_precision_at_k"] == 1.0
    assert res["mean_weight_faulty"] < 0.3 < 0.95 < res["mean_weight_clean"]


def test_soft_target_analysis_sees_same_class_mass():
    labels = torch.arange(4).repeat_interleave(50)  # 4 classes x 50
    protos = F.normalize(torch.randn(4, 16), dim=1)
    bank = MemoryBank(200, dim=16)
    bank.video.copy_(F.normalize(protos[labels] + 0.1 * torch.randn(200, 16), dim=1))
    bank.audio.copy_(F.normalize(protos[labels] + 0.1 * torch.randn(200, 16), dim=1))
    res = evaluate.soft_target_analysis(bank, labels, train.Config(), num_negatives=64)
    assert res["chance"] == pytest.approx(49 / 199, abs=0.05)
    assert res["ccp"] > 0.9 and res["oracle"] == pytest.approx(1.0)


def test_finetune_end_to_end_on_tiny_videos(tmp_path):
    """The whole fine-tune protocol (train/val split, augmentations on the device, video-level
    accuracy) on 2 classes of generated videos: it runs and keeps val apart from test."""
    data.main(["synth", "--out", str(tmp_path), "--classes", "2", "--train-per-class", "5",
               "--test-per-class", "2", "--pool", "0", "--size", "32", "--seconds", "2.2", "2.2"])
    cfg = train.parse_config(["--preset", "demo", "--data", str(tmp_path), "--size", "32", "--frames", "4"])
    res = evaluate.finetune(VideoEncoder(9, width=0.125), cfg, epochs=1, batch_size=4, val_fraction=0.2, workers=0)
    assert set(res) == {"val_acc", "test_acc"}
    assert res["val_acc"] in (0.0, 0.5, 1.0) and res["test_acc"] in (0.0, 0.25, 0.5, 0.75, 1.0)  # 2 val, 4 test videos
