"""The synthetic set's renderer: one video's parameters -> its frames, its sound and the .mp4 that
holds them (tools/synthetic.py draws the parameters and assembles the set; its docstring says what the
picture and the sound are).

Two families of classes share this one renderer. `pretrain`: the shapes, paths and timbres of every
pre-training set. `transfer`: shapes and timbres that no pre-training class has (the same paths, the
same rendering), for the transfer endpoint that stands in for the paper's UCF101 and HMDB51 (Sec. 5.1:
"classes never seen" in pre-training):

    python -m tools.synthetic --out data/transfer --family transfer --classes 5 --train-per-class 20 \
        --test-per-class 20 --heldout 0 --pool 0

A third kind of sound is recorded, not synthesised: with p["recording"] (a sound file) and p["playback"]
(its speed, a pitch factor), render_audio strikes that recording once per cycle of the motion, where the
synthetic tone peaks, and the rest (class cue, instance cue, noise) is as for a tone: tools/recorded.py's
sets of real sounds.
"""

from functools import cache

import av
import numpy as np

SHAPES = ("disk", "square", "triangle", "ring", "cross", "diamond", "frame", "saltire", "bar", "half")
PATHS = ("horizontal", "vertical", "circle", "diagonal", "pulse")
TIMBRES = ("sine", "square", "saw", "bell", "fm")
# The transfer family: five shapes and five timbres of its own, so that a transfer class shares neither
# its picture's shape nor its sound's timbre with any pre-training class (tests/test_synthetic.py).
TRANSFER_SHAPES = ("star", "ellipse", "arrow", "crescent", "hourglass")
TRANSFER_TIMBRES = ("organ", "vibrato", "pluck", "ringmod", "breathy")
FAMILIES = {"pretrain": (SHAPES, TIMBRES), "transfer": (TRANSFER_SHAPES, TRANSFER_TIMBRES)}


def class_signature(c, family="pretrain"):
    """Class c = a + 5 b -> (shape, path, timbre, register) = (c mod #shapes, a + b mod 5, a, b).
    Up to 10 pre-training classes (5 transfer classes) each has a shape of its own, a cue visible in
    every frame, as real action classes are mostly told apart by appearance; beyond that shapes repeat
    and the path (motion) and sound tell such classes apart. Paths and timbres are each shared by
    several classes."""
    shapes, timbres = FAMILIES[family]
    a, b = c % 5, c // 5
    return shapes[c % len(shapes)], PATHS[(a + b) % 5], timbres[a], b


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
    if shape == "half":  # the upper half of a disk
        return (d < r) & (dy < 0)
    if shape == "star":  # five points
        return d < r * (0.6 + 0.4 * np.cos(5 * np.arctan2(dy, dx)))
    if shape == "ellipse":  # lying, twice as wide as high
        return (dx / r) ** 2 + (dy / (0.45 * r)) ** 2 < 1
    if shape == "arrow":  # pointing right: a head and a shaft
        return ((dx > 0) & (dx < r) & (ay < (r - dx) * 0.8)) | ((dx <= 0) & (dx > -r) & (ay < r / 5))
    if shape == "crescent":  # a disk less a disk shifted right
        return (d < r) & (np.hypot(dx - 0.45 * r, dy) > 0.8 * r)
    if shape == "hourglass":  # two triangles meeting at the centre
        return (ay < r) & (ax < ay * 0.85)
    raise ValueError(f"shape {shape!r}: not one of the renderer's")


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
    elif p.get("recording"):  # a real sound, struck where the tone would peak (tools/recorded.py)
        wav = 0.3 * p.get("class_cue", 1.0) * struck(p, t, rate)
        wav = _with_cues(wav, p, t, rng)
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
        elif timbre == "fm":
            tone = np.sin(ph + 2.0 * np.sin(ph * 1.5))
        elif timbre == "organ":  # octaves only
            tone = sum(np.sin(k * ph) for k in (1, 2, 4, 8))
        elif timbre == "vibrato":  # a sine whose pitch wavers by 3% six times a second
            tone = np.sin(ph + 0.03 * f / 6 * np.sin(2 * np.pi * 6 * t))
        elif timbre == "pluck":  # many harmonics, falling fast
            tone = sum(np.sin(k * ph) / k**2 for k in range(1, 11))
        elif timbre == "ringmod":  # inharmonic: the tone times one at 1.41 its pitch
            tone = np.sin(ph) * (0.5 + np.sin(1.41 * ph))
        elif timbre == "breathy":  # a sine in noise that follows its own waveform
            tone = np.sin(ph) * (1 + 0.8 * rng.normal(0, 1, t.shape))
        else:
            raise ValueError(f"timbre {timbre!r}: not one of the renderer's")
        env = 0.5 + 0.5 * np.sin(2 * np.pi * p["freq"] * t + p["phase"])  # beats with the motion
        wav = 0.3 * p.get("class_cue", 1.0) * env**2 * tone / np.abs(tone).max()
        wav = _with_cues(wav, p, t, rng)
    return np.clip(wav, -1, 1).astype(np.float32)


def _with_cues(wav, p, t, rng):
    """A class sound with the video's instance cue (if any) and the noise added: the same for a tone and
    for a recording."""
    if p.get("instance_cue", 0.0) > 0:  # the stripe's height and hue as two pitches, 250-1000 and 1500-4000 Hz
        height, hue = instance_cue(p)
        f1, f2 = 250 * 2 ** (2 * height), 1500 * 2 ** (1.415 * hue / 0.8)
        wav = wav + 0.15 * p["instance_cue"] * (np.sin(2 * np.pi * f1 * t) + np.sin(2 * np.pi * f2 * t))
    return wav + 0.05 * p["noise"] * rng.normal(0, 1, t.shape)


RING_SECONDS = 2.0  # a strike sounds for at most this long (cymbals ring for 12 s): 1-4 strikes overlap


@cache  # each process of the pool decodes a recording once, however many clips use it
def recording(path, rate):
    """A sound file as (n,) float32 mono at `rate`: from its onset (the first sample above 2% of its peak,
    so that the strike falls on the beat), at most RING_SECONDS, peak 1, the last 20 ms faded out.
    Raises ValueError naming the file if it cannot be decoded or is silent."""
    try:
        with av.open(str(path)) as c:
            resample = av.AudioResampler(format="flt", layout="mono", rate=rate)
            parts = [f.to_ndarray().reshape(-1) for frame in c.decode(audio=0) for f in resample.resample(frame)]
            parts += [f.to_ndarray().reshape(-1) for f in resample.resample(None)]  # what the resampler holds
    except (av.error.FFmpegError, IndexError, ValueError) as err:  # IndexError: no audio stream
        raise ValueError(f"{path}: not a readable sound file ({err})") from None
    wav = np.concatenate(parts) if parts else np.zeros(0, np.float32)  # (n,)
    peak = float(np.abs(wav).max()) if len(wav) else 0.0
    if peak < 1e-4:
        raise ValueError(f"{path}: silent (peak {peak:.1e}), nothing to strike")
    onset = int(np.argmax(np.abs(wav) > 0.02 * peak))
    wav = wav[onset : onset + int(RING_SECONDS * rate)] / peak
    fade = min(len(wav), int(0.02 * rate))
    wav[len(wav) - fade :] *= np.linspace(1, 0, fade, dtype=np.float32)
    return wav


def struck(p, t, rate):
    """p["recording"] played at speed p["playback"] (1.1: 10% higher and shorter) once per cycle of the
    motion, where render_video's path is at its extreme and the synthetic tone's envelope peaks (phase
    pi/2), strikes that began before the clip ringing into it; peak 1. t: (n,) sample times -> (n,)."""
    sample = recording(p["recording"], rate)  # (m,)
    speed = p.get("playback", 1.0)
    sample = np.interp(np.arange(0, len(sample) - 1, speed), np.arange(len(sample)), sample)  # (m / speed,)
    period = 1 / p["freq"]
    first = ((np.pi / 2 - p["phase"]) / (2 * np.pi * p["freq"])) % period  # the first strike at or after 0
    wav = np.zeros(len(t))
    for when in np.arange(first - period * np.ceil(len(sample) / rate / period), t[-1] + 1 / rate, period):
        k = int(round(when * rate))  # the strike's first sample; negative: it began before the clip
        part = sample[max(0, -k) : max(0, len(t) - k)]
        wav[max(0, k) : max(0, k) + len(part)] += part
    return wav / max(float(np.abs(wav).max()), 1e-9)


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
