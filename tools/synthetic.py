"""The embedded synthetic audio-visual dataset: real .mp4 files with known classes and faulty positives.

No public video dataset can be downloaded here, so the project makes one whose truth is known:

  picture  a shape moving along a path over a textured background, plus a distractor blob.
           The class fixes the shape and the path; colours, position, size, tempo, phase and
           background vary per video. The shape is large and stays near the centre, as the
           subject of a real clip does, so that the crops of Sec. 5.1 (>= 40% of the area) keep it
           in view: with shapes anywhere in the frame and slightly smaller (radius 0.3-0.45), the
           demo's video encoder reached 21% / 59% test accuracy with labels after 150 / 300
           steps, and 35% / 81% with this placement (results/sup_upper_bound.log at commit 2ae1052).
  sound    a tone whose timbre and register come from the class, pitch varies per video, beating
           once per cycle of the motion (so picture and sound of one video share their tempo and
           phase: the instance-level correspondence that xID can learn), plus noise.
  faulty   a share of the training videos (default 10%) carry the sound of another, unseen video:
           a class sound whose class, tempo, phase and pitch are drawn independently of the picture.
           It is made by the same renderer as every other sound, so nothing in the audio alone marks
           it (tests/test_synthetic.py checks simple audio statistics); only the missing
           correspondence does. These natural faulty positives are flagged in ground_truth.csv.
           Videos of the same class are the natural faulty negatives.
  _heldout/ the injection pool of Sec. 5.2 ("a randomly selected audio that is not part of the
           training set"): the sounds of videos that are in neither split, rendered exactly as the
           natural faults above (class, tempo, phase and pitch drawn independently). One file per
           training video by default, and train.py draws them without replacement, so no injected
           sound is used twice even at 100% and none sits in two memory-bank slots.
  cues     two knobs move the balance between what picture and sound share per class and per video.
           --instance-cue s (0 by default: off) gives each video a full-width stripe whose height
           and hue, drawn from the video's own seed, set the pitches of two steady tones in its sound
           (250-1000 Hz and 1500-4000 Hz), mixed at s: the instance, not the class, becomes the easy
           cross-modal signal, as it is in real video. --class-cue c shrinks the class's shape and
           lowers the class's sound by c. A faulty positive's sound carries another video's tones.
  sources  --clips-per-source N (1 by default: every video its own source) makes each class's videos
           in groups of N clips of one source, as a real dataset holds several clips of one recording:
           they share the scene (background, texture, colours, size, place, distractor) and the sound's
           character (pitch and tempo; with --source-pitch own, the tempo only), and differ in start
           (phase), a few percent of tempo and pitch, a little position, size and colour, and their
           noise. They are the faulty negatives that matter: the same class, nearly the same instance,
           and xID must push them apart. Splits are by source (no source has clips in train and test).
           Each held-out sound is one clip of a fresh source, so unlike a training sound it has no
           siblings: results/regime/PLAN.md says why a novelty check should come before such a set
           is adopted.
  _pool/   audio that belongs to no class (noise bursts and chirps): out of distribution, kept only
           for `--faulty-source noise`.

Output (the `folder` layout of media/manifest.py): DIR/{class}/*.mp4 (H.264, keyframe every 12 frames,
AAC or FLAC), DIR/train.txt, DIR/test.txt, DIR/ground_truth.csv, DIR/_heldout/*.mp4 and DIR/_pool/*.mp4 (audio
only; folders starting with '_' are not classes), DIR/manifest.csv, and the
marker DIR/.robust_xid_synthetic. The generator writes only into a folder that does not exist yet,
is empty, or carries that marker: never into a user's dataset.

    python -m tools.synthetic --out data/synth [--classes 10 --train-per-class 50 --test-per-class 30]

Over 450 lines because it is one generator: the picture, the sound, the cues and the sources all read
and write one parameter dict per video, and the honesty tests rely on a single renderer for every sound.
"""

import argparse
import csv
import os
import shutil
import time
from multiprocessing import Pool
from pathlib import Path

import av
import numpy as np

SHAPES = ("disk", "square", "triangle", "ring", "cross", "diamond", "frame", "saltire", "bar", "half")
PATHS = ("horizontal", "vertical", "circle", "diagonal", "pulse")
TIMBRES = ("sine", "square", "saw", "bell", "fm")


MARKER = ".robust_xid_synthetic"  # in every folder this generator made


def add_arguments(p):
    p.add_argument("--out", required=True, help="folder to create (or one this generator made before)")
    p.add_argument("--classes", type=int, default=10, help="number of classes (at most 25)")
    p.add_argument("--train-per-class", type=int, default=50)
    p.add_argument("--test-per-class", type=int, default=30, help="30: one test video is not one point of R@1")
    p.add_argument(
        "--heldout",
        type=int,
        default=None,
        help="injection pool (_heldout/): sounds of videos in neither split; default: one per train video",
    )
    p.add_argument("--pool", type=int, default=100, help="audio-only files that belong to no class (_pool/)")
    p.add_argument("--faulty", type=float, default=0.1, help="share of training videos with another video's audio")
    p.add_argument("--size", type=int, default=64, help="frame side in pixels")
    p.add_argument("--fps", type=int, default=24)
    p.add_argument(
        "--gop", type=int, default=12, help="keyframe interval (x264's own default, 250, is what downloads have)"
    )
    p.add_argument("--audio-rate", type=int, default=22050)
    p.add_argument("--seconds", type=float, nargs=2, default=(3.0, 4.0), help="duration range")
    p.add_argument("--noise", type=float, default=0.3, help="background clutter and audio noise, 0..1")
    p.add_argument(
        "--instance-cue",
        type=float,
        default=0.0,
        help="0..1: strength of a cue of each video's own that its picture and sound share (a stripe whose "
        "height and hue set the pitches of two tones); 0, the default, leaves the set as it was",
    )
    p.add_argument(
        "--class-cue",
        type=float,
        default=1.0,
        help="0..1: size of the class's shape and level of the class's sound (1: as it was)",
    )
    p.add_argument(
        "--clips-per-source",
        type=int,
        default=1,
        help="clips made from each source (scene and sound character shared, start and details varied); "
        "--train-per-class and --test-per-class must be multiples of it; 1, the default: one clip a source",
    )
    p.add_argument(
        "--source-pitch",
        choices=("shared", "own"),
        default="shared",
        help="with --clips-per-source: the clips of a source share its pitch (give or take about 2%%), or each "
        "draws its own from the class's register, so that only the scene and the tempo mark the source",
    )
    p.add_argument(
        "--audio-codec",
        choices=("aac", "flac"),
        default="aac",
        help="aac (what downloads have) or flac (lossless, about 5x cheaper to encode; the demo's set)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--workers", type=int, default=None, help="processes (default: every core; the files do not depend on it)"
    )


def class_signature(c):
    """Class c = a + 5 b -> (shape, path, timbre, register) = (c mod 10, a + b mod 5, a, b).
    Up to 10 classes each has a shape of its own, a cue visible in every frame, as real action
    classes are mostly told apart by appearance; beyond 10 shapes repeat and the path (motion) and
    sound tell such classes apart. Paths and timbres are each shared by several classes."""
    a, b = c % 5, c // 5
    return SHAPES[c % len(SHAPES)], PATHS[(a + b) % 5], TIMBRES[a], b


def _mask(shape, dx, dy, r):
    ax, ay, d = np.abs(dx), np.abs(dy), np.hypot(dx, dy)
    if shape == "disk":
        return d < r
    if shape == "square":
        return np.maximum(ax, ay) < r * 0.85
    if shape == "triangle":
        return (dy > -r) & (dy < r) & (ax < (dy + r) / 2)
    if shape == "ring":
        return (d < r) & (d > r * 0.55)
    if shape == "cross":
        return ((ax < r / 3) & (ay < r)) | ((ay < r / 3) & (ax < r))
    if shape == "diamond":
        return ax + ay < r
    if shape == "frame":  # a hollow square
        return (np.maximum(ax, ay) < r * 0.85) & (np.maximum(ax, ay) > r * 0.5)
    if shape == "saltire":  # an X
        return (np.abs(ax - ay) < r / 4) & (d < r)
    if shape == "bar":
        return (ay < r / 3) & (ax < r)
    return (d < r) & (dy < 0)  # half: the upper half of a disk


def render_video(p, size, fps):
    """Frames (n, size, size, 3) uint8 for the video parameters p."""
    # A clip of a source draws its scene (background, texture) from the source's seed and its noise from
    # its own; a video that is its own source draws both from one stream, as it always has.
    scene = np.random.default_rng(p.get("scene_seed", p["seed"]))
    rng = np.random.default_rng(p["seed"]) if "scene_seed" in p else scene
    n = int(round(p["seconds"] * fps))
    yy, xx = np.mgrid[0:size, 0:size] / (size / 2) - 1.0  # coordinates in [-1, 1]
    bg = scene.uniform(0, 255, 3) * 0.6
    texture = scene.normal(0, 40 * p["noise"], (size, size, 1))
    frames = np.empty((n, size, size, 3), np.uint8)
    for i in range(n):
        t = i / fps
        ph = 2 * np.pi * p["freq"] * t + p["phase"]
        amp, cx, cy, r = 0.3, p["x0"], p["y0"], p["radius"] * p.get("class_cue", 1.0)
        path = p["path"]
        if path == "horizontal":
            cx = amp * np.sin(ph)
        elif path == "vertical":
            cy = amp * np.sin(ph)
        elif path == "circle":
            cx, cy = amp * np.cos(ph), amp * np.sin(ph)
        elif path == "diagonal":
            cx = cy = amp * np.sin(ph)
        else:  # pulse: grows and shrinks in place
            r = r * (1 + 0.45 * np.sin(ph))
        img = bg + texture + rng.normal(0, 8 * p["noise"], (size, size, 1))
        if p.get("instance_cue", 0.0) > 0:
            img = _draw_stripe(img, yy, p)
        img[_mask(p["shape"], xx - cx, yy - cy, r)] = p["colour"]
        dx, dy = p["distractor"][0] + 0.3 * np.sin(t * p["dfreq"]), p["distractor"][1] + 0.3 * np.cos(t * p["dfreq"])
        img[_mask(p["dshape"], xx - dx, yy - dy, 0.12)] = p["dcolour"]
        frames[i] = np.clip(img, 0, 255)
    return frames


def instance_cue(p):
    """The video's own cue, from its seed alone, so that its picture and its sound agree and a faulty
    positive's sound (another video's parameters) carries another: (height in [0, 1], hue in [0, 0.8])."""
    u = np.random.default_rng([p["seed"], 7]).uniform(size=2)
    return float(u[0]), 0.8 * float(u[1])  # hues short of a full turn: red and magenta stay apart


def _draw_stripe(img, yy, p):
    """A full-width stripe (any crop keeps some of it) at the cue's height, in the cue's hue."""
    height, hue = instance_cue(p)
    centre = -0.45 + 0.9 * height
    colour = 255 * np.clip(np.abs((hue * 6 + np.array([0, 4, 2])) % 6 - 3) - 1, 0, 1)  # HSV (hue, 1, 1) -> RGB
    band = np.abs(yy - centre) < 0.09
    img[band] = (1 - p["instance_cue"]) * img[band] + p["instance_cue"] * colour
    return img


def render_audio(p, rate):
    """Mono waveform (n,) float32. Class sound: a tone beating with the motion's phase. Unrelated
    sound (p['timbre'] is None): noise bursts and a chirp at a tempo of its own."""
    rng = np.random.default_rng(p["seed"] + 1)
    t = np.arange(int(round(p["seconds"] * rate))) / rate
    if p["timbre"] is None:
        tempo, f0 = rng.uniform(0.4, 3.0), rng.uniform(150, 2000)
        env = (np.sin(2 * np.pi * tempo * t + rng.uniform(0, 6.3)) > 0.3).astype(np.float64)
        chirp = np.sin(2 * np.pi * (f0 * t + rng.uniform(-200, 200) * t**2))
        wav = 0.3 * env * chirp + 0.3 * rng.normal(0, 1, t.shape) * (1 - env) * rng.uniform(0.2, 1)
    else:
        f = p["pitch"]
        ph = 2 * np.pi * f * t
        timbre = p["timbre"]
        if timbre == "sine":
            tone = np.sin(ph)
        elif timbre == "square":
            tone = sum(np.sin(k * ph) / k for k in (1, 3, 5, 7))
        elif timbre == "saw":
            tone = sum(np.sin(k * ph) / k for k in range(1, 7))
        elif timbre == "bell":
            tone = sum(np.sin(k * ph) / (i + 1) for i, k in enumerate((1, 2.76, 5.4, 8.93)))
        else:  # fm
            tone = np.sin(ph + 2.0 * np.sin(ph * 1.5))
        env = 0.5 + 0.5 * np.sin(2 * np.pi * p["freq"] * t + p["phase"])  # beats with the motion
        wav = 0.3 * p.get("class_cue", 1.0) * env**2 * tone / np.abs(tone).max()
        if p.get("instance_cue", 0.0) > 0:  # the stripe's height and hue as two pitches, 250-1000 and 1500-4000 Hz
            height, hue = instance_cue(p)
            f1, f2 = 250 * 2 ** (2 * height), 1500 * 2 ** (1.415 * hue / 0.8)
            wav = wav + 0.15 * p["instance_cue"] * (np.sin(2 * np.pi * f1 * t) + np.sin(2 * np.pi * f2 * t))
        wav = wav + 0.05 * p["noise"] * rng.normal(0, 1, t.shape)
    return np.clip(wav, -1, 1).astype(np.float32)


def write_mp4(path, frames, wav, fps, rate, gop=12, audio_codec="aac"):
    """H.264 (keyframe every `gop` frames: 12 keeps seeking cheap) + AAC (or lossless FLAC, which encodes
    about 5x faster) in an .mp4. Either may be None."""
    with av.open(str(path), "w") as c:
        if frames is not None:
            vs = c.add_stream("libx264", rate=fps, options={"preset": "ultrafast", "bf": "0"})
            vs.width, vs.height, vs.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
            vs.codec_context.gop_size = gop
        if wav is not None:
            aus = c.add_stream(audio_codec, rate=rate)
            aus.layout = "mono"
        if frames is not None:
            for img in frames:
                c.mux(vs.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
            c.mux(vs.encode())
        if wav is not None:
            frame = av.AudioFrame.from_ndarray(wav[None], format="fltp", layout="mono")
            frame.sample_rate, frame.pts = rate, 0
            c.mux(aus.encode(frame))
            c.mux(aus.encode())


def class_pitch(rng, c):
    """A video's pitch: its class's register, give or take a quarter of an octave."""
    return float(220 * 2 ** (class_signature(c)[3] * 0.75 + rng.uniform(-0.25, 0.25)))


def _video_params(rng, c, seconds, noise):
    shape, path, timbre, register = class_signature(c)
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
    path, p, audio_p, size, fps, rate, gop, cues = job
    cues = dict(cues)
    codec = cues.pop("audio_codec", "aac")
    p, audio_p = {**p, **cues}, {**audio_p, **cues}
    frames = render_video(p, size, fps) if p["shape"] is not None else None
    write_mp4(path, frames, render_audio(audio_p, rate), fps, rate, gop, codec)


def is_synthetic(folder):
    """True if this generator made `folder` (it holds the marker file)."""
    return (Path(folder) / MARKER).is_file()


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
):
    """Write the dataset described in the module docstring under `out`."""
    from media import manifest  # the scan that writes the manifest

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
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not is_synthetic(out):
        raise FileExistsError(
            f"{out} exists and was not made by synthetic.py (no {MARKER} in it): "
            f"refusing to write into it; choose a new --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("made by synthetic.py; the folder may be regenerated\n")
    t0 = time.time()
    rng = np.random.default_rng(seed)
    jobs, truth, splits = [], [], {"train": [], "test": []}
    for c in range(classes):
        name = "class{:02d}_{}_{}".format(c, *class_signature(c)[:2])
        (out / name).mkdir(parents=True, exist_ok=True)
        for split, count in (("train", train_per_class), ("test", test_per_class)):
            for k in range(count):
                rel = f"{name}/{split}_{k:03d}.mp4"
                if clips_per_source == 1:  # the stream as it always was: the same files as before sources
                    p = _video_params(rng, c, seconds, noise)
                else:
                    if k % clips_per_source == 0:  # a new source: its scene and sound character
                        source = _video_params(rng, c, seconds, noise)
                    p = _clip_of_source(rng, source, seconds, c if source_pitch == "own" else None)
                audio_p, audio_class = p, c
                if split == "train" and rng.uniform() < faulty:  # the sound of another, unseen video
                    audio_class = int(rng.integers(classes))
                    audio_p = _video_params(rng, audio_class, (p["seconds"], p["seconds"]), noise)
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
        p = {**_video_params(held_rng, c, seconds, noise), "shape": None}
        jobs.append((out / "_heldout" / f"sound_{k:04d}.mp4", p, p, size, fps, audio_rate, gop, cues))
    with Pool(workers or os.cpu_count() or 1) as processes:
        processes.map(_make_one, jobs, chunksize=8)
    for split, rels in splits.items():
        (out / f"{split}.txt").write_text("\n".join(rels) + "\n")
    with open(out / "ground_truth.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(truth[0]))
        w.writeheader()
        w.writerows(truth)
    rows = manifest.scan(out)
    manifest.write_manifest(rows, out / "manifest.csv")
    n_faulty = sum(t["faulty_audio"] for t in truth)
    print(
        f"synthetic dataset: {classes} classes, {len(splits['train'])} train / {len(splits['test'])} test "
        f"videos ({n_faulty} with unrelated audio), {len(list((out / '_heldout').iterdir()))} held-out sounds "
        f"for injection, {pool} noise files, {len(rows)} in the manifest "
        f"-> {out} ({time.time() - t0:.1f}s)"
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(p)
    generate(**vars(p.parse_args(argv)))


if __name__ == "__main__":
    main()
