"""The synthetic audio-visual dataset: real .mp4 files whose classes and faulty positives are known.

  picture  the class's shape moving along the class's path over a textured background, with a distractor blob;
           colours, position, size, tempo, phase and background vary per video. The shape is large and near the
           centre, as a real clip's subject, so that Sec. 5.1's crops keep it in view (smaller shapes anywhere:
           the demo's supervised encoder reached 21% instead of 35% after 150 steps, results/sup_upper_bound.log
           at commit 2ae1052).
  sound    a tone of the class's timbre and register, pitch per video, beating once per cycle of the motion:
           picture and sound share tempo and phase, the instance-level correspondence xID can learn; plus noise.
  faulty   a share of the training videos (--faulty) carry another, unseen video's sound, rendered as every
           other sound, so that only the missing correspondence marks it (tests/test_synthetic.py); flagged in
           ground_truth.csv. Videos of one class are the natural faulty negatives.
  _heldout/ Sec. 5.2's injection pool: sounds of videos in neither split, one per training video by default.
  cues     --instance-cue s: a stripe of the video's own whose height and hue set two steady tones, mixed at s;
           --class-cue c shrinks the class's shape and lowers its sound by c.
  sources  --clips-per-source N: each class's videos in groups of N clips of one source, which share the scene
           and the sound's character (--source-pitch own: the tempo only) and differ in start and details: the
           faulty negatives that matter. Splits are by source.
  _pool/   noise bursts and chirps of no class, for --faulty-source noise.

Output (media/manifest.py's `folder` layout): DIR/{class}/*.mp4 (H.264, AAC or FLAC), train.txt, test.txt,
ground_truth.csv, _heldout/, _pool/, manifest.csv and the marker .robust_xid_synthetic: it writes only into a
folder that does not exist, is empty or holds the marker. SETS are the named sets the project's commands use;
`ensure` makes one. The renderer is tools/render.py (--family transfer: shapes and timbres no pre-training
class has, the transfer endpoint's).

    python -m tools.synthetic --out data/synth [--classes 10 --train-per-class 50 --test-per-class 30]
"""

import csv
import os
import shutil
import time
from multiprocessing import Pool
from pathlib import Path

import av
import numpy as np

from config import Check, OneLineParser, at_least, between
from media.manifest import MANIFEST_FIELDS, MIN_AUDIO_SECONDS, MIN_VIDEO_SECONDS, stream_duration
from tools.render import FAMILIES, SHAPES, class_signature, render_audio, render_video, write_mp4

MARKER = ".robust_xid_synthetic"  # in every folder this generator made
CUES = (
    ("a", 1, 1),
    ("b", 1, 0.5),
    ("c", 1, 0.35),
    ("d", 0.3, 1),
)  # the faulty-negative screen's instance and class cues


EVEN = Check(lambda v: v >= 16 and v % 2 == 0, "an even value of at least 16 (H.264 wants even sides)")


def add_arguments(p):
    """The generator's options, each with the values it allows (a bad one ends in one line, naming it)."""
    p.add_argument("--out", required=True, help="folder to create (or one this generator made before)")
    p.add_checked("--classes", between(1, 25), type=int, default=10, help="number of classes")
    add_set_arguments(p)
    p.add_checked("--pool", at_least(0), type=int, default=100, help="audio-only files of no class (_pool/)")
    cue = "strength of a cue of each video's own shared by picture and sound (0: none)"
    p.add_checked("--instance-cue", between(0, 1), type=float, default=0.0, help=cue)
    size = "size of the class's shape and level of its sound"
    p.add_checked("--class-cue", Check(lambda v: 0 < v <= 1, "a value in (0, 1]"), type=float, default=1.0, help=size)
    family = "pretrain, or transfer: shapes and timbres no pre-training class has (tools/render.py)"
    p.add_argument("--family", choices=sorted(FAMILIES), default="pretrain", help=family)


def add_set_arguments(p):
    """The options of a rendered set that tools/recorded.py shares: sizes, splits, sources, faults, files."""
    p.add_checked("--train-per-class", at_least(1), type=int, default=50)
    p.add_checked("--test-per-class", at_least(0), type=int, default=30, help="30: one video is not one point of R@1")
    heldout = "injection pool (_heldout/): sounds of videos in neither split; default: one per train video"
    p.add_checked("--heldout", at_least(0), type=int, default=None, help=heldout)
    faulty = "share of training videos with another video's audio"
    p.add_checked("--faulty", between(0, 1), type=float, default=0.1, help=faulty)
    p.add_checked("--size", EVEN, type=int, default=64, help="frame side in pixels")
    p.add_checked("--fps", at_least(1), type=int, default=24)
    p.add_checked("--gop", at_least(1), type=int, default=12, help="keyframe interval (x264's 250 is downloads')")
    p.add_checked("--audio-rate", at_least(8000), type=int, default=22050)
    seconds = "duration range, shortest first"
    p.add_checked("--seconds", at_least(0.5), type=float, nargs=2, default=[3.0, 4.0], help=seconds)
    p.add_checked("--noise", between(0, 1), type=float, default=0.3, help="background clutter and audio noise")
    clips = "clips of each source (scene and sound shared); --train- and --test-per-class multiples of it"
    p.add_checked("--clips-per-source", at_least(1), type=int, default=1, help=clips)
    pitch = "the clips of a source share its pitch (about 2%%), or each draws its own from the class's register"
    p.add_argument("--source-pitch", choices=("shared", "own"), default="shared", help=pitch)
    codec = "aac (as downloads) or flac (lossless, 5x cheaper to encode; the demo's set)"
    p.add_argument("--audio-codec", choices=("aac", "flac"), default="aac", help=codec)
    p.add_checked("--seed", at_least(0), type=int, default=0)
    workers = "processes (default: every core; the files do not depend on it)"
    p.add_checked("--workers", at_least(1), type=int, default=None, help=workers)


def class_pitch(rng, c):
    """A video's pitch: its class's register, give or take a quarter of an octave."""
    return float(220 * 2 ** (class_signature(c)[3] * 0.75 + rng.uniform(-0.25, 0.25)))


def _video_params(rng, c, seconds, noise, family="pretrain"):
    shape, path, timbre, register = class_signature(c, family)
    dshape = SHAPES[rng.integers(5)]
    return dict(
        shape=shape,
        path=path,
        timbre=timbre,
        seconds=float(rng.uniform(*seconds)),
        noise=noise,
        freq=float(rng.uniform(0.6, 2.0)),
        phase=float(rng.uniform(0, 2 * np.pi)),
        x0=float(rng.uniform(-0.2, 0.2)),
        y0=float(rng.uniform(-0.2, 0.2)),
        radius=float(rng.uniform(0.35, 0.5)),
        colour=rng.uniform(60, 255, 3),
        dshape=dshape,
        dcolour=rng.uniform(0, 255, 3),
        distractor=rng.uniform(-0.5, 0.5, 2),
        dfreq=float(rng.uniform(0.5, 3)),
        pitch=class_pitch(rng, c),
        seed=int(rng.integers(2**31)),
    )


def _clip_of_source(rng, source, seconds, c=None):
    """One clip of a source: its scene and sound character, with its own start (phase), a few percent of
    tempo and pitch, a little position, size and colour, and its own noise (seed). With the class `c`
    given, the clip's pitch is its own, drawn as an independent video of that class draws it, so that
    the sound names the source by its tempo alone (--source-pitch own)."""
    clip = {
        **source,
        "seconds": float(rng.uniform(*seconds)),
        "freq": source["freq"] * float(rng.uniform(0.92, 1.08)),
        "phase": float(rng.uniform(0, 2 * np.pi)),
        "x0": source["x0"] + float(rng.normal(0, 0.03)),
        "y0": source["y0"] + float(rng.normal(0, 0.03)),
        "radius": source["radius"] * float(rng.uniform(0.95, 1.05)),
        "colour": np.clip(source["colour"] + rng.normal(0, 8, 3), 0, 255),
        "pitch": source["pitch"] * float(2 ** rng.uniform(-0.03, 0.03)),
        "distractor": source["distractor"] + rng.normal(0, 0.05, 2),
        "scene_seed": source["seed"],
        "seed": int(rng.integers(2**31)),
    }
    if c is not None:  # the source's pitch jitter above is drawn all the same, so both kinds share one stream
        clip["pitch"] = class_pitch(rng, c)
    return clip


def source_name(class_name, split, k):
    """The name ground_truth.csv gives a source: its class folder, its split and its number."""
    return f"{class_name}/{split}_src{k:03d}"


def _make_one(job):
    """Render and write one file -> its manifest row, as tools/scan.py's probe gives it (no path yet)."""
    path, p, audio_p, size, fps, rate, gop, cues = job
    cues = dict(cues)
    codec = cues.pop("audio_codec", "aac")
    p, audio_p = {**p, **cues}, {**audio_p, **cues}
    frames = render_video(p, size, fps) if p["shape"] is not None else None
    write_mp4(path, frames, render_audio(audio_p, rate), fps, rate, gop, codec)
    if frames is None:  # a sound of _heldout/ or _pool/: not a video of the set
        return None
    with av.open(str(path)) as c:  # the file just written: the scan's checks of a damaged one are not needed
        vs, au = c.streams.video[0], c.streams.audio[0]
        return {
            "label": path.parent.name,
            "duration": f"{stream_duration(c, vs):.3f}",
            "fps": f"{float(vs.average_rate or 0):.3f}",
            "width": vs.width,
            "height": vs.height,
            "has_audio": 1,
            "audio_rate": au.rate,
            "audio_duration": f"{stream_duration(c, au):.3f}",
        }


def is_synthetic(folder):
    """True if this generator (or tools/recorded.py, which renders with it) made `folder` (it holds the
    marker file)."""
    return (Path(folder) / MARKER).is_file()


def _sources(clips, test, pitch="shared", train=100, heldout=None):
    """The regime screen's sets (lab/results/regime/PLAN.md): 10 x `train` training clips in sources of `clips`,
    short 8-fps files with FLAC audio (`heldout`: fewer held-out sounds than one per training clip)."""
    sources = f"--train-per-class {train} --test-per-class {test} --clips-per-source {clips} --source-pitch {pitch}"
    return f"{sources} --fps 8 --seconds 2.5 3 --pool 0 --audio-codec flac{f' --heldout {heldout}' if heldout else ''}"


# The sets the project's commands name, with the options that make them (any other name: the defaults). make demo's
# is synth_src2p; the claims ran on synth2000 and synth_cue_d; synth_transfer is the transfer endpoint (classes of
# shapes and timbres no pre-training class has); the rest are screens' candidates (lab/results/).
SETS = {
    "synth2000": "--train-per-class 200",
    "synth_noise01": "--noise 0.1",
    **{f"synth_cue_{k}": f"--train-per-class 200 --instance-cue {i} --class-cue {c}" for k, i, c in CUES},
    "synth_src10": _sources(10, 30),
    "synth_src20": _sources(20, 40),
    "synth_src10p": _sources(10, 30, "own"),
    "synth_src5p": _sources(5, 30, "own"),
    "synth_src2p": _sources(2, 30, "own"),
    "synth_src2p_2k": _sources(2, 30, "own", train=200, heldout=1000),
    "synth_iid1k": _sources(1, 30, "own"),
    "synth_iid2k": _sources(1, 30, "own", train=200, heldout=1000),
    "synth_iid4k": _sources(1, 30, "own", train=400, heldout=2000),
    "synth_src2p_n1": _sources(2, 30, "own") + " --noise 0.1",
    "synth_src2p_aac": _sources(2, 30, "own") + " --audio-codec aac",
    "synth_src2p_24": _sources(2, 30, "own") + " --fps 24 --seconds 3 4",
    "synth_transfer": "--family transfer --train-per-class 20 --test-per-class 20 --heldout 0 --pool 0 --fps 8 "
    "--seconds 2.5 3 --audio-codec flac",
}


def ensure(root):
    """Generate the set ROOT with SETS' options where nothing of a user's can be overwritten: a folder that does not
    exist, or one this generator made that lacks its manifest or pool. Any other folder is used as it is."""
    root = Path(root)
    if root.exists() and not is_synthetic(root):
        print(f"[demo] {root} is not a synthetic set: using it as it is")
    elif not (root / "manifest.csv").exists() or not (root / "_heldout").is_dir():  # older sets lack the pool
        if root.name in ("drums", "drums5"):  # real recordings: tools/recorded.py's
            raise SystemExit(f"{root}: not found; python -m tools.recorded --set {root.name} makes it")
        print(f"[demo] data: generating {root} (the first stage; BENCHMARKS.md has its minutes per CPU)")
        main(["--out", str(root), *SETS.get(root.name, "").split()])


def claim(out, maker):
    """The folder `out` made ready for a generated set, marked as one: it must not exist yet, be empty,
    or hold the marker (never a user's dataset). -> Path"""
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not is_synthetic(out):
        raise FileExistsError(
            f"{out} exists and was not made by {maker} (no {MARKER} in it): "
            f"refusing to write into it; choose a new --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text(f"made by {maker}; the folder may be regenerated\n")
    return out


def write_set(out, jobs, splits, truth, workers=None):
    """Render the jobs (_make_one's tuples) with `workers` processes, then write the split lists, the
    ground truth (a dict per video) and the manifest (the rows tools/scan.py would write). -> the manifest's rows"""
    with Pool(workers or os.cpu_count() or 1) as processes:
        probed = dict(zip((str(job[0].relative_to(out)) for job in jobs), processes.map(_make_one, jobs, chunksize=8)))
    for split, rels in splits.items():
        (out / f"{split}.txt").write_text("\n".join(rels) + "\n")
    with open(out / "ground_truth.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(truth[0]))
        w.writeheader()
        w.writerows(truth)
    rows = []
    for rel in sorted(rel for rels in splits.values() for rel in rels):
        row = probed[rel]
        if float(row["duration"]) < MIN_VIDEO_SECONDS or float(row["audio_duration"]) < MIN_AUDIO_SECONDS:
            seconds = f"{float(row['duration']):.2f}s video, {float(row['audio_duration']):.2f}s audio"
            print(f"unusable: {out / rel}: shorter than one clip ({seconds})")  # as the scan says it
        else:
            rows.append({"path": rel} | row)
    tmp = out / f"manifest.csv.{os.getpid()}.tmp"  # replaced whole: a reader never sees half a manifest
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, MANIFEST_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, out / "manifest.csv")
    return rows


def generate(
    out,
    classes=10,
    train_per_class=50,
    test_per_class=30,
    heldout=None,
    pool=100,
    faulty=0.1,
    size=64,
    fps=24,
    gop=12,
    audio_rate=22050,
    seconds=(3.0, 4.0),
    noise=0.3,
    seed=0,
    workers=None,
    instance_cue=0.0,
    class_cue=1.0,
    clips_per_source=1,
    source_pitch="shared",
    audio_codec="aac",
    family="pretrain",
):
    """Write the dataset described in the module docstring under `out`."""
    if not 1 <= classes <= 25:
        raise ValueError(f"classes={classes}: expected 1..25 (5 shapes x 5 paths)")
    if not (0 <= instance_cue <= 1 and 0 < class_cue <= 1):
        raise ValueError(f"instance_cue={instance_cue}, class_cue={class_cue}: expected 0..1 and (0, 1]")
    if clips_per_source < 1 or train_per_class % clips_per_source or test_per_class % clips_per_source:
        raise ValueError(
            f"clips_per_source={clips_per_source}: expected a positive divisor of train_per_class "
            f"({train_per_class}) and test_per_class ({test_per_class})"
        )
    # Drawn from each video's seed, not from the generator's stream: at the defaults the set is the same
    # file for file as one made before these options existed.
    cues = {"instance_cue": instance_cue, "class_cue": class_cue, "audio_codec": audio_codec}
    out = claim(out, "synthetic.py")
    t0 = time.time()
    rng = np.random.default_rng(seed)
    jobs, truth, splits = [], [], {"train": [], "test": []}
    for c in range(classes):
        name = "class{:02d}_{}_{}".format(c, *class_signature(c, family)[:2])
        (out / name).mkdir(parents=True, exist_ok=True)
        for split, count in (("train", train_per_class), ("test", test_per_class)):
            for k in range(count):
                rel = f"{name}/{split}_{k:03d}.mp4"
                if clips_per_source == 1:  # the stream as it always was: the same files as before sources
                    p = _video_params(rng, c, seconds, noise, family)
                else:
                    if k % clips_per_source == 0:  # a new source: its scene and sound character
                        source = _video_params(rng, c, seconds, noise, family)
                    p = _clip_of_source(rng, source, seconds, c if source_pitch == "own" else None)
                audio_p, audio_class = p, c
                if split == "train" and rng.uniform() < faulty:  # the sound of another, unseen video
                    audio_class = int(rng.integers(classes))
                    audio_p = _video_params(rng, audio_class, (p["seconds"], p["seconds"]), noise, family)
                jobs.append((out / rel, p, audio_p, size, fps, audio_rate, gop, cues))
                splits[split].append(rel)
                truth.append(
                    {
                        "path": rel,
                        "label": c,
                        "class": name,
                        "split": split,
                        "faulty_audio": int(audio_p is not p),
                        "audio_class": audio_class,
                        "motion_hz": f"{p['freq']:.3f}",
                        "sound_hz": f"{audio_p['freq']:.3f}",
                        "pitch_hz": f"{audio_p['pitch']:.1f}",
                        # a set of sources names each clip's; one of single clips keeps the columns it had
                        **({"source": source_name(name, split, k // clips_per_source)} if clips_per_source > 1 else {}),
                    }
                )
    (out / "_pool").mkdir(parents=True, exist_ok=True)
    for k in range(pool):  # audio that belongs to no class: out of distribution, for --faulty-source pool
        p = {**_video_params(rng, 0, (4.0, 6.0), noise), "shape": None}
        jobs.append((out / "_pool" / f"noise_{k:03d}.mp4", p, {**p, "timbre": None}, size, fps, audio_rate, gop, cues))
    # The injection pool draws from a stream of its own, so the train and test videos (and with them
    # the manifest and every 0% run) are the same as a generator without it made.
    shutil.rmtree(out / "_heldout", ignore_errors=True)  # a regenerated set has no stale sounds
    (out / "_heldout").mkdir(parents=True)
    held_rng = np.random.default_rng([seed, 2])
    for k in range(classes * train_per_class if heldout is None else heldout):
        c = int(held_rng.integers(classes))  # a class sound, like a natural fault's: the same renderer
        p = {**_video_params(held_rng, c, seconds, noise, family), "shape": None}
        jobs.append((out / "_heldout" / f"sound_{k:04d}.mp4", p, p, size, fps, audio_rate, gop, cues))
    rows = write_set(out, jobs, splits, truth, workers)
    n_faulty = sum(t["faulty_audio"] for t in truth)
    print(
        f"synthetic dataset: {classes} classes, {len(splits['train'])} train / {len(splits['test'])} test "
        f"videos ({n_faulty} with unrelated audio), {len(list((out / '_heldout').iterdir()))} held-out sounds "
        f"for injection, {pool} noise files, {len(rows)} in the manifest "
        f"-> {out} ({time.time() - t0:.1f}s)"
    )


def main(argv=None):
    p = OneLineParser(prog="tools/synthetic.py", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    args = p.parse_args(argv)
    if args.seconds[0] > args.seconds[1]:
        p.error(f"--seconds {args.seconds[0]:g} {args.seconds[1]:g}: expected the shortest first")
    try:
        generate(**vars(args))
    except (ValueError, FileExistsError) as err:  # options that do not go together, a folder of the user's
        raise SystemExit(f"tools/synthetic.py: {err}") from None


if __name__ == "__main__":
    main()
