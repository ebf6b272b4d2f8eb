"""The generated sets the project's commands name, each with the options that make it, and `ensure_data`,
which generates one only where nothing of a user's can be overwritten. The synthetic sets (SYNTH_SETS,
tools/synthetic.py): `make demo`'s is `synth_src2p` (lab/results/regime/PLAN.md); the claims ran on
`synth2000` and `synth_cue_d`; `synth_transfer` is the transfer endpoint (experiments/demo.py --transfer).
The sets of real recordings (RECORDED_SETS, tools/recorded.py): `drums` and `drums5`, Debian's hydrogen-drumkits
rendered as `synth_src2p` is, as near its counts as 9 (or 5) classes allow (lab/results/drums/README.md).

    python -m tools.synthetic --out data/NAME $(options of SYNTH_SETS[NAME])   # what ensure_data runs
    python -m tools.recorded --src SRC --out data/NAME $(options of RECORDED_SETS[NAME])
"""

from pathlib import Path

from tools import recorded, synthetic


# the generator's options for the sets the project's commands name (others get its defaults)
def _sources(clips, test, pitch="shared", train=100, heldout=None):
    """The one-regime screen's candidate sets (lab/results/regime/PLAN.md): 10 x `train` training clips from
    sources of `clips` clips each, split by source; short 8-fps files with FLAC audio, cheap to generate
    (`heldout`: fewer held-out sounds than the default one per training clip, enough for 50%)."""
    sources = f"--train-per-class {train} --test-per-class {test} --clips-per-source {clips} --source-pitch {pitch}"
    extra = f" --heldout {heldout}" if heldout else ""
    return (sources + " --fps 8 --seconds 2.5 3 --pool 0 --audio-codec flac" + extra).split()


SYNTH_SETS = {
    "synth2000": ["--train-per-class", "200"],
    "synth_noise01": ["--noise", "0.1"],
    # the faulty-negative screen's candidates (results/negatives/SCREEN.md at commit 554eea5): a cue of each video's own
    # shared by picture and sound, and a weaker class
    "synth_cue_a": ["--train-per-class", "200", "--instance-cue", "1", "--class-cue", "1"],
    "synth_cue_b": ["--train-per-class", "200", "--instance-cue", "1", "--class-cue", "0.5"],
    "synth_cue_c": ["--train-per-class", "200", "--instance-cue", "1", "--class-cue", "0.35"],
    "synth_cue_d": ["--train-per-class", "200", "--instance-cue", "0.3", "--class-cue", "1"],
    "synth_src10": _sources(10, 30),
    "synth_src20": _sources(20, 40),
    "synth_src10p": _sources(10, 30, "own"),
    "synth_src5p": _sources(5, 30, "own"),
    "synth_src2p": _sources(2, 30, "own"),
    "synth_src2p_2k": _sources(2, 30, "own", train=200, heldout=1000),
    # the faults screen's candidate sets (lab/results/faults_screen/PLAN.md): independent videos, 1000-4000
    "synth_iid1k": _sources(1, 30, "own"),
    "synth_iid2k": _sources(1, 30, "own", train=200, heldout=1000),
    "synth_iid4k": _sources(1, 30, "own", train=400, heldout=2000),
    "synth_src2p_n1": _sources(2, 30, "own") + ["--noise", "0.1"],
    "synth_src2p_aac": _sources(2, 30, "own") + ["--audio-codec", "aac"],
    "synth_src2p_24": _sources(2, 30, "own") + ["--fps", "24", "--seconds", "3", "4"],
    # the transfer endpoint (--transfer): 10 classes of shapes and timbres no pre-training class has
    "synth_transfer": "--family transfer --train-per-class 20 --test-per-class 20 --heldout 0 --pool 0 "
    "--fps 8 --seconds 2.5 3 --audio-codec flac".split(),
}


# where Debian puts the drum kits (apt-get install hydrogen-drumkits), then where the command that the error
# below gives unpacks them without installing
DRUMKITS = ("/usr/share/hydrogen/data/drumkits", "/tmp/hydrogen/usr/share/hydrogen/data/drumkits")
GET_DRUMKITS = "cd /tmp && apt-get download hydrogen-drumkits && dpkg -x hydrogen-drumkits_*.deb /tmp/hydrogen"


def drumkits():
    """The folder of Debian's hydrogen-drumkits; a SystemExit that says how to get it if it is missing."""
    found = [d for d in DRUMKITS if Path(d).is_dir()]
    if not found:
        raise SystemExit(f"data/drums: hydrogen-drumkits not found in {' or '.join(DRUMKITS)}; get it: {GET_DRUMKITS}")
    return found[0]


# The sets of real recordings the commands name: where their recordings are (a function, asked only when
# the set is made) and tools/recorded.py's options. drums: make demo's recipe (synth_src2p's: sources of 2
# clips, each clip's own pitch, 8 fps, 2.5-3 s, FLAC) with 9 classes, at 112 + 34 clips a class (1008 and
# 306, for synth_src2p's 1000 and 300) and 1000 held-out sounds. drums5: the same recipe on 5 coarser
# classes (crash and ride as one cymbal; clap, cowbell and stick left out), 200 + 60 a class: a candidate
# for a stronger bank on real sound (lab/results/drums/PLAN_STRONG.md)
_DRUMS = "--layout hydrogen --clips-per-source 2 --source-pitch own --heldout 1000 --fps 8 --seconds 2.5 3"
_DRUMS += " --audio-codec flac"
RECORDED_SETS = {
    "drums": (drumkits, f"{_DRUMS} --train-per-class 112 --test-per-class 34".split()),
    "drums5": (
        drumkits,
        f"{_DRUMS} --train-per-class 200 --test-per-class 60 --classes kick snare hihat tom cymbal=crash+ride".split(),
    ),
}


def ensure_data(root, synth_args=None):
    """Generate a named set only where nothing of the user's can be overwritten: a folder that does not
    exist, or one synthetic.py or recorded.py made (it holds the marker). Any other folder is used as
    it is (scanned when it has no manifest)."""
    root = Path(root)
    synth_args = SYNTH_SETS.get(root.name, []) if synth_args is None else synth_args
    if root.exists() and not synthetic.is_synthetic(root):
        print(f"[demo] {root} is not a synthetic set: using it as it is")
        return
    if not (root / "manifest.csv").exists() or not (root / "_heldout").is_dir():  # older sets lack the pool
        print(f"[demo] data: generating {root} (the first stage; BENCHMARKS.md has its minutes per CPU)")
        if root.name in RECORDED_SETS:
            where, options = RECORDED_SETS[root.name]
            recorded.main(["--src", where(), "--out", str(root), *options])
        else:
            synthetic.main(["--out", str(root), *synth_args])
