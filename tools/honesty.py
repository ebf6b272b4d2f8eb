"""The honesty checks of a synthetic set (Sec. 5.2's conditions, and no shortcut around the method):
- audio alone cannot tell a faulty positive from a clean one: the best AUROC of four sound statistics
  (flatness, loudness, centroid, envelope variation) stays below 0.75, for the natural faults and for
  the held-out sounds that injection uses;
- injected audio comes from neither split: no `_heldout/` file is listed in train.txt or test.txt;
- train and test share no video.

    python -m tools.honesty data/synth2000        # prints each check; exit 1 if one fails

tests/test_synthetic.py runs the same functions on a small generated set.
"""

import argparse
import csv
import random
import sys
from pathlib import Path

import av
import numpy as np
from sklearn.metrics import roc_auc_score

LIMIT = 0.75


def audio_statistics(path, rate=22050):
    """Spectral flatness, loudness (RMS), spectral centroid and the envelope's coefficient of
    variation of a file's whole audio track: what a shortcut detector would look at."""
    with av.open(str(path)) as c:
        wav = np.concatenate([f.to_ndarray()[0] for f in c.decode(c.streams.audio[0])])
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


def best_auroc(x_pos, x_neg):
    """Per statistic, the AUROC of the better direction (0.5: no information, 1.0: a perfect detector)."""
    y = np.r_[np.ones(len(x_pos)), np.zeros(len(x_neg))]
    x = np.r_[np.asarray(x_pos), np.asarray(x_neg)]
    return [max(a, 1 - a) for a in (roc_auc_score(y, x[:, k]) for k in range(x.shape[1]))]


def check(root, n=300, seed=0):
    """{check: (value, passed)} for a generated set; at most n files of each kind are read."""
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
    shared = len(splits["train"] & splits["test"])
    leaked = sum(1 for s in splits.values() for line in s if line.startswith("_heldout/"))
    return {
        f"natural faulty vs clean, best audio-only AUROC ({len(faulty)} vs {len(clean)} files)": (
            natural,
            natural < LIMIT,
        ),
        f"held-out pool vs clean, best audio-only AUROC ({len(held)} files)": (pool, pool < LIMIT),
        "videos in both train.txt and test.txt": (shared, shared == 0),
        "_heldout/ files in train.txt or test.txt": (leaked, leaked == 0),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", help="a set made by tools/synthetic.py")
    p.add_argument("--n", type=int, default=300, help="files of each kind to read")
    args = p.parse_args(argv)
    if not (Path(args.root) / "ground_truth.csv").exists():
        raise SystemExit(f"tools.honesty: {args.root} has no ground_truth.csv: not a set made by tools/synthetic.py")
    results = check(args.root, args.n)
    for name, (value, ok) in results.items():
        print(
            f"{'ok  ' if ok else 'FAIL'} {name}: {value:.3f}"
            if isinstance(value, float)
            else f"{'ok  ' if ok else 'FAIL'} {name}: {value}"
        )
    sys.exit(0 if all(ok for _, ok in results.values()) else 1)


if __name__ == "__main__":
    main()
