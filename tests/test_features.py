"""`python -m tools.analyse features`: the npz holds the split's rows and the README's example reads
it, one fold per file, an --out of another kind is refused, and the feature caches are keyed by the checkpoint's
version: earlier versions' caches are removed unless kept, dotted names are cached apart, and pruning one
checkpoint's caches leaves a sibling's."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import data
import evaluate
from conftest import FAST, UCF_SILENT, save_version, ucf
from media import manifest
from tools import analyse

ROOT = Path(__file__).resolve().parents[1]


def test_features_writes_an_npz_whose_rows_are_the_split_and_the_readme_example_reads_it(
    ucf_data, video_manifest, ckpt, tmp_path, monkeypatch
):
    parsed = []
    monkeypatch.setattr(manifest, "_READ", {})
    monkeypatch.setattr(manifest, "_parse", lambda path, parse=manifest._parse: parsed.append(path) or parse(path))
    out = tmp_path / "ucf1.npz"
    analyse.main(["features", str(ckpt), *ucf(ucf_data, "--fold", 1, "--manifest", video_manifest, "--out", out)])
    assert parsed == [video_manifest.resolve()]  # both splits, both modalities: one read
    f = np.load(out)
    lists = ucf_data / "ucfTrainTestlist"
    expected = [line.split()[0] for name in ("trainlist01.txt", "testlist01.txt") for line in open(lists / name)]
    assert [str(Path(p).relative_to(ucf_data)) for p in f["path"]] == expected
    assert list(f["split"]) == ["train"] * 8 + ["test"] * 5
    classes = [line.split()[1] for line in open(lists / "classInd.txt")]
    assert [classes[k] for k in f["label"]] == [p.split("/")[0] for p in expected] and list(f["classes"]) == classes
    assert f["video"].shape == f["audio"].shape == (13, 64) and np.isfinite(f["video"]).all()
    silent = np.array([p.endswith(UCF_SILENT) for p in f["path"]])
    assert (f["has_audio"] == ~silent).all() and np.isnan(f["audio"][silent]).all()
    assert np.isfinite(f["audio"][~silent]).all()
    assert json.loads(str(f["about"]))["checkpoint_epoch"] == 7

    example = re.search(r"```python\n(.*?)```", (ROOT / "lab" / "OPERATIONS.md").read_text(), re.S).group(1)
    lines = [line for line in example.splitlines() if line and not line.startswith(("import", "from"))]
    assert len(lines) == 3  # after the imports: load, split, fit and score
    res = subprocess.run(
        [sys.executable, "-c", example.replace("ucf1.npz", str(out))], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0 and 0 <= float(res.stdout) <= 1, res.stderr


def test_features_refuses_several_folds_for_one_file(ckpt, tmp_path, capsys):
    with pytest.raises(SystemExit):
        analyse.main(["features", str(ckpt), "--fold", "1", "2", "--out", str(tmp_path / "f.npz")])
    assert "one --fold per file" in capsys.readouterr().err


def test_features_refuses_an_out_that_is_a_folder_or_a_file_of_another_kind(ckpt, tmp_path, capsys):
    before = ckpt.read_bytes()
    for out, words in ((ckpt, "is not a features .npz of tools.analyse"), (tmp_path, "a folder")):
        with pytest.raises(SystemExit) as stop:
            analyse.main(["features", str(ckpt), "--out", str(out), *FAST])
        err = capsys.readouterr().err.strip()
        assert stop.value.code == 2 and "\n" not in err and f"--out {out}" in err and words in err, err
    assert ckpt.read_bytes() == before


def test_feature_caches_of_earlier_versions_of_the_checkpoint_are_removed_unless_kept(
    ucf_data, video_manifest, ckpt, capsys
):
    argv = ["retrieval", str(ckpt), *ucf(ucf_data, "--fold", 1, "--manifest", video_manifest)]
    evaluate.main(argv)
    first = set(ckpt.parent.glob("features_*.pt"))
    assert len(first) == 2 and all(p.name.startswith("features_ckpt_") for p in first)
    save_version(ckpt, 8, seed=1)
    evaluate.main([*argv, "--keep-cache"])
    assert first < set(ckpt.parent.glob("features_*.pt"))
    save_version(ckpt, 9, seed=2)
    capsys.readouterr()
    evaluate.main(argv)
    assert len(set(ckpt.parent.glob("features_*.pt"))) == 2 and not first & set(ckpt.parent.glob("features_*.pt"))
    assert "removed 4 feature caches of other versions" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["ckpt.pt.prev", "avid.k400.pt"])
def test_features_of_two_versions_of_a_dotted_checkpoint_name_are_cached_apart(tmp_path, monkeypatch, name):
    """Features are named KIND_STEM_DIGEST_KEY.SPLIT.pt: with_suffix on a stem with a dot dropped the digest
    and the key, and every version then read the first one's cache."""
    from types import SimpleNamespace

    from config import Config

    monkeypatch.setattr(data, "AVDataset", lambda *a, **k: None)  # nothing to decode: the extraction is faked
    monkeypatch.setattr(evaluate, "extract_features", lambda enc, *a, **k: {"made_by": torch.tensor(enc)})

    def pre(version, digest):  # a checkpoint as read, of which the cache key reads these
        return SimpleNamespace(
            path=str(tmp_path / name), digest=digest, cfg=Config(preload="off"), model=SimpleNamespace(video=version)
        )

    cpu = torch.device("cpu")
    got = [
        evaluate.cached_features(pre(v, d), "train", [], cpu, 0, 10, "video") for v, d in ((1, "a" * 12), (2, "b" * 12))
    ]
    assert [int(g["made_by"]) for g in got] == [1, 2]
    assert len(list(tmp_path.glob("features_*.train.pt"))) == 2


def test_pruning_a_checkpoints_caches_keeps_a_sibling_checkpoints_files(tmp_path):
    """ckpt.pt's old caches go; those of ckpt_20261128_x.pt (whose name begins with 8 digits after ckpt_)
    and ckpt.pt's current ones stay."""

    def made(ckpt, digest, tail):
        path = Path(
            f"{evaluate.version_file('features' if 'train' in tail else 'finetune', ckpt, digest, 'key')}{tail}"
        )
        path.write_bytes(b"")
        return path

    ckpt, sibling = tmp_path / "ckpt.pt", tmp_path / "ckpt_20261128_x.pt"
    old = [made(ckpt, "0" * 40, t) for t in (".train.pt", ".pt", ".pt.prev")]
    kept = [made(ckpt, "1" * 40, ".train.pt"), made(ckpt, "0" * 40, ".json")]
    kept += [made(sibling, "2" * 40, t) for t in (".train.pt", ".pt", ".pt.prev")]
    assert sorted(evaluate.prune_caches(ckpt, "1" * 40)) == sorted(old)
    assert all(p.exists() for p in kept) and not any(p.exists() for p in old)
