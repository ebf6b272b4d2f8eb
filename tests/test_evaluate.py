"""evaluate.py, finetune.py and tools/analyse.py on hand-made inputs with known answers: the paper's protocols,
and no leaks."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import data
import evaluate
import finetune
from config import Config, parse_config
from media import manifest
from memory_bank import MemoryBank
from model import VideoEncoder
from tools import analyse, scan, synthetic

CPU = torch.device("cpu")


def test_recall_at_k_is_exact_on_hand_made_features():
    gallery = torch.eye(4)  # four gallery videos along the axes
    gallery_labels = torch.tensor([0, 1, 2, 2])
    query = torch.tensor(
        [
            [1.0, 0.1, 0, 0],  # nearest: g0 (label 0), then g1
            [0.1, 1.0, 0.5, 0],  # nearest: g1 (label 1) ... but its label is 2
            [0, 0, 0.2, 1.0],
        ]
    )  # nearest: g3 (label 2)
    query_labels = torch.tensor([0, 2, 2])
    recall, nearest = evaluate.recall_at_k(query, query_labels, gallery, gallery_labels, CPU, ks=(1, 2, 3))
    assert recall == {1: pytest.approx(2 / 3), 2: pytest.approx(1.0), 3: pytest.approx(1.0)}
    assert nearest[:, 0].tolist() == [0, 1, 3]
    recall, _ = evaluate.recall_at_k(query, torch.tensor([3, 3, 3]), gallery, gallery_labels, CPU, ks=(1, 20))
    assert recall == {1: 0.0, 20: 0.0}  # k larger than the gallery is fine


def test_retrieval_ranks_by_euclidean_distance_not_cosine():
    """Fig. 11: Euclidean distance. Here the two disagree: g0 points the query's way but is far."""
    gallery = torch.tensor([[10.0, 0.0], [1.0, 0.5]])
    query = torch.tensor([[1.0, 0.0]])
    _, nearest = evaluate.recall_at_k(query, torch.tensor([1]), gallery, torch.tensor([0, 1]), CPU, ks=(1,))
    assert nearest[0, 0] == 1  # cosine would pick g0 (cos 1.0 against 0.89)


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


def test_few_shot_uses_raw_features_unless_asked():
    """The paper's SVM sees the raw features. One dimension carries the class at a tiny scale and
    another is large noise: C=1 on raw features cannot use the tiny one; standardising can."""
    g = torch.Generator().manual_seed(1)

    def make(n):
        y = torch.arange(2).repeat_interleave(n)
        x = torch.stack(
            [
                1e-3 * (2 * y - 1).float() + 1e-5 * torch.randn(len(y), generator=g),
                100 * torch.randn(len(y), generator=g),
            ],
            1,
        )
        return x, y

    (xtr, ytr), (xte, yte) = make(20), make(50)
    raw = evaluate.few_shot(xtr, ytr, xte, yte, shots=(5,), trials=5)[5][0]
    scaled = evaluate.few_shot(xtr, ytr, xte, yte, shots=(5,), trials=5, standardise=True)[5][0]
    assert raw < 0.8 and scaled > 0.95


def test_finetune_step_moves_the_head_and_the_backbone_at_a_tenth_of_the_rate():
    clf = finetune.Classifier(VideoEncoder(9, width=0.125), num_classes=3)
    opt = finetune.finetune_optimizer(clf, 1e-2, backbone_lr_scale=0.1, weight_decay=1e-3)
    before = {k: v.clone() for k, v in clf.state_dict().items()}
    loss, correct = finetune.finetune_step(clf, opt, torch.randn(4, 3, 4, 32, 32), torch.tensor([0, 1, 2, 0]))
    assert loss > 0 and 0 <= correct <= 4
    after = clf.state_dict()
    enc_changed = [k for k in before if k.startswith("encoder.") and not torch.equal(before[k], after[k])]
    assert not torch.equal(before["fc.weight"], after["fc.weight"])
    assert any(k.endswith("conv1.0.0.weight") for k in enc_changed)
    assert opt.param_groups[1]["lr"] == pytest.approx(1e-3)  # backbone lr x0.1


def test_weight_analysis_finds_planted_low_scores():
    bank = MemoryBank(200, dim=16, seed=0)
    faulty = torch.zeros(200, dtype=torch.bool)
    faulty[::10] = True
    bank.audio.copy_(bank.video)  # clean pairs: perfect correspondence
    other = torch.randn(20, 16, generator=torch.Generator().manual_seed(7))
    bank.audio[faulty] = F.normalize(other, dim=1)  # planted: unrelated audio memory
    cfg = Config(delta=-1.0)
    res, scores, w, _ = analyse.weight_analysis(bank, faulty, cfg)
    assert res["faulty_auroc"] == pytest.approx(1.0) and res["faulty_precision_at_k"] == 1.0
    assert res["mean_weight_faulty"] < 0.3 < 0.95 < res["mean_weight_clean"]


def test_soft_target_analysis_sees_same_class_mass():
    labels = torch.arange(4).repeat_interleave(50)  # 4 classes x 50
    protos = F.normalize(torch.randn(4, 16), dim=1)
    bank = MemoryBank(200, dim=16)
    bank.video.copy_(F.normalize(protos[labels] + 0.1 * torch.randn(200, 16), dim=1))
    bank.audio.copy_(F.normalize(protos[labels] + 0.1 * torch.randn(200, 16), dim=1))
    res = analyse.soft_target_analysis(bank, labels, Config(), num_negatives=64)
    assert res["chance"] == pytest.approx(49 / 199, abs=0.05)
    assert res["ccp"] > 0.9 and res["oracle"] == pytest.approx(1.0)


def _two_colour_folder(root, n_train=4, n_test=3, lists=True):
    """Class 'dark' shows dark frames, class 'bright' bright ones (with noise): a classifier on any
    encoder can learn it, so a fine-tune that works must reach 100%."""
    rng = np.random.default_rng(0)
    rels = {"train": [], "test": []}
    for c, level in (("dark", 30), ("bright", 220)):
        (root / c).mkdir(parents=True)
        for split, n in (("train", n_train), ("test", n_test)):
            for k in range(n):
                frames = np.clip(level + rng.normal(0, 20, (40, 32, 32, 3)), 0, 255).astype(np.uint8)
                synthetic.write_mp4(root / c / f"{split}{k}.mp4", frames, None, 16, 22050)
                rels[split].append(f"{c}/{split}{k}.mp4")
    if lists:
        for split, paths in rels.items():
            (root / f"{split}.txt").write_text("\n".join(paths) + "\n")
    scan.make_manifest(root, need_audio=False, jobs=1)  # what training and evaluation read: the scan's
    return root


def test_finetune_trains_on_the_whole_train_split_and_reports_the_final_epoch(tmp_path):
    root = _two_colour_folder(tmp_path / "ds")
    cfg = parse_config(["--preset", "demo", "--data", str(root), "--size", "32", "--frames", "4", "--preload", "off"])
    enc, both = VideoEncoder(9, width=0.125), evaluate.resolve(cfg)
    before = {k: v.clone() for k, v in enc.state_dict().items()}
    res = finetune.finetune(enc, cfg, both, epochs=30, lr=1e-2, lr_min=1e-3, batch_size=8, accumulate=2, workers=0)
    assert set(res) == {"test_acc", "steps"}  # no validation part held out by default
    assert res["steps"] == 30 * (8 // 8)  # every one of the 8 train videos in every epoch
    assert res["test_acc"] == 1.0  # 6 test videos, dark vs bright
    assert all(torch.equal(before[k], v) for k, v in enc.state_dict().items())  # the caller's encoder is untouched
    sel = finetune.finetune(enc, cfg, both, epochs=1, batch_size=4, select_on_val=True, val_fraction=0.25, workers=0)
    assert set(sel) == {"val_acc", "test_acc", "steps"} and sel["steps"] == 1 * (6 // 4)  # 2 held out
    curve = finetune.finetune(enc, cfg, both, epochs=3, lr=1e-2, lr_min=1e-3, batch_size=8, workers=0, curve_every=2)
    assert set(curve["curve"]) == {2, 3} and curve["curve"][3] == curve["test_acc"]  # every 2nd epoch and the last


def test_finetune_accumulation_gives_the_gradient_of_the_whole_batch():
    torch.manual_seed(0)
    clf = finetune.Classifier(VideoEncoder(9, width=0.125), 3, dropout=0.0)
    x, y = torch.randn(4, 3, 4, 32, 32), torch.tensor([0, 1, 2, 0])
    clf.eval()  # BatchNorm in eval mode: then micro-batches change nothing
    grads = []
    for acc in (1, 2):
        clf.zero_grad()
        for v, t in zip(x.chunk(acc), y.chunk(acc)):
            (F.cross_entropy(clf(v), t) * len(t) / len(y)).backward()
        grads.append(clf.fc.weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1])


def test_a_folder_without_split_lists_is_refused_naming_the_scan_whose_split_is_stratified_and_leak_free(tmp_path):
    root = _two_colour_folder(tmp_path / "ds", n_train=5, n_test=0, lists=False)
    with pytest.raises(FileNotFoundError, match=f"python -m tools.scan {root} --split writes"):
        manifest.list_split("folder", root, "train")
    scan.main([str(root), "--split"])
    items, classes = manifest.list_split("folder", root, "train")
    test_items, _ = manifest.list_split("folder", root, "test")
    assert (root / "train.txt").exists() and (root / "test.txt").exists()
    assert not {p for p, _ in items} & {p for p, _ in test_items}
    assert len(test_items) == 2 and {k for _, k in test_items} == {0, 1}  # round(0.2 * 5) = 1 per class
    assert (root / "test.txt").read_text() == scan.folder_split(tmp_path / "ds", items + test_items)["test"].read_text()
    # retrieval on the split: the queries are not in the gallery, so R@1 is not trivially 100%
    cfg = parse_config(["--preset", "demo", "--data", str(root), "--size", "32", "--frames", "4", "--preload", "off"])
    both = evaluate.resolve(cfg)  # refuses lists that share a file
    tr, te = data.eval_set(cfg, both.train.records), data.eval_set(cfg, both.test.records)
    enc = VideoEncoder(9, width=0.125)
    ftr = evaluate.extract_features(enc, tr, CPU, workers=0)
    fte = evaluate.extract_features(enc, te, CPU, workers=0)
    dist = torch.cdist(fte["fmap"], ftr["fmap"])
    assert dist.min() > 1e-3  # no query finds itself at distance 0
    # and lists that do share files are refused
    (root / "test.txt").write_text((root / "test.txt").read_text() + (root / "train.txt").read_text())
    with pytest.raises(ValueError, match="the test and train splits share 8 video file"):
        evaluate.resolve(cfg)


def test_a_checkpoint_of_another_format_or_with_unknown_settings_is_refused_naming_it(tmp_path):
    """No compatibility code for old formats: an older train.py's checkpoint is refused with a message
    that names the file and says what to do; so is one with a setting this version does not know."""
    from dataclasses import asdict

    import checkpoint
    from model import AVModel

    cfg = Config(video_depth=9, width=0.125)
    state = {
        "model": AVModel(video_depth=9, width=0.125).state_dict(),
        "bank": MemoryBank(20, seed=0).state_dict(),
        "config": asdict(cfg),
        "model_args": {"video_depth": 9, "width": 0.125},
        "instances": None,
        "epoch": 3,
    }
    torch.save({**state, "format": 2}, tmp_path / "old.pt")
    with pytest.raises(checkpoint.CheckpointError, match=f"{tmp_path / 'old.pt'} has format 2.*retrain it"):
        evaluate.read_pretrained(tmp_path / "old.pt")
    torch.save({**state, "format": checkpoint.CHECKPOINT_FORMAT}, tmp_path / "ok.pt")
    assert evaluate.read_pretrained(tmp_path / "ok.pt").bank["video"].shape[0] == 20
    torch.save(
        {**state, "format": checkpoint.CHECKPOINT_FORMAT, "config": {**asdict(cfg), "retired_option": 1}},
        tmp_path / "bad.pt",
    )
    with pytest.raises(ValueError, match="unknown settings \\['retired_option'\\]"):
        evaluate.read_pretrained(tmp_path / "bad.pt")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_few_shot_trials_give_the_same_numbers_in_parallel_and_whatever_ran_before():
    """Each trial draws its own seeded sample and seeds liblinear's shuffle, so spreading trials over
    processes, or numpy's global stream, changes no figure. Nearly collinear features, as an untrained
    encoder gives, are where an unseeded liblinear differed (5-shot 26.7 vs 28.3 here)."""
    g = torch.Generator().manual_seed(0)
    base = torch.rand(1, 256, generator=g) * 5
    xtr, ytr = base + 0.05 * torch.randn(40, 256, generator=g), torch.arange(40) % 4
    xte, yte = base + 0.05 * torch.randn(20, 256, generator=g), torch.arange(20) % 4
    np.random.seed(1)
    one = evaluate.few_shot(xtr, ytr, xte, yte, shots=(1, 5), trials=6, jobs=1)
    np.random.seed(2)
    again = evaluate.few_shot(xtr, ytr, xte, yte, shots=(1, 5), trials=6, jobs=1)
    two = evaluate.few_shot(xtr, ytr, xte, yte, shots=(1, 5), trials=6, jobs=2)
    assert one == again == two
    assert one[5][1] > 0  # the trials differ from each other: each has its own draw


def test_the_bar_shows_on_a_terminal_only_and_a_fine_tunes_epoch_line_always(monkeypatch, capsys):
    """A fine-tune lasts hours: its epoch line reaches stdout under nohup or a batch scheduler too."""
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for stream, shown in ((Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr("sys.stderr", stream)
        finetune.say("fine-tune epoch 1/3: loss 2.3000, train accuracy 0.100")
        assert list(finetune.progress(range(3), "features")) == [0, 1, 2]
        assert "fine-tune epoch 1/3" in capsys.readouterr().out
        assert ("features" in stream.getvalue()) == shown
