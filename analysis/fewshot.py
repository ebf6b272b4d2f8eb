"""The paper's few-shot protocol (Sec. 6, Table 5): a one-vs-all linear SVM (C=1) trained on the raw
features of n videos per class, top-1 accuracy on the test split, mean +- std over 50 trials.

Its own file, importing neither torch nor this project's data code, because the trials run in
worker processes: a worker that imported evaluate.py would start torch, torchvision and PyAV first
(BENCHMARKS.md, "Evaluation"), which cost more than the trials it ran.

    python evaluate.py fewshot CKPT --jobs 2        # evaluate.py calls few_shot()
"""

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike


def svm_trial(
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    n: int,
    trial_seed: int,
    standardise: bool = False,
) -> float:
    """One trial: n train videos per class drawn with its own seed, a one-vs-all linear SVM (C=1),
    top-1 on the test split. Seeded by itself, so trials give the same numbers in any order."""
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    rng = np.random.default_rng(trial_seed)
    pick = np.concatenate(
        [
            rng.choice(np.flatnonzero(train_y == c), min(n, (train_y == c).sum()), replace=False)
            for c in np.unique(train_y)
        ]
    )  # (n * classes,)
    x, xt = train_x[pick], test_x  # x: (n * classes, D), xt: (T, D)
    if standardise:
        scaler = StandardScaler().fit(x)
        x, xt = scaler.transform(x), scaler.transform(xt)
    # liblinear's coordinate descent shuffles with random_state; left at None it draws from numpy's
    # global stream, and a trial would depend on the trials run before it in the same process
    svm = LinearSVC(C=1.0, multi_class="ovr", max_iter=10000, random_state=trial_seed).fit(x, train_y[pick])
    return float((svm.predict(xt) == test_y).mean())


def cap_shots(train_y: ArrayLike, shots: Sequence[int]) -> tuple[list[int], dict[str, int]]:
    """The shots that can be run on these training labels: n beyond the fewest training videos of a class
    would draw every video of that class in every trial (an n-shot number that is not, with an SD of 0), so
    it is capped there. Returns (the shots to run, {asked: capped at} for each capped one)."""
    counts = np.bincount(np.asarray(train_y))
    fewest = int(counts[counts > 0].min())
    capped = {str(n): fewest for n in shots if n > fewest}
    return sorted({min(n, fewest) for n in shots}), capped


def few_shot(
    train_x: ArrayLike,
    train_y: ArrayLike,
    test_x: ArrayLike,
    test_y: ArrayLike,
    shots: Sequence[int] = (1, 5, 20),
    trials: int = 50,
    seed: int = 0,
    standardise: bool = False,
    jobs: int = 1,
) -> dict[int, tuple[float, float]]:
    """{n: (mean, std) top-1} over seeded trials for each n in shots; arrays or CPU tensors.
    standardise=True (not the paper's) scales the features by statistics of the n-shot samples.

    jobs > 1 runs the trials in that many processes (liblinear is single-threaded). Processes, not
    threads: liblinear seeds one global C generator, so threads would race on it and change the
    numbers. The processes are started once and reused by later calls (joblib's loky executor)."""
    from joblib import Parallel, delayed

    train_x, train_y, test_x, test_y = (np.asarray(t) for t in (train_x, train_y, test_x, test_y))
    jobs = max(1, min(jobs, trials))
    run = Parallel(n_jobs=jobs) if jobs > 1 else None
    out = {}
    for n in shots:
        tasks = [
            delayed(svm_trial)(train_x, train_y, test_x, test_y, n, seed * 1000 + t, standardise) for t in range(trials)
        ]
        accs = run(tasks) if run else [f(*a, **k) for f, a, k in tasks]  # (trials,)
        out[n] = (float(np.mean(accs)), float(np.std(accs)))
    return out
