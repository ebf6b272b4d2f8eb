"""Real recordings as an audio-visual set: a folder of recorded sounds, each rendered into videos as the
synthetic set's sources are, for the soft targets' test on real sound (paper Sec. 4.2, 5.2).

The picture is tools/synthetic.py's, drawn by the same functions: the class's shape on the class's path
over a scene of the source's own. The sound is a recording of the class, struck once per cycle of the
motion where the synthetic tone peaks (tools/render.py's `struck`), so picture and sound share their
tempo and phase (the instance-level correspondence), at a speed that sets its pitch, with the same noise.
Each recording is a source's sound character, as a synthetic source's pitch and tempo are; clips of one
source share the recording, the scene and the tempo, and differ in start, details and (with
--source-pitch own, the demo's) speed.

  recordings  --layout folders: SRC/{class}/... sound files (.wav .flac .ogg .aif .aiff), or any file
           under SRC whose relative path --pattern matches (the class: its group `class`, else its first);
           --group REGEX: the files whose paths give the same match are one group (takes of one drum).
           --layout hydrogen: Debian's drum kits, classed by piece (tools/drumkits.py).
           --classes kick snare cymbal=crash+ride: keep only these classes, merging some under a new name.
  splits   each class's groups go to train, test or the held-out pool (--split, shares of its files,
           each at least one group): no recording, nor any of its group, is in two. A class's training
           sources take its training recordings in turn (a recording serves several sources where a
           class has fewer recordings than sources); its test sources, its test recordings.
  faulty   --faulty of the training videos carry a held-out recording (another class drawn at random),
           at a tempo and phase of their own: natural faulty positives, flagged in ground_truth.csv.
  _heldout/ the injection pool of Sec. 5.2: sounds of held-out recordings, one per training video by
           default, each a fresh source's clip, audio only.

Output: the layout tools/synthetic.py writes (train.txt, test.txt, ground_truth.csv with a `recording`
column, manifest.csv, _heldout/, its marker), and recordings.csv: every recording's class, group, split
and the number of files it sounds in. train.py, demo.py and lab.honesty read it unchanged.

    python -m tools.recorded --src DIR --out data/NAME [--pattern REGEX] [--group REGEX] [--split .6 .2 .2]
    python -m tools.recorded --set drums          # SETS' drums (or drums5) into data/drums, from Debian's kits
    python -m lab.honesty data/drums --share 0.25

A bad input (no recordings, a file that does not decode or is silent, a class with too few groups to
split) ends in one line that names it. Tests: tests/test_recorded.py
"""

import argparse
import csv
import re
import shutil
import time
from collections import Counter
from pathlib import Path

import numpy as np

from config import Check, OneLineParser
from tools import drumkits
from tools.render import class_signature, recording
from tools.synthetic import (
    _clip_of_source,
    _video_params,
    add_set_arguments,
    claim,
    source_name,
    write_set,
)

SOUND_EXTENSIONS = (".wav", ".flac", ".ogg", ".aif", ".aiff")
SPLITS = ("train", "test", "heldout")


def find_recordings(src, layout="folders", pattern=None, group=None):
    """The classed recordings under `src`: [(path, class name, group)], sorted. Raises ValueError naming
    the folder or the option when there are none."""
    src = Path(src)
    if not src.is_dir():
        raise ValueError(f"--src {src}: no such folder")
    if layout == "hydrogen":
        return sorted((p, c, g) for p, c, g in drumkits.pieces(src))
    files = sorted(p for p in src.rglob("*") if p.suffix.lower() in SOUND_EXTENSIONS and p.is_file())
    out = []
    for path in files:
        rel = path.relative_to(src).as_posix()
        if pattern is not None:
            m = pattern.search(rel)
            name = m and (m.groupdict().get("class") or m.group(1))
        else:  # the class folder: the first part of the path, unless it is a file of SRC itself or '_x'
            name = rel.split("/")[0] if "/" in rel and not rel.startswith(("_", ".")) else None
        if name:
            found = group.search(rel) if group is not None else None
            # a group's files share the match (its first group where it has one); a file alone, its path
            key = (found.group(1) if found.re.groups else found.group(0)) if found else rel
            out.append((path, name, key))
    if not out:
        where = f"whose path --pattern {pattern.pattern!r} matches" if pattern else "in class folders SRC/{class}/"
        raise ValueError(f"--src {src}: no recordings ({' '.join(SOUND_EXTENSIONS)} files) {where}")
    return out


def select_classes(recordings, spec):
    """Only the classes `spec` names ('kick', or 'cymbal=crash+ride' for several under one name), in their
    own groups still. -> [(path, class name, group)]. Raises ValueError naming an item no recording has."""
    have = {name for _, name, _ in recordings}
    rename = {}
    for item in spec:
        new, _, old = item.partition("=")
        for name in old.split("+") if old else [new]:
            if name not in have:
                raise ValueError(f"--classes {item}: no recording of class {name!r} (found: {', '.join(sorted(have))})")
            rename[name] = new
    return sorted((p, rename[name], g) for p, name, g in recordings if name in rename)


def assign_splits(recordings, shares, needed, rng):
    """Each class's groups shuffled, one to each needed split first, then each to the split furthest
    below its share of the class's files. -> {path: split}. Raises ValueError naming a class with fewer
    groups than needed splits."""
    by_class = {}
    for path, name, group in recordings:
        by_class.setdefault(name, {}).setdefault(group, []).append(path)
    out = {}
    for name, groups in sorted(by_class.items()):
        if len(groups) < len(needed):
            shown = ", ".join(sorted(groups)[:3])
            raise ValueError(
                f"class {name!r}: {len(groups)} group(s) of recordings ({shown}), needs {len(needed)}, one for "
                f"each of {', '.join(needed)}: add recordings or remove the class"
            )
        order = [sorted(groups)[k] for k in rng.permutation(len(groups))]
        files, total = dict.fromkeys(needed, 0), sum(len(v) for v in groups.values())
        for k, g in enumerate(order):
            split = needed[k] if k < len(needed) else max(needed, key=lambda s: shares[s] * total - files[s])
            files[split] += len(groups[g])
            out.update(dict.fromkeys(groups[g], split))
    return out


def generate(
    src,
    out,
    layout="folders",
    pattern=None,
    group=None,
    classes=None,
    split=(0.6, 0.2, 0.2),
    train_per_class=50,
    test_per_class=30,
    heldout=None,
    faulty=0.1,
    size=64,
    fps=24,
    gop=12,
    audio_rate=22050,
    seconds=(3.0, 4.0),
    noise=0.3,
    clips_per_source=1,
    source_pitch="shared",
    audio_codec="aac",
    seed=0,
    workers=None,
):
    """Write the set described in the module docstring under `out` from the recordings under `src`."""
    if train_per_class % clips_per_source or test_per_class % clips_per_source:
        raise ValueError(
            f"--clips-per-source {clips_per_source}: expected a divisor of --train-per-class ({train_per_class}) "
            f"and --test-per-class ({test_per_class})"
        )
    t0 = time.time()
    pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
    group = re.compile(group) if isinstance(group, str) else group
    recordings = find_recordings(src, layout, pattern, group)
    if classes:
        recordings = select_classes(recordings, classes)
    classes = sorted({name for _, name, _ in recordings})
    if len(classes) > 25:
        raise ValueError(f"--src {src}: {len(classes)} classes, the renderer draws at most 25 (5 shapes x 5 paths)")
    for path, _, _ in recordings:  # every file decoded once here: a bad one is named before any is written
        recording(str(path), audio_rate)
    n_held = len(classes) * train_per_class if heldout is None else heldout
    needed = [s for s, on in zip(SPLITS, (True, test_per_class > 0, n_held > 0 or faulty > 0)) if on]
    rng = np.random.default_rng(seed)
    where = assign_splits(recordings, dict(zip(SPLITS, split)), needed, rng)
    pools = {
        (name, s): [str(p) for p, n, _ in recordings if n == name and where[p] == s] for name in classes for s in needed
    }
    out = claim(out, "recorded.py")
    cues = {"instance_cue": 0.0, "class_cue": 1.0, "audio_codec": audio_codec}

    def sounding(p, c, path):
        """Video parameters p of class c made to strike the recording `path`: the pitch p drew, as a speed
        against the centre of its class's register (tools/synthetic.py's class_pitch)."""
        centre = 220 * 2 ** (class_signature(c)[3] * 0.75)
        return {**p, "timbre": "recorded", "recording": path, "playback": p["pitch"] / centre}

    jobs, truth, splits, used = [], [], {"train": [], "test": []}, Counter()
    for c, name in enumerate(classes):
        folder = "class{:02d}_{}".format(c, re.sub(r"[^\w-]+", "_", name))
        (out / folder).mkdir(parents=True, exist_ok=True)
        for split, count in (("train", train_per_class), ("test", test_per_class)):
            own = pools.get((name, split), [])
            order = rng.permutation(len(own)) if own else []
            for k in range(count):
                rel = f"{folder}/{split}_{k:03d}.mp4"
                if k % clips_per_source == 0:  # a new source: its scene, its tempo and its recording
                    n = k // clips_per_source
                    source = sounding(_video_params(rng, c, seconds, noise), c, own[order[n % len(own)]])
                p = source
                if clips_per_source > 1:  # a clip of it: its own start, details and (with `own`) speed
                    p = sounding(
                        _clip_of_source(rng, source, seconds, c if source_pitch == "own" else None), c, p["recording"]
                    )
                audio_p, audio_class = p, c
                if split == "train" and rng.uniform() < faulty:  # a held-out recording, unrelated to the picture
                    audio_class = int(rng.integers(len(classes)))
                    held = pools[(classes[audio_class], "heldout")]
                    pa = _video_params(rng, audio_class, (p["seconds"], p["seconds"]), noise)
                    audio_p = sounding(pa, audio_class, held[int(rng.integers(len(held)))])
                jobs.append((out / rel, p, audio_p, size, fps, audio_rate, gop, cues))
                splits[split].append(rel)
                used[audio_p["recording"]] += 1
                truth.append(
                    {
                        "path": rel,
                        "label": c,
                        "class": folder,
                        "split": split,
                        "faulty_audio": int(audio_p is not p),
                        "audio_class": audio_class,
                        "motion_hz": f"{p['freq']:.3f}",
                        "sound_hz": f"{audio_p['freq']:.3f}",
                        "playback": f"{audio_p['playback']:.4f}",
                        "source": source_name(folder, split, k // clips_per_source),
                        "recording": Path(audio_p["recording"]).relative_to(src).as_posix(),
                    }
                )
    # The injection pool draws from a stream of its own, as tools/synthetic.py's does.
    shutil.rmtree(out / "_heldout", ignore_errors=True)  # a regenerated set has no stale sounds
    (out / "_heldout").mkdir()
    held_rng = np.random.default_rng([seed, 2])
    for k in range(n_held):
        c = int(held_rng.integers(len(classes)))
        held = pools[(classes[c], "heldout")]
        p = {**_video_params(held_rng, c, seconds, noise), "shape": None}
        p = sounding(p, c, held[int(held_rng.integers(len(held)))])
        jobs.append((out / "_heldout" / f"sound_{k:04d}.mp4", p, p, size, fps, audio_rate, gop, cues))
        used[p["recording"]] += 1
    rows = write_set(out, jobs, splits, truth, workers)
    with open(out / "recordings.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["recording", "class", "group", "split", "files"])
        for path, name, g in recordings:
            w.writerow([path.relative_to(src).as_posix(), name, g, where[path], used[str(path)]])
    n_faulty = sum(t["faulty_audio"] for t in truth)
    per_split = Counter(where.values())
    print(
        f"recorded set: {len(classes)} classes ({', '.join(classes)}), {len(recordings)} recordings "
        f"({', '.join(f'{per_split[s]} {s}' for s in needed)}), {len(splits['train'])} train / "
        f"{len(splits['test'])} test videos ({n_faulty} with unrelated audio), {n_held} held-out sounds, "
        f"{len(rows)} in the manifest -> {out} ({time.time() - t0:.1f}s)"
    )


# Where Debian puts the drum kits (apt-get install hydrogen-drumkits), then where GET_DRUMKITS unpacks them
DRUMKITS = ("/usr/share/hydrogen/data/drumkits", "/tmp/hydrogen/usr/share/hydrogen/data/drumkits")
GET_DRUMKITS = "cd /tmp && apt-get download hydrogen-drumkits && dpkg -x hydrogen-drumkits_*.deb /tmp/hydrogen"
# The named sets of real recordings (--set): make demo's recipe (synth_src2p's: sources of 2 clips, each clip's own
# pitch, 8 fps, 2.5-3 s, FLAC) on the drum kits' 9 classes at 112 + 34 clips a class (synth_src2p's 1000 and 300)
# and 1000 held-out sounds; drums5, 5 coarser classes at 200 + 60, a candidate for a stronger bank on real sound
# (lab/results/drums/PLAN_STRONG.md)
_DRUMS = "--layout hydrogen --clips-per-source 2 --source-pitch own --heldout 1000 --fps 8 --seconds 2.5 3 "
_DRUMS += "--audio-codec flac"
SETS = {
    "drums": f"{_DRUMS} --train-per-class 112 --test-per-class 34",
    "drums5": f"{_DRUMS} --train-per-class 200 --test-per-class 60 --classes kick snare hihat tom cymbal=crash+ride",
}


def set_argv(name, out=None):
    """The options of the named set NAME into OUT (default data/NAME), its recordings found; a SystemExit that
    says how to get them where they are missing."""
    found = [d for d in DRUMKITS if Path(d).is_dir()]
    if not found:
        raise SystemExit(f"{name}: hydrogen-drumkits not found in {' or '.join(DRUMKITS)}; get it: {GET_DRUMKITS}")
    return ["--src", found[0], "--out", str(out or Path("data") / name), *SETS[name].split()]


def regex(text):
    """A --pattern or --group value: a regular expression (argparse makes a bad one the option's one line)."""
    try:
        re.compile(text)
    except re.error as err:
        raise argparse.ArgumentTypeError(f"{text!r}: not a regular expression ({err})") from None
    return text


def main(argv=None):
    p = OneLineParser(prog="tools/recorded.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--set", choices=sorted(SETS), help="a named set: Debian's drum kits, its options (SETS)")
    p.add_argument("--src", help="the folder of recordings")
    p.add_argument("--out", help="folder to create (or one this tool or synthetic.py made before; --set: data/SET)")
    p.add_argument("--layout", choices=("folders", "hydrogen"), default="folders", help="how SRC names classes")
    p.add_argument("--pattern", type=regex, help="the class from each file's path under SRC: its group 'class'")
    p.add_argument("--group", type=regex, help="files whose paths give the same match go to one split")
    p.add_argument("--classes", nargs="+", help="keep only these classes; NAME=A+B merges A and B under NAME")
    shares = Check(lambda v: v >= 0, "a share of at least 0")
    p.add_checked("--split", shares, type=float, nargs=3, default=[0.6, 0.2, 0.2], help="train, test, held-out")
    add_set_arguments(p)
    args = p.parse_args(argv)
    if args.set:
        return main(set_argv(args.set, args.out))
    if not (args.src and args.out):
        p.error("--src and --out are needed (or --set NAME)")
    del args.set
    if args.seconds[0] > args.seconds[1]:
        p.error(f"--seconds {args.seconds[0]:g} {args.seconds[1]:g}: expected the shortest first")
    if args.pattern is not None and not re.compile(args.pattern).groups:
        p.error(f"--pattern {args.pattern}: needs a group that captures the class, (?P<class>...) or (...)")
    if sum(args.split) <= 0:
        p.error(f"--split {' '.join(map(str, args.split))}: expected shares that add up to more than 0")
    try:
        generate(**vars(args))
    except (ValueError, FileExistsError) as err:  # a bad file or folder, a class too small, options at odds
        raise SystemExit(f"tools/recorded.py: {err}") from None


if __name__ == "__main__":
    main()
