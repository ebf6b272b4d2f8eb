"""tools/ccp_mass.py: CCP's soft-target mass (eqs. (13)-(14)) split by candidate (the instance itself,
its source's other clips, its class's other sources, other classes) on constructed banks whose answer
is known, and the command over a checkpoint."""

import json
import math
from dataclasses import asdict

import pytest
import torch

from checkpoint import save_checkpoint
from config import Config
from memory_bank import MemoryBank
from tools import ccp_mass
from tools.bank_report import draw_candidates, soft_targets_at

CLASSES, SOURCES, CLIPS = 3, 5, 4  # 3 classes x 5 sources x 4 clips = 60 slots
N = CLASSES * SOURCES * CLIPS
LABELS = torch.arange(N) // (SOURCES * CLIPS)  # (N,)
SOURCE_IDS = torch.arange(N) // CLIPS  # (N,)


def one_hot(ids):
    return torch.nn.functional.one_hot(ids).float()  # (N, ids.max() + 1): unit-norm memories


def test_each_candidate_gets_the_mass_eq_13_gives_it_in_its_group():
    """Memories of class c and source s are (e_c + e_s) / sqrt(2): a sibling's dot product is 1, a
    class-mate's from another source 1/2, another class's 0; every self-correspondence is 1, so eq. (13)
    leaves S(j|i) proportional to exp(dot / tau_s)."""
    memory = torch.cat([one_hot(LABELS), one_hot(SOURCE_IDS)], 1) / math.sqrt(2)  # (N, 3 + 15)
    cand = torch.tensor([[0, 1, 2, 4, 20, 40], [21, 20, 40, 59, 22, 25]])  # (2, 6): anchors 0 and 21
    S_v, S_a = soft_targets_at(memory, memory, cand, "ccp", tau_s=1.0, tau_t=0.07)
    group = ccp_mass.candidate_groups(cand, LABELS, SOURCE_IDS)
    assert group.tolist() == [[0, 1, 1, 2, 3, 3], [0, 1, 3, 3, 1, 2]]
    e, h = math.e, math.exp(0.5)
    expected = torch.tensor([[e, 2 * e, h, 2], [e, 2 * e, h, 2]]) / (3 * e + h + 2)  # itself, source, class, other
    torch.testing.assert_close(ccp_mass.split_mass(S_v, group), expected)
    torch.testing.assert_close(ccp_mass.split_mass(S_a, group), expected)


@pytest.mark.parametrize("alike", ["source", "class"])
def test_with_a_sharp_tau_s_the_mass_falls_on_the_candidates_as_alike_as_the_instance(alike):
    """Memories identical within a source (or a class) and orthogonal across: at tau_s = 0.01 each anchor's
    mass splits evenly over itself and the drawn candidates of its source (or class), none elsewhere."""
    memory = one_hot(SOURCE_IDS if alike == "source" else LABELS)
    K, draws = 20, 3
    got = ccp_mass.mass_by_candidate(memory, memory, LABELS, SOURCE_IDS, num_negatives=K, tau_s=0.01, draws=draws)
    itself, source, cls, chance = [], [], [], []
    for d in range(draws):  # the candidates mass_by_candidate draws: the bank's sampling, from its seeds
        cand = draw_candidates(N, N, K, seed=d)  # (N, 1 + K)
        sib = (SOURCE_IDS[cand[:, 1:]] == SOURCE_IDS[cand[:, :1]]).float().sum(1)  # (N,)
        mate = (LABELS[cand[:, 1:]] == LABELS[cand[:, :1]]).float().sum(1) - sib  # (N,)
        alike_n = sib if alike == "source" else sib + mate
        itself.append(1 / (1 + alike_n))
        source.append(sib / (1 + alike_n))
        cls.append((mate if alike == "class" else 0 * mate) / (1 + alike_n))
        chance.append(torch.stack([torch.ones(N), sib, mate, K - sib - mate], 1) / (1 + K))  # (N, 4)
    expected = {"itself": torch.cat(itself).mean(), "source": torch.cat(source).mean(), "class": torch.cat(cls).mean()}
    for side in ("S_v", "S_a"):
        for g, value in expected.items():
            assert got[side][g] == pytest.approx(float(value), abs=1e-5), (side, g)
        assert got[side]["other"] == pytest.approx(0, abs=1e-6)
    assert [got["chance"][g] for g in ccp_mass.GROUPS] == pytest.approx(torch.cat(chance).mean(0).tolist())
    assert got["S_v"]["source"] > 0.05  # siblings were drawn: the test means something


def test_faulty_anchors_are_reported_apart_and_lose_their_own_mass():
    """An anchor whose audio memory is another instance's (a faulty positive) gives its own column little
    mass; the clean anchors' split is unchanged by the report."""
    memory = one_hot(torch.arange(N))  # every slot alike only to itself
    audio = memory.clone()
    faulty = torch.zeros(N, dtype=torch.bool)
    faulty[:10] = True
    audio[:10] = memory[10:20]  # (10, N): the sound of slots 10-19
    got = ccp_mass.mass_by_candidate(memory, audio, LABELS, SOURCE_IDS, faulty, num_negatives=20, tau_s=0.01)
    assert got["clean"]["S_v"]["itself"] > 0.99 and got["faulty"]["S_v"]["itself"] < 0.5


def test_sources_come_from_the_ground_truth_or_each_slot_is_its_own(tmp_path):
    (tmp_path / "ground_truth.csv").write_text("path,label,source\na/x.mp4,0,a/s0\na/y.mp4,0,a/s0\nb/z.mp4,1,b/s0\n")
    paths = [str(tmp_path / p) for p in ("b/z.mp4", "a/x.mp4", "a/y.mp4")]
    ids, named = ccp_mass.sources_of(paths, tmp_path)
    assert named and ids.tolist() == [0, 1, 1]
    with pytest.raises(ValueError, match="not in"):
        ccp_mass.sources_of([str(tmp_path / "c/w.mp4")], tmp_path)
    (tmp_path / "ground_truth.csv").write_text("path,label\na/x.mp4,0\n")
    ids, named = ccp_mass.sources_of(paths, tmp_path)
    assert not named and ids.tolist() == [0, 1, 2]


def test_the_command_reads_a_checkpoints_bank_and_ground_truth(tmp_path, capsys):
    root = tmp_path / "set"
    root.mkdir()
    rows = [
        f"c{int(LABELS[i])}/clip{i:02d}.mp4,{int(LABELS[i])},c{int(LABELS[i])}/src{int(SOURCE_IDS[i])}"
        for i in range(N)
    ]
    (root / "ground_truth.csv").write_text("path,label,source\n" + "\n".join(rows) + "\n")
    bank = MemoryBank(N, dim=SOURCES * CLASSES)
    bank.video.copy_(one_hot(SOURCE_IDS))
    bank.audio.copy_(one_hot(SOURCE_IDS))
    cfg = Config(data=str(root), num_negatives=20, tau_s=0.01, warmup_epochs=5, loss="soft")
    instances = {
        "paths": [str(root / r.split(",")[0]) for r in rows],
        "labels": LABELS,
        "faulty": torch.zeros(N, dtype=torch.bool),
        "injected": torch.zeros(N, dtype=torch.bool),
    }
    ckpt = tmp_path / "ckpt.pt"
    save_checkpoint(ckpt, config=asdict(cfg), model={}, bank=bank.state_dict(), instances=instances, epoch=4)
    ccp_mass.main([str(ckpt), "--draws", "2", "--json", str(tmp_path / "mass.json")])
    shown = capsys.readouterr().out
    assert "epoch 4, xid" in shown and "K=20, 60 anchors" in shown and "itself" in shown
    (got,) = json.loads((tmp_path / "mass.json").read_text())
    assert got["sources"] and got["S_v"]["class"] < 1e-6 and got["S_v"]["source"] > 0.05
    assert sum(got["S_v"].values()) == pytest.approx(1) and sum(got["chance"].values()) == pytest.approx(1)
    other = tmp_path / "other"
    other.mkdir()
    (other / "ground_truth.csv").write_text("path,label,source\nc0/else.mp4,0,c0/src0\n")
    with pytest.raises(SystemExit, match="tools.ccp_mass: .*not in"):
        ccp_mass.main([str(ckpt), "--data", str(other)])  # another set's ground truth: the run's clips are not in it
