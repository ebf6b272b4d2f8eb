"""How train.py feeds the memory bank into eq. (17): train.objective against the same objective put
together by hand from losses.py (which bank statistics eq. (6) receives, the oracle's and the soft
targets' inputs), and train.train_step's order (the loss from the old memory, then the EMA update).
These catch wrong wiring that the equation tests cannot; mutation testing measures it (tests/README.md,
"Mutation testing")."""

import pytest
import torch
import torch.nn.functional as F

import train
from augment import ClipAugment, ClipSpec
from config import parse_config
from losses import robust_xid_loss, sample_weights, soft_targets
from memory_bank import MemoryBank
from model import AVModel

N, B, D = 40, 6, 8
# Every knob distinct and away from its default, so that a swapped or dropped argument shows.
FLAGS = [
    "--preset",
    "demo",
    "--num-negatives",
    "13",
    "--tau",
    "0.11",
    "--tau-s",
    "0.05",
    "--tau-t",
    "0.3",
    "--lam",
    "0.35",
    "--delta",
    "0.4",
    "--kappa",
    "0.7",
    "--w-min",
    "0.15",
]


def setting(soft_targets_strategy="ccp"):
    """A bank whose scores spread (some slots agree across modalities, some do not), a batch of
    slots that is not 0..B-1, embeddings near their memories, ground truth with injected slots."""
    g = torch.Generator().manual_seed(3)
    bank = MemoryBank(N, dim=D, seed=1)
    agree = torch.rand(N, 1, generator=g)  # (N, 1) how much a slot's audio memory follows its video one
    bank.audio.copy_(F.normalize(agree * bank.video + (1 - agree) * bank.audio, dim=1))
    idx = torch.tensor([3, 17, 8, 29, 11, 36])  # (B,)
    v = F.normalize(bank.video[idx] + 0.7 * torch.randn(B, D, generator=g), dim=1).requires_grad_()  # (B, D)
    a = F.normalize(bank.audio[idx] + 0.7 * torch.randn(B, D, generator=g), dim=1).requires_grad_()  # (B, D)
    cfg = parse_config(FLAGS + ["--soft-targets", soft_targets_strategy])
    truth = {"labels": torch.arange(N) % 3, "injected": torch.isin(torch.arange(N), torch.tensor([3, 8, 20, 36]))}
    return v, a, idx, bank, cfg, truth


def by_hand(v, a, idx, bank, cfg, truth, stage, cand):
    """eq. (17) as the paper and losses.py define it, with the bank's own candidates `cand`."""
    vbar, abar = bank.video[cand], bank.audio[cand]  # (B, 1+K, D) each
    scores = (bank.video * bank.audio).sum(1)  # (N,)
    weights = None
    if stage in ("weighted", "robust"):  # eq. (6): the batch's scores against the whole bank's statistics
        weights = sample_weights(scores[idx], scores.mean(), scores.std(), cfg.delta, cfg.kappa, cfg.w_min)  # (B,)
    elif stage == "oracle":  # Sec. 5.2: 0 on the injected positives
        weights = 1.0 - truth["injected"][idx].float()  # (B,)
    targets = None
    if stage in ("soft", "robust"):  # eqs. (8)-(9) from the bank targets, labels of the candidates for 'oracle'
        targets = soft_targets(
            vbar, abar, cfg.soft_targets, lam=cfg.lam, tau_s=cfg.tau_s, tau_t=cfg.tau_t, labels=truth["labels"][cand]
        )
    loss, _ = robust_xid_loss(v, a, vbar, abar, weights=weights, targets=targets, tau=cfg.tau)
    return loss, weights, targets, scores


def objective_and_candidates(stage, strategy="ccp"):
    v, a, idx, bank, cfg, truth = setting(strategy)
    drawn = []
    sample = bank.sample
    bank.sample = lambda i, k: drawn.append(sample(i, k)) or drawn[-1]
    loss, stats = train.objective(v, a, idx, bank, cfg, stage, truth)
    assert len(drawn) == 1 and drawn[0].shape == (B, 1 + cfg.num_negatives)
    assert torch.equal(drawn[0][:, 0], idx)
    return loss, stats, by_hand(v, a, idx, bank, cfg, truth, stage, drawn[0]), cfg


@pytest.mark.parametrize(
    "stage,strategy",
    [
        ("xid", "ccp"),
        ("weighted", "ccp"),
        ("oracle", "ccp"),
        ("soft", "ccp"),
        ("robust", "ccp"),
        ("soft", "oracle"),
        ("robust", "bootstrap"),
    ],
)
def test_objective_is_eq17_fed_with_the_bank_statistics_and_the_variants_inputs(stage, strategy):
    loss, stats, (expected, weights, targets, scores), cfg = objective_and_candidates(stage, strategy)
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(stats["mu"], scores.mean())
    torch.testing.assert_close(stats["sigma"], scores.std())
    torch.testing.assert_close(stats["weight"], weights.mean() if weights is not None else torch.tensor(1.0))
    soft_mass = 1 - 0.5 * (targets[0][:, 0] + targets[1][:, 0]).mean() if targets else torch.tensor(0.0)
    torch.testing.assert_close(stats["soft_mass"], soft_mass)


def test_the_setting_tells_the_variants_apart():
    """The check above is only as strong as its setting: here every switch changes the loss."""
    losses = {s: objective_and_candidates(s)[0].item() for s in ("xid", "weighted", "oracle", "soft", "robust")}
    assert len({round(x, 6) for x in losses.values()}) == 5, losses
    _, _, (_, weights, _, _), _ = objective_and_candidates("weighted")
    assert weights.max() - weights.min() > 0.3  # the scores spread the weights


def tiny_parts(cfg, n=N):
    spec = ClipSpec(frames=4, size=64, fps=16, audio_rate=11025, audio_seconds=2.0, n_mels=40, n_time=40)
    model = AVModel(video_depth=9, width=0.125)
    return train.Parts(
        model=model,
        augment=ClipAugment(spec, train=True),
        bank=MemoryBank(n, seed=0),
        optimizer=torch.optim.Adam(model.parameters(), lr=cfg.lr),
        scaler=torch.amp.GradScaler("cpu", enabled=False),
        autocast=torch.autocast("cpu", enabled=False),
        video_format=torch.contiguous_format,
        truth={"labels": torch.arange(n) % 3, "injected": torch.arange(n) % 4 == 1},
    ), spec


def loader_batch(spec, idx):
    g = torch.Generator().manual_seed(0)
    batch = {
        "video": torch.randint(
            0, 255, (len(idx), 3, spec.frames, spec.size, spec.size), dtype=torch.uint8, generator=g
        ),
        "audio": 0.1 * torch.randn(len(idx), int(spec.audio_seconds * spec.audio_rate), generator=g),
        "index": idx,
    }
    return batch


def run_step(stage, idx=None):
    idx = torch.tensor([5, 9, 2, 30]) if idx is None else idx  # (B,)
    cfg = parse_config(FLAGS)
    parts, spec = tiny_parts(cfg)
    old_video, old_audio = parts.bank.video.clone(), parts.bank.audio.clone()
    params_before = [p.detach().clone() for p in parts.model.parameters()]
    seen = {}
    forward = parts.model.forward
    parts.model.forward = lambda video, audio: seen.setdefault("va", forward(video, audio))
    sample = parts.bank.sample
    parts.bank.sample = lambda i, k: seen.setdefault("cand", sample(i, k))
    loss, stats = train.train_step(parts, loader_batch(spec, idx), cfg, stage, lr=7e-4)
    return cfg, parts, seen, loss, stats, old_video, old_audio, params_before, idx


@pytest.mark.parametrize("stage", ["xid", "weighted", "oracle", "robust"])
def test_train_step_takes_the_loss_from_the_old_memory_then_updates_the_bank_once(stage):
    cfg, parts, seen, loss, stats, old_video, old_audio, params_before, idx = run_step(stage)
    v, a = (t.detach() for t in seen["va"])  # (B, 128) each
    old = MemoryBank(N, seed=0)
    old.video.copy_(old_video), old.audio.copy_(old_audio)
    expected, *_ = by_hand(v, a, idx, old, cfg, parts.truth, stage, seen["cand"])
    torch.testing.assert_close(loss, expected)
    # the EMA of the batch rows, every other slot untouched
    torch.testing.assert_close(parts.bank.video[idx], F.normalize(0.5 * old_video[idx] + 0.5 * v, dim=1))
    torch.testing.assert_close(parts.bank.audio[idx], F.normalize(0.5 * old_audio[idx] + 0.5 * a, dim=1))
    rest = torch.ones(N, dtype=torch.bool)
    rest[idx] = False
    assert torch.equal(parts.bank.video[rest], old_video[rest]) and torch.equal(parts.bank.audio[rest], old_audio[rest])
    # the optimiser stepped at the given rate, on this step's gradient
    assert all(g["lr"] == 7e-4 for g in parts.optimizer.param_groups)
    moved = [(p.detach() - q).abs().max() for p, q in zip(parts.model.parameters(), params_before)]
    assert max(moved) > 0 and max(moved) <= 7e-4 * 1.01  # Adam's first step moves each weight by at most lr
    assert stats["loss"] == loss


def test_the_objective_computes_eq_17_in_float32_from_amps_bf16_embeddings():
    """losses.py keeps its inputs' dtype, so the objective casts: embeddings that come out of an autocast
    forward in bf16 give a float32 loss, the one their float32 copies give (a softmax at tau 0.11 over 1+K
    logits would lose most of its precision in bf16)."""
    v, a, idx, bank, cfg, truth = setting()
    v, a = v.detach().bfloat16(), a.detach().bfloat16()
    state = torch.get_rng_state()
    loss, stats = train.objective(v, a, idx, bank, cfg, "robust", truth)
    torch.set_rng_state(state)  # the same negatives
    exact, _ = train.objective(v.float(), a.float(), idx, bank, cfg, "robust", truth)
    assert loss.dtype == torch.float32 and torch.equal(loss, exact)
