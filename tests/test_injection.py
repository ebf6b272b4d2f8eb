"""Faulty positives are injected as the paper does (Sec. 5.2): "a randomly selected audio that is
not part of the training set". What goes wrong when they are not: the donor effect."""

import pytest
import torch
import torch.nn.functional as F

import data
from config import parse_config
from losses import xid_loss
from memory_bank import MemoryBank
from tools import synthetic


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    synthetic.generate(
        out, classes=2, train_per_class=10, test_per_class=3, pool=2, faulty=0.1, size=32, seconds=(2.2, 2.6), workers=1
    )
    return out


def config(data, *args):
    return parse_config(
        ["--preset", "demo", "--data", str(data), "--preload", "off", "--num-negatives", "15", *map(str, args)]
    )


def test_no_injected_audio_comes_from_a_training_or_test_file(small):
    splits = {str(small / rel) for name in ("train", "test") for rel in (small / f"{name}.txt").read_text().split()}
    for fraction in (0.25, 0.5, 0.95):  # shares are below 1 (config.py)
        ds = data.build_train_set(config(small, "--faulty-fraction", fraction))  # the default: heldout
        used = [path for path, _ in ds.donor.values()]
        assert len(used) == round(fraction * 20) and len(set(used)) == len(used)  # never a sound twice
        assert all("/_heldout/" in p for p in used) and not set(used) & splits
        saved = ds.instances()["replacement_audio"]  # the checkpoint says which file each got
        assert [bool(p) for p in saved] == ds.injected.tolist() and not set(saved) & splits


def test_a_pool_that_holds_files_of_either_split_is_refused(small, tmp_path):
    with pytest.raises(SystemExit, match="training or test videos"):  # the whole dataset as the pool
        data.build_train_set(
            config(small, "--faulty-fraction", 0.5, "--faulty-pool", small / "class00_disk_horizontal")
        )
    with pytest.raises(SystemExit, match=r"does not exist\. Pass --faulty-pool DIR"):
        data.build_train_set(config(small, "--faulty-fraction", 0.5, "--faulty-pool", tmp_path / "missing"))
    with pytest.raises(SystemExit, match=r"holds 2 audio files.*injects 10 of 20"):  # the noise pool is small
        data.build_train_set(config(small, "--faulty-fraction", 0.5, "--faulty-source", "noise"))
    lent = data.build_train_set(config(small, "--faulty-fraction", 0.5, "--faulty-source", "train"))
    assert {p for p, _ in lent.donor.values()} <= {r.path for r in lent.records}  # the named deviation


def toy_bank_scores(source, seed, n=256, dim=8, steps=400):
    """xID (eq. (1)) with this repo's memory bank on a toy: each picture x_i (dim numbers) has a
    sound that depends on it, sound_i = x_i M + noise, and two small MLPs embed pictures and sounds.
    Half the instances hear another sound: another instance's (source='train', that instance is
    the donor) or a new one (source='heldout'; the same instances are marked as would-be donors).
    Returns the bank scores vbar_i . abar_i and the masks (injected, donors, other clean ones)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g)  # (N, dim) pictures
    mix = torch.randn(dim, dim, generator=g)
    sound = x @ mix + 0.3 * torch.randn(n, dim, generator=g)  # (N, dim) each picture's own sound
    injected = torch.randperm(n, generator=g)[: n // 2]  # (N/2,)
    j = torch.randint(0, n - 1, (len(injected),), generator=g)
    j = j + (j >= injected).long()  # (N/2,) a donor for each, never itself
    heard = sound.clone()  # (N, dim)
    if source == "train":
        heard[injected] = sound[j]
    else:
        heard[injected] = torch.randn(len(injected), dim, generator=g) @ mix + 0.3 * torch.randn(
            len(injected), dim, generator=g
        )
    torch.manual_seed(seed)
    f_v, f_a = (torch.nn.Sequential(torch.nn.Linear(dim, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16)) for _ in "va")
    opt = torch.optim.Adam([*f_v.parameters(), *f_a.parameters()], lr=3e-3)
    bank = MemoryBank(n, dim=16, seed=seed)
    for _ in range(steps):
        idx = torch.randint(0, n, (64,))  # (B,)
        v, a = F.normalize(f_v(x[idx]), dim=1), F.normalize(f_a(heard[idx]), dim=1)  # (B, 16) each
        vbar, abar = bank.targets(bank.sample(idx, 32))  # (B, 33, 16) each
        loss = xid_loss(v, a, vbar, abar, 0.07).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        bank.update(idx, v, a)
    is_injected = torch.zeros(n, dtype=torch.bool)
    is_injected[injected] = True
    donor = torch.zeros(n, dtype=torch.bool)
    donor[j] = True
    return bank.scores(), is_injected, donor & ~is_injected, ~donor & ~is_injected


def test_lending_a_training_videos_audio_makes_the_lender_score_like_a_faulty_positive():
    """The donor effect of the 'train' deviation at toy size: the lender's sound sits in a second
    bank slot, as a negative of its own video, so xID lowers its score. With held-out sounds the
    same instances score like any clean one."""
    gap = {}
    for source in ("train", "heldout"):
        gap[source] = []
        for seed in range(3):
            scores, injected, donors, others = toy_bank_scores(source, seed)
            assert scores[injected].mean() < scores[others].mean() - 0.03  # the faults are found either way
            gap[source].append(float(scores[donors].mean() - scores[others].mean()))
    assert max(gap["train"]) < 0, gap  # every seed: lenders below the other clean instances
    assert sum(gap["train"]) / 3 < sum(gap["heldout"]) / 3 - 0.02, gap
