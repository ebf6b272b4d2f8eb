"""tools/recorded.py and tools/drumkits.py: a folder of recordings becomes a set that train.py and the
honesty checks read as a synthetic one, split by recording, each clip striking its recording on the
motion's beat; bad input ends in one line that names it. The sounds are a handful the tests write."""

import csv
import re
import wave
from pathlib import Path

import numpy as np
import pytest

from tools import drumkits, recorded, render

RATE = 22050


def write_wav(path, wav, rate=RATE):
    """A 16-bit mono WAV file from (n,) floats in [-1, 1], with the standard library's wave module."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(rate)
        f.writeframes((np.clip(wav, -1, 1) * 32767).astype("<i2").tobytes())


def strike(k, seconds=0.3, rate=RATE):
    """The k-th test sound: a decaying tone of its own pitch with a noisy attack. -> (n,)"""
    t = np.arange(int(seconds * rate)) / rate
    noise = np.random.default_rng(k).normal(0, 0.2, t.shape) * np.exp(-t / 0.01)
    return (np.sin(2 * np.pi * (150 + 90 * k) * t) + noise) * np.exp(-t / 0.05) * 0.8


def recordings(root, classes=("kick", "snare", "hat"), per_class=4):
    """SRC/{class}/{class}_{k}.wav: `per_class` sounds of each class."""
    for c, name in enumerate(classes):
        for k in range(per_class):
            write_wav(root / name / f"{name}_{k}.wav", strike(c * per_class + k))
    return root


def small(src, out, **kw):
    """A tiny set from `src`, fast to render: sources of 2 clips, 32 pixels, 8 fps, one process."""
    args = dict(train_per_class=4, test_per_class=2, clips_per_source=2, heldout=6, faulty=0.3, size=32, fps=8)
    recorded.generate(src, out, **(args | dict(seconds=(2.2, 2.4), audio_codec="flac", workers=1) | kw))
    return out


@pytest.fixture(scope="module")
def drums(tmp_path_factory):
    src = recordings(tmp_path_factory.mktemp("src"))
    return src, small(src, tmp_path_factory.mktemp("set") / "drums")


def table(path):
    return list(csv.DictReader(open(path)))


def test_the_set_has_the_synthetic_layout_and_train_py_reads_its_splits(drums):
    from media import manifest
    from tools import synthetic

    _, out = drums
    assert synthetic.is_synthetic(out)  # synthetic.ensure may regenerate it, and nothing else
    train, classes = manifest.load_records("folder", out, "train")
    test, _ = manifest.load_records("folder", out, "test")
    assert classes == ["class00_hat", "class01_kick", "class02_snare"]
    assert len(train) == 12 and len(test) == 6 and len(list((out / "_heldout").iterdir())) == 6
    rows = table(out / "ground_truth.csv")
    assert {r["path"] for r in rows} == {Path(r.path).relative_to(out).as_posix() for r in train + test}
    assert sum(r.faulty for r in train) == sum(r["faulty_audio"] == "1" for r in rows) > 0


def test_no_recording_is_in_two_splits_and_each_clip_sounds_its_own_splits(drums):
    """Clean clips sound their split's recordings, faulty ones the held-out pool's; the two clips of a
    source share one recording; and the honesty checks find nothing crossing."""
    from lab import honesty

    src, out = drums
    split_of = {r["recording"]: r["split"] for r in table(out / "recordings.csv")}
    assert len(split_of) == 12 and set(split_of.values()) == {"train", "test", "heldout"}
    rows = table(out / "ground_truth.csv")
    for r in rows:
        expected = "heldout" if r["faulty_audio"] == "1" else r["split"]
        assert split_of[r["recording"]] == expected, r
    by_source = {}
    for r in rows:
        if r["faulty_audio"] == "0":
            by_source.setdefault(r["source"], set()).add(r["recording"])
    assert all(len(heard) == 1 for heard in by_source.values())
    used = sum(int(r["files"]) for r in table(out / "recordings.csv"))
    assert used == len(rows) + 6  # every clip and every held-out sound counted once
    crossing = honesty.crossings(out)
    assert len(crossing) == 3 and all(ok for _, ok in crossing.values()), crossing


def test_a_clip_strikes_its_recording_where_the_motion_turns(tmp_path):
    """Strikes fall at phase pi/2 of the motion, once a cycle, and a faster playback shortens each."""
    click = np.zeros(RATE // 10)  # 100 ms: a 20 ms burst, then silence
    click[: RATE // 50] = np.random.default_rng(0).normal(0, 0.5, RATE // 50)
    write_wav(tmp_path / "click.wav", click)
    p = {"seed": 1, "seconds": 2.0, "noise": 0.0, "timbre": "recorded", "recording": str(tmp_path / "click.wav")}
    p |= {"freq": 2.0, "phase": 0.0, "playback": 1.0}
    wav = render.render_audio(p, RATE)
    loud = np.abs(wav) > 0.01
    starts = np.flatnonzero(loud[1:] & ~np.convolve(loud, np.ones(200), "full")[: len(loud) - 1].astype(bool))
    np.testing.assert_allclose(starts / RATE, [0.125, 0.625, 1.125, 1.625], atol=0.002)
    fast = render.render_audio(p | {"playback": 2.0}, RATE)
    assert 1.7 < np.count_nonzero(np.abs(wav) > 0.01) / np.count_nonzero(np.abs(fast) > 0.01) < 2.3


def test_pattern_and_group_take_the_class_and_the_takes_from_file_names(tmp_path):
    """--pattern classes files of one folder by name; --group keeps the takes of one drum in one split."""
    src = tmp_path / "flat"
    for c, name in enumerate(("kick", "snare")):
        for drum in range(3):
            for take in range(2):
                write_wav(src / f"{name}-d{drum}-take{take}.wav", strike(6 * c + 2 * drum + take))
    write_wav(src / "readme-not-a-class.wav", strike(20))
    found = recorded.find_recordings(src, pattern=re.compile(r"^(kick|snare)-"))
    assert len(found) == 12 and {c for _, c, _ in found} == {"kick", "snare"}
    out = small(src, tmp_path / "set", pattern=r"^(?P<class>kick|snare)-", group=r"^(\w+-d\d)-", heldout=2)
    groups = {}
    for r in table(out / "recordings.csv"):
        groups.setdefault(r["group"], set()).add(r["split"])
    assert len(groups) == 6 and all(len(s) == 1 for s in groups.values())


def test_classes_keeps_the_named_ones_and_merges_each_in_its_own_groups(tmp_path):
    """--classes hat drums=kick+snare: two classes; a merged class's recordings keep their own groups, so
    the takes of one drum still go to one split."""
    src = recordings(tmp_path / "src", classes=("kick", "snare", "hat", "clap"), per_class=3)
    found = recorded.find_recordings(src)
    kept = recorded.select_classes(found, ["hat", "drums=kick+snare"])
    assert {c for _, c, _ in kept} == {"hat", "drums"} and len(kept) == 9
    assert {g for _, c, g in kept if c == "drums"} == {g for _, c, g in found if c in ("kick", "snare")}
    out = small(src, tmp_path / "set", classes=["hat", "drums=kick+snare"], heldout=2)
    assert {r["class"] for r in table(out / "recordings.csv")} == {"hat", "drums"}


@pytest.mark.parametrize(
    "case, expected",
    [
        ("empty", "no recordings"),
        ("missing", "no such folder"),
        ("unreadable", "snare/broken.wav: not a readable sound file"),
        ("silent", "snare/quiet.wav: silent"),
        ("few", "class 'snare': 2 group(s) of recordings"),
        ("regex", "--pattern"),
        ("no group", "--pattern kick: needs a group"),
        ("no such class", "--classes drums=kick+toms: no recording of class 'toms'"),
    ],
)
def test_bad_input_ends_in_one_line_that_names_it(tmp_path, capsys, case, expected):
    src = tmp_path / "src"
    src.mkdir()
    argv = ["--src", str(src), "--out", str(tmp_path / "out"), "--train-per-class", "2", "--workers", "1"]
    if case != "empty":
        recordings(src, classes=("kick", "snare"), per_class=3)
    if case == "missing":
        argv[1] = str(tmp_path / "nowhere")
    elif case == "unreadable":
        (src / "snare" / "broken.wav").write_bytes(b"RIFF not a wave file at all")
    elif case == "silent":
        write_wav(src / "snare" / "quiet.wav", np.zeros(RATE // 10))
    elif case == "few":
        (src / "snare" / "snare_2.wav").unlink()
    elif case == "regex":
        argv += ["--pattern", "(unclosed"]
    elif case == "no group":
        argv += ["--pattern", "kick"]
    elif case == "no such class":
        argv += ["--classes", "drums=kick+toms"]
    with pytest.raises(SystemExit) as stop:
        recorded.main(argv)
    said = str(stop.value.code) if isinstance(stop.value.code, str) else capsys.readouterr().err.strip()
    assert stop.value.code != 0 and said.startswith("tools/recorded.py: ") and "\n" not in said, said
    assert expected in said, said
    assert not (tmp_path / "out").exists()  # nothing written before the input was found good


def test_drum_kits_are_classed_by_piece_and_ambiguous_files_are_dropped(tmp_path):
    """The mapping of tools/drumkits.py on two made-up kits: the instrument's name, else the file's;
    two pieces in one name, names that disagree, rolls and unnamed pieces are dropped; a file two
    instruments share is classed once."""
    layers = {
        "KitA": [
            ("Kick", ["bd_1.wav", "bd_2.wav"]),
            ("Snare Roll", ["roll.wav"]),
            ("Crash/Ride", ["cr.wav"]),
            ("Kick 2", ["tom-01.wav"]),  # the file's name says tom: ambiguous
            ("redo super opaco", ["snare-opaque.wav"]),  # the instrument names nothing: the file decides
            ("Tom Mid", ["t.wav"]),
            ("Tom Hi", ["t.wav"]),  # the same file again
            ("Zap", ["fx.wav"]),
        ],
        "KitB": [("Hi-Hat Closed", ["hh.wav"]), ("Side Stick", ["s.wav"]), ("Snare Rimshot", ["rim.wav"])],
    }
    for kit, instruments in layers.items():
        xml = "<drumkit_info><name>x</name><instrumentList>"
        for name, files in instruments:
            xml += f"<instrument><name>{name}</name>" + "".join(
                f"<layer><filename>{f}</filename></layer>" for f in files
            )
            xml += "</instrument>"
            for f in files:
                write_wav(tmp_path / kit / f, strike(1))
        (tmp_path / kit / "drumkit.xml").write_text(xml + "</instrumentList></drumkit_info>")
    found = {f"{p.parent.name}/{p.name}": (piece, group) for p, piece, group in drumkits.pieces(tmp_path)}
    assert found == {
        "KitA/bd_1.wav": ("kick", "KitA/kick"),
        "KitA/bd_2.wav": ("kick", "KitA/kick"),
        "KitA/snare-opaque.wav": ("snare", "KitA/snare"),
        "KitA/t.wav": ("tom", "KitA/tom"),
        "KitB/hh.wav": ("hihat", "KitB/hihat"),
        "KitB/s.wav": ("stick", "KitB/stick"),
        "KitB/rim.wav": ("snare", "KitB/snare"),
    }
    with pytest.raises(ValueError, match="no \\*/drumkit.xml"):
        drumkits.pieces(tmp_path / "KitA")


def test_the_named_drum_set_is_made_from_the_package_or_says_how_to_get_it(tmp_path, monkeypatch):
    """`python -m tools.recorded --set drums` makes data/drums from the unpacked package; where the package is
    missing, one line says how to get it, and nothing is written; the demo, asked for a missing drum set, says
    which command makes it instead of generating a synthetic set under its name."""
    from tools import synthetic

    made = []
    monkeypatch.setattr(recorded, "generate", lambda **kw: made.append(kw))
    monkeypatch.setattr(recorded, "DRUMKITS", (str(tmp_path / "nowhere"),))
    with pytest.raises(SystemExit, match="hydrogen-drumkits not found .*apt-get download hydrogen-drumkits"):
        recorded.main(["--set", "drums", "--out", str(tmp_path / "drums")])
    assert made == [] and not (tmp_path / "drums").exists()
    monkeypatch.setattr(recorded, "DRUMKITS", (str(tmp_path / "nowhere"), str(tmp_path)))
    recorded.main(["--set", "drums", "--out", str(tmp_path / "drums")])
    assert (made[0]["src"], made[0]["out"], made[0]["layout"]) == (str(tmp_path), str(tmp_path / "drums"), "hydrogen")
    assert made[0]["train_per_class"] == 112 and made[0]["clips_per_source"] == 2
    with pytest.raises(SystemExit, match="python -m tools.recorded --set drums5 makes it"):
        synthetic.ensure(tmp_path / "drums5")
