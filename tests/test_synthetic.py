"""The synthetic set is honest: nothing in a faulty positive's sound alone gives it away."""
import csv

import av
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import synthetic


def audio_statistics(path, rate=22050):
    """Spectral flatness, loudness (RMS), spectral centroid and the envelope's coefficient of
    variation of a file's whole audio track: what a shortcut detector would look at."""
    with av.open(str(path)) as c:
        wav = np.concatenate([f.to_ndarray()[0] for f in c.decode(c.streams.audio[0])])
    n = 2 ** int(np.log2(len(wav)))
    spec = np.abs(np.fft.rfft(wav[:n] * np.hanning(n))) + 1e-9
    freqs = np.fft.rfftfreq(n, 1 / rate)
    env = np.abs(wav[:len(wav) // 441 * 441]).reshape(-1, 441).mean(1)  # 20 ms blocks
    return (np.exp(np.mean(np.log(spec))) / np.mean(spec), np.sqrt(np.mean(wav ** 2)),
            (freqs * spec).sum() / spec.sum(), env.std() / (env.mean() + 1e-9))


def best_auroc(x_pos, x_neg):
    """Per statistic, the AUROC of the better direction (0.5: no information, 1.0: a perfect detector)."""
    y = np.r_[np.ones(len(x_pos)), np.zeros(len(x_neg))]
    x = np.r_[np.asarray(x_pos), np.asarray(x_neg)]
    return [max(a, 1 - a) for a in (roc_auc_score(y, x[:, k]) for k in range(x.shape[1]))]


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    synthetic.generate(out, classes=4, train_per_class=24, test_per_class=0, pool=20, faulty=0.5, size=32,
                       seconds=(2.2, 2.6), seed=1)
    return out


def test_audio_statistics_cannot_tell_natural_faulty_positives_from_clean(synth):
    rows = list(csv.DictReader(open(synth / "ground_truth.csv")))
    stats = {r["path"]: audio_statistics(synth / r["path"]) for r in rows}
    faulty = [stats[r["path"]] for r in rows if r["faulty_audio"] == "1"]
    clean = [stats[r["path"]] for r in rows if r["faulty_audio"] == "0"]
    assert len(faulty) > 30 and len(clean) > 30
    aurocs = best_auroc(faulty, clean)
    assert max(aurocs) < 0.75, aurocs
    # the control: the same statistics spot the out-of-distribution _pool/ audio at once
    pool = [audio_statistics(p) for p in sorted((synth / "_pool").iterdir())]
    assert max(best_auroc(pool, clean)) > 0.95
