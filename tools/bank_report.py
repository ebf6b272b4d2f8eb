"""make demo's report to train.main: what the memory bank knows each epoch, the per-epoch numbers its figures draw
(tools/figures.py), and the drift warning of the soft-target stages. Never on train.py's own path: it reads the
labels and the known faults, so it is logged, never fed back into training.

    bank_report   against the ground truth: the bank AUROC of the known faults, the scores' histogram (clean and
                  faulty), the 1-NN class agreement of the video memories (knn_class), the share of each video
                  memory's 5 nearest audio memories of its class (xmodal_class), a clean (own_audio) or faulty
                  (own_audio_faulty) instance's own audio memory the nearest, and CCP's and the oracle's soft-target
                  mass on same-class candidates beside chance (soft_share, eqs. (10)-(14))
    bank_signals  label-free, so they work on a user's own data: agreement, the share of other slots whose video
                  memory the audio memory abar_i ranks below its own (0.5 chance), the ranking CCP's swapped term
                  reads; positive_mass, S(i|i) at lam = 1 for the run's strategy (logged, not warned on)
    drift_warning a soft-target stage's agreement below its start by more than MARGIN for PATIENCE epochs: the
                  soft targets may be drifting (on real recordings Soft-xID then ended 16 points below xID)

The start is the last xID epoch's record, or for a branch off a warm-up (--init) the bank it was given, measured
before its first step (its first record's drift_start). MARGIN 0.02 and PATIENCE 2 were chosen, not fitted: on the
demo screen's branches agreement rose from 0.74-0.80 to 0.77-0.86 (lab/results/ccp_drift/RESULTS.md: 2 of 3 drifting
runs caught, 1 false alarm). Every draw uses a generator of its own: training's random stream stays as it was.

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m tools.bank_report [train.py options]
"""

import sys

import torch

from losses import VARIANTS, soft_targets
from memory_bank import scores_auroc

MARGIN, PATIENCE = 0.02, 2


def some_slots(n, max_items, seed=0):
    """The same `max_items` of n slots every epoch. -> (max_items,) long"""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:max_items]


def draw_candidates(n, max_items, num_negatives, seed=0):
    """As MemoryBank.sample draws them: at most `max_items` anchors in column 0, each with `num_negatives` others
    uniformly with replacement, never itself. -> (A, 1+K) long"""
    g = torch.Generator().manual_seed(seed)
    anchors = torch.randperm(n, generator=g)[:max_items]  # (A,)
    neg = torch.randint(0, n - 1, (len(anchors), num_negatives), generator=g)  # (A, K)
    return torch.cat([anchors[:, None], neg + (neg >= anchors[:, None]).long()], 1)


def soft_targets_at(video, audio, cand, strategy, tau_s, tau_t, labels=None, chunk=16):
    """losses.soft_targets at lam = 1 for candidates cand (A, 1+K) of memories (N, D) -> S_v, S_a (A, 1+K).
    `chunk` anchors at a time: the same rows bit for bit, without (A, 1+K, D) copies of the bank (5x the time)."""
    parts = []
    for c in cand.split(chunk):
        vbar, abar = (m.index_select(0, c.flatten()).view(*c.shape, -1) for m in (video, audio))  # (c, 1+K, D)
        at = labels[c] if labels is not None else None
        parts.append(soft_targets(vbar, abar, strategy, lam=1.0, tau_s=tau_s, tau_t=tau_t, labels=at))
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


@torch.no_grad()
def bank_structure(video, audio, labels, faulty, k=5, max_items=4096, seed=0):
    """Unit-norm memories (N, D), labels (N,), faulty (N,) bool -> knn_class, xmodal_class, own_audio(_faulty)."""
    n = video.shape[0]
    if n > max_items:
        subset = some_slots(n, max_items, seed)
        video, audio, labels, faulty = video[subset], audio[subset], labels[subset], faulty[subset]
        n = max_items
    video, audio, labels, faulty = video.float().cpu(), audio.float().cpu(), labels.cpu(), faulty.cpu()
    eye = torch.eye(n, dtype=torch.bool)
    vv = (video @ video.T).masked_fill(eye, -2.0)  # (N, N), self left out
    same = labels[:, None] == labels[None, :]  # (N, N)
    va = video @ audio.T  # (N, N): video memory i against every audio memory
    own = va.argmax(1) == torch.arange(n)
    nearest = va.masked_fill(eye, -2.0).topk(min(k, n - 1), dim=1).indices  # (N, k)
    clean = ~faulty
    return {
        "knn_class": float(same[torch.arange(n), vv.argmax(1)].float().mean()),
        "xmodal_class": float(same.gather(1, nearest).float().mean()),
        "own_audio": float(own[clean].float().mean()) if clean.any() else None,
        "own_audio_faulty": float(own[faulty].float().mean()) if faulty.any() else None,
    }


def score_histogram(scores, faulty, bins=40):
    """Clean and faulty counts on `bins` bins over [mu - 4 sigma, mu + 4 sigma] cut to the scores' range."""
    s = scores.float().cpu()
    mu, sigma = float(s.mean()), float(s.std()) if len(s) > 1 else 0.0
    lo, hi = max(float(s.min()), mu - 4 * sigma), min(float(s.max()), mu + 4 * sigma)
    if hi <= lo:
        lo, hi = lo - 1e-3, hi + 1e-3

    def count(x):  # values out of [lo, hi] are not counted
        return torch.histc(x, bins=bins, min=lo, max=hi).int().tolist()

    return {"lo": lo, "hi": hi, "clean": count(s[~faulty]), "faulty": count(s[faulty])}


@torch.no_grad()
def soft_target_share(video, audio, labels, strategies=("ccp", "oracle"), num_negatives=256, tau_s=0.02, tau_t=0.07):
    """For 512 anchors of `num_negatives` candidates each: the share of each strategy's S_v(j|i), j != i, on
    candidates of the anchor's class, pooled over anchors, and `chance`, the same-class share of the candidates."""
    video, audio, labels = video.float().cpu(), audio.float().cpu(), labels.cpu()
    cand = draw_candidates(video.shape[0], 512, num_negatives)
    same = (labels[cand[:, 1:]] == labels[cand[:, :1]]).float()  # (A, K)
    out = {"chance": float(same.mean())}
    for strategy in strategies:
        mass = soft_targets_at(video, audio, cand, strategy, tau_s, tau_t, labels)[0][:, 1:]  # (A, K)
        out[strategy] = float((mass * same).sum() / mass.sum().clamp_min(1e-12))
    return out


def bank_report(bank, labels, faulty, tau_s=0.02, tau_t=0.07):
    """The ground-truth measures of a MemoryBank; labels, faulty: (N,) on the CPU."""
    video, audio, scores = bank.video.cpu(), bank.audio.cpu(), bank.scores().cpu()
    return {
        "faulty_auroc": scores_auroc(scores, faulty),
        "score_hist": score_histogram(scores, faulty),
        **bank_structure(video, audio, labels, faulty),
        "soft_share": soft_target_share(video, audio, labels, tau_s=tau_s, tau_t=tau_t),
    }


@torch.no_grad()
def agreement(video, audio, max_items=4096):
    """The mean over slots i of the share of other slots j with abar_i . vbar_j < abar_i . vbar_i."""
    if video.shape[0] > max_items:
        subset = some_slots(video.shape[0], max_items)
        video, audio = video[subset], audio[subset]
    video, audio = video.float().cpu(), audio.float().cpu()
    av = audio @ video.T  # (M, M)
    return float((av < av.diagonal()[:, None]).sum(1).float().mean() / (video.shape[0] - 1))


@torch.no_grad()
def positive_mass(video, audio, strategy, num_negatives, tau_s, tau_t, max_items=512):
    """The mean of S_v(i|i) and S_a(i|i) at lam = 1 over at most `max_items` anchors; None for the oracle (labels)."""
    if strategy == "oracle":
        return None
    video, audio = video.float().cpu(), audio.float().cpu()
    S_v, S_a = soft_targets_at(
        video, audio, draw_candidates(video.shape[0], max_items, num_negatives), strategy, tau_s, tau_t
    )
    return float(0.5 * (S_v[:, 0] + S_a[:, 0]).mean())


def bank_signals(bank, cfg):
    """agreement and positive_mass, with the run's soft targets, K, tau_s and tau_t."""
    video, audio = bank.video.cpu(), bank.audio.cpu()
    mass = positive_mass(video, audio, cfg.soft_targets, cfg.num_negatives, cfg.tau_s, cfg.tau_t)
    return {"agreement": agreement(video, audio), "positive_mass": mass}


def drift_warning(records, margin=MARGIN, patience=PATIENCE):
    """The warning line when the last `patience` records are of a soft-target stage, after its start, with
    agreement below the start's by more than `margin`; else None. Logs without agreement never warn."""
    soft = [VARIANTS[r["stage"]].soft for r in records]
    if True not in soft:
        return None
    first = soft.index(True)
    start, watched = records[first].get("drift_start"), records[first:]
    if start is None and first > 0:
        start = records[first - 1]  # the last xID epoch: the bank the soft targets started from
    elif start is None:
        start, watched = records[first], records[first + 1 :]  # resumed inside its first epoch by an older train.py
    reference, tail = start.get("agreement"), watched[-patience:]
    if reference is None or len(tail) < patience or not all(VARIANTS[r["stage"]].soft for r in tail):
        return None
    if not all(r.get("agreement") is not None and r["agreement"] < reference - margin for r in tail):
        return None
    epochs = ", ".join(f"{r['agreement']:.3f} (epoch {r['epoch']})" for r in tail)
    return (
        f"train.py: warning: the bank's cross-modal agreement (label-free, tools/bank_report.py) is {epochs}, "
        f"below {reference:.3f} at the soft-target stage's start by more than {margin}: the soft targets may "
        f"be drifting (README: When soft targets help and when they hurt); compare an xID branch from the same warm-up"
    )


class BankReport:
    """train.main's `report` (rank 0): each record gets bank_report and bank_signals, and the warning's line is
    printed when it starts to fire."""

    def __init__(self, cfg):
        self.cfg, self.start = cfg, None

    def __call__(self, record, bank, dataset, history):
        cfg = self.cfg
        if record is None:  # before the first epoch: a fresh branch measures the bank it was given
            if not history and cfg.warmup_epochs == 0 and VARIANTS[cfg.loss].soft:
                self.start = bank_signals(bank, cfg)
            return
        record.update(bank_report(bank, dataset.labels, dataset.faulty, cfg.tau_s, cfg.tau_t))
        record.update(bank_signals(bank, cfg))
        if record["epoch"] == 0 and self.start is not None:
            record["drift_start"] = self.start
        records = [*history, record]
        if (line := drift_warning(records)) and not drift_warning(records[:-1]):
            # branches trained side by side share a terminal: the line names its run
            print(line.replace("warning:", f"warning: {cfg.out} ({cfg.loss}):", 1), file=sys.stderr)


if __name__ == "__main__":  # train.py with the report in its log: the demo's warm-up under torchrun
    import train
    from config import parse_config

    cfg = parse_config()
    train.main(cfg, report=BankReport(cfg))
