"""The honesty checks of a generated set, synthetic or of recordings (Sec. 5.2's conditions, and no
shortcut around the method):
- audio alone cannot tell a faulty positive from a clean one: the best AUROC of four sound statistics
  (flatness, loudness, centroid, envelope variation) stays below 0.75, for the natural faults and for
  the held-out sounds that injection uses;
- nor can a sound's novelty: with half the training sounds replaced by held-out ones, as injection at
  50% does, the distance of each sound to its nearest neighbour in the set (by spectrum, by rhythm,
  by both: the best of three) tells the injected ones from the natural ones with an AUROC below 0.75
  (--share: the injected share, 0.25 for make demo's level).
  On a set whose clips come in sources, a natural sound has its source's siblings nearby and a
  held-out one may not: a shortcut a weight could take without the cross-modal mechanism under test;
- injected audio comes from neither split: no `_heldout/` file is listed in train.txt or test.txt;
- train and test share no video, and no source (ground_truth.csv's `source`, where the set has sources);
- on a set of recordings (tools/recorded.py): no recording is heard in both splits, and no group of
  recordings (recordings.csv: takes of one drum) is in two of train, test and the held-out pool.

    python -m lab.honesty data/synth2000              # prints each check; exit 1 if one fails
    python -m lab.honesty data/synth_src2p --share 0.25   # make demo's set at make demo's level
    python -m lab.honesty data/drums --share 0.25         # the drum recordings (tools/recorded.py), the same level

tests/test_synthetic.py runs the same functions on a small generated set.
"""

import argparse
import csv
import random
import sys
from pathlib import Path

import av
import numpy as np
from scipy.spatial.distance import cdist
from sklearn.metrics import roc_auc_score

LIMIT = 0.75


def _waveform(path):
    """A file's whole first audio channel and its sample rate."""
    with av.open(str(path)) as c:
        stream = c.streams.audio[0]
        return np.concatenate([f.to_ndarray()[0] for f in c.decode(stream)]), stream.rate


def audio_statistics(path, rate=22050):
    """Spectral flatness, loudness (RMS), spectral centroid and the envelope's coefficient of
    variation of a file's whole audio track: what a shortcut detector would look at."""
    wav, _ = _waveform(path)
    n = 2 ** int(np.log2(len(wav)))
    spec = np.abs(np.fft.rfft(wav[:n] * np.hanning(n))) + 1e-9
    freqs = np.fft.rfftfreq(n, 1 / rate)
    env = np.abs(wav[: len(wav) // 441 * 441]).reshape(-1, 441).mean(1)  # 20 ms blocks
    return (
        np.exp(np.mean(np.log(spec))) / np.mean(spec),
        np.sqrt(np.mean(wav**2)),
        (freqs * spec).sum() / spec.sum(),
        env.std() / (env.mean() + 1e-9),
    )


BANDS, RHYTHMS = 24, 12
VIEWS = {"spectrum": slice(0, BANDS), "rhythm": slice(BANDS, BANDS + RHYTHMS), "both": slice(0, BANDS + RHYTHMS)}


def sound_descriptor(path, bands=BANDS, rhythms=RHYTHMS):
    """What makes two sounds alike to a listener who ignores the picture: the log energy of the whole
    track in `bands` log-spaced frequency bands (pitch and timbre), and of its 20-ms envelope's
    modulation in `rhythms` log-spaced bands from 0.5 to 12 Hz (tempo: what a source's clips share)."""
    wav, rate = _waveform(path)
    spec = np.abs(np.fft.rfft(wav)) ** 2  # (F,)
    freqs = np.fft.rfftfreq(len(wav), 1 / rate)
    block = max(1, rate // 50)
    env = np.abs(wav[: len(wav) // block * block]).reshape(-1, block).mean(1)  # (blocks,) 20 ms each
    mod = np.abs(np.fft.rfft(env - env.mean())) ** 2  # (blocks // 2 + 1,)
    mod_freqs = np.fft.rfftfreq(len(env), block / rate)

    def log_bands(power, f, lo, hi, k):
        edges = np.geomspace(lo, hi, k + 1)
        return [np.log(power[(f >= a) & (f < b)].sum() + 1e-12) for a, b in zip(edges[:-1], edges[1:])]

    mods = np.array(log_bands(mod, mod_freqs, 0.5, 12.0, rhythms))
    return np.r_[log_bands(spec, freqs, 50.0, rate / 2, bands), mods - np.log(mod.sum() + 1e-12)]  # (bands + rhythms,)


def novelty_auroc(natural, held, share=0.5, seed=0):
    """Inject as train.py does (a share of the training sounds replaced, each by its own held-out
    sound), then score every sound of the resulting set by the distance to its nearest other sound
    (descriptors standardised): the AUROC of that score, injected against natural, in the better
    direction. natural: (N, D) descriptors of the training sounds; held: (M, D) of the pool."""
    natural, held = np.asarray(natural, float), np.asarray(held, float)
    rng = np.random.default_rng(seed)
    k = min(int(round(share * len(natural))), len(held))
    order = rng.permutation(len(natural))
    x = np.r_[natural[order[k:]], held[rng.permutation(len(held))[:k]]]  # (N, D): the set after injection
    y = np.r_[np.zeros(len(natural) - k), np.ones(k)]
    z = (x - x.mean(0)) / (x.std(0) + 1e-9)
    dist = cdist(z, z)  # (N, N)
    np.fill_diagonal(dist, np.inf)
    a = roc_auc_score(y, dist.min(1))
    return max(a, 1 - a)


def best_auroc(x_pos, x_neg):
    """Per statistic, the AUROC of the better direction (0.5: no information, 1.0: a perfect detector)."""
    y = np.r_[np.ones(len(x_pos)), np.zeros(len(x_neg))]
    x = np.r_[np.asarray(x_pos), np.asarray(x_neg)]
    return [max(a, 1 - a) for a in (roc_auc_score(y, x[:, k]) for k in range(x.shape[1]))]


def check(root, n=300, seed=0, share=0.5):
    """{check: (value, passed)} for a generated set; at most n files of each kind are read; the novelty check
    injects `share` of the training sounds."""
    root = Path(root)
    splits = {s: set((root / f"{s}.txt").read_text().split()) for s in ("train", "test")}
    rows = [r for r in csv.DictReader(open(root / "ground_truth.csv")) if r["path"] in splits["train"]]
    rng = random.Random(seed)

    def pick(items):
        return rng.sample(items, min(n, len(items)))

    faulty = pick([root / r["path"] for r in rows if r["faulty_audio"] == "1"])
    clean = pick([root / r["path"] for r in rows if r["faulty_audio"] == "0"])
    held = pick(sorted((root / "_heldout").iterdir()))
    stats = {p: audio_statistics(p) for p in faulty + clean + held}
    natural = max(best_auroc([stats[p] for p in faulty], [stats[p] for p in clean]))
    pool = max(best_auroc([stats[p] for p in held], [stats[p] for p in clean]))
    # Novelty needs every training sound: a neighbour left out of a sample would look like novelty.
    train = [root / r["path"] for r in rows]
    pool_files = sorted((root / "_heldout").iterdir())[: len(train)]
    natural_d = np.array([sound_descriptor(p) for p in train])  # (N, BANDS + RHYTHMS)
    held_d = np.array([sound_descriptor(p) for p in pool_files])  # (M, BANDS + RHYTHMS)
    novelty = max(novelty_auroc(natural_d[:, v], held_d[:, v], share, seed=seed) for v in VIEWS.values())
    shared = len(splits["train"] & splits["test"])
    leaked = sum(1 for s in splits.values() for line in s if line.startswith("_heldout/"))
    return {
        **crossings(root),
        f"natural faulty vs clean, best audio-only AUROC ({len(faulty)} vs {len(clean)} files)": (
            natural,
            natural < LIMIT,
        ),
        f"held-out pool vs clean, best audio-only AUROC ({len(held)} files)": (pool, pool < LIMIT),
        f"held-out vs natural at {share:.0%} injected, nearest-neighbour novelty AUROC ({len(train)} sounds)": (
            novelty,
            novelty < LIMIT,
        ),
        "videos in both train.txt and test.txt": (shared, shared == 0),
        "_heldout/ files in train.txt or test.txt": (leaked, leaked == 0),
    }


def crossings(root):
    """{check: (count, passed)}: the sources, recordings and groups of recordings that two splits share,
    for the kinds the set names (none for a set of single clips)."""
    rows = list(csv.DictReader(open(root / "ground_truth.csv")))
    out = {}
    for column, what in (("source", "sources with clips"), ("recording", "recordings heard")):
        if rows and column in rows[0]:
            heard = {s: {r[column] for r in rows if r["split"] == s} for s in ("train", "test")}
            both = len(heard["train"] & heard["test"])
            out[f"{what} in train and test"] = (both, both == 0)
    if (root / "recordings.csv").is_file():
        groups = {}
        for r in csv.DictReader(open(root / "recordings.csv")):
            groups.setdefault(r["group"], set()).add(r["split"])
        split = sum(len(s) > 1 for s in groups.values())
        out[f"groups of recordings in two of train, test and _heldout/ ({len(groups)} groups)"] = (split, split == 0)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", help="a set made by tools/synthetic.py or tools/recorded.py")
    p.add_argument("--n", type=int, default=300, help="files of each kind to read")
    p.add_argument("--share", type=float, default=0.5, help="the injected share of the novelty check (0 < share < 1)")
    args = p.parse_args(argv)
    if not 0 < args.share < 1:
        p.error(f"--share {args.share}: expected a share strictly between 0 and 1")
    if not (Path(args.root) / "ground_truth.csv").exists():
        raise SystemExit(f"lab.honesty: {args.root} has no ground_truth.csv: not a set made by tools/synthetic.py")
    results = check(args.root, args.n, share=args.share)
    for name, (value, ok) in results.items():
        print(
            f"{'ok  ' if ok else 'FAIL'} {name}: {value:.3f}"
            if isinstance(value, float)
            else f"{'ok  ' if ok else 'FAIL'} {name}: {value}"
        )
    sys.exit(0 if all(ok for _, ok in results.values()) else 1)


if __name__ == "__main__":
    main()
