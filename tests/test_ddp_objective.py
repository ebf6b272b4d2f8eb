"""Eq. (17) under DDP is the global batch's: two gloo processes whose sums of weights differ get, after
DDP's gradient averaging, the single-process gradient of the whole batch (weighted, oracle, robust)."""

import os
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from losses import robust_xid_loss, sample_weights, soft_targets
from memory_bank import MemoryBank
from train import end_distributed

B, K, D_IN, D = 8, 7, 5, 4  # global batch B, split 4 + 4 over two ranks
VARIANTS = ("weighted", "oracle", "robust")


def problem(variant):
    """A tiny encoder (two linear maps), a global batch of inputs and bank targets, and the w_i of the
    variant, built so that rank 0's half holds the likely-faulty positives: its sum of weights is smaller."""
    g = torch.Generator().manual_seed(1)
    encoder = torch.nn.Linear(D_IN, 2 * D, bias=False)
    with torch.no_grad():
        encoder.weight.copy_(torch.randn(2 * D, D_IN, generator=g))
    x = torch.randn(B, D_IN, generator=g)  # (B, D_IN)
    vbar = F.normalize(torch.randn(B, 1 + K, D, generator=g), dim=-1)  # (B, 1+K, D)
    abar = F.normalize(torch.randn(B, 1 + K, D, generator=g), dim=-1)  # (B, 1+K, D)
    if variant == "oracle":
        weights = torch.tensor([0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])  # sums 1 and 4
    else:  # eq. (6) from scores that are low on the first half
        scores = torch.tensor([-0.6, -0.5, -0.4, 0.2, 0.5, 0.6, 0.7, 0.8])
        weights = sample_weights(scores, scores.mean(), scores.std(), delta=0.0)  # (B,)
    targets = soft_targets(vbar, abar, "ccp", lam=0.5) if variant == "robust" else None
    return encoder, x, vbar, abar, weights, targets


N_BANK = 20


def bank_batch():
    g = torch.Generator().manual_seed(4)
    idx = torch.randperm(N_BANK, generator=g)[:B]  # (B,) distinct slots
    return idx, F.normalize(torch.randn(B, D, generator=g), dim=1), F.normalize(torch.randn(B, D, generator=g), dim=1)


def loss_of(encoder, x, vbar, abar, weights, targets):
    out = encoder(x)  # (b, 2D)
    v, a = F.normalize(out[:, :D], dim=1), F.normalize(out[:, D:], dim=1)  # (b, D) each
    return robust_xid_loss(v, a, vbar, abar, weights, targets)[0]


def rank_half(rank, *tensors):
    rows = slice(rank * B // 2, (rank + 1) * B // 2)
    return [None if t is None else (tuple(s[rows] for s in t) if isinstance(t, tuple) else t[rows]) for t in tensors]


def gradients(rank, variant):
    """Rank `rank`'s DDP gradient of its half of eq. (17), the per-rank-normalised gradient averaged over the
    ranks, and its loss. The DDP wrapper lives here only, so that none is left when the group ends."""
    encoder, x, vbar, abar, weights, targets = problem(variant)
    model = DDP(encoder)
    loss = loss_of(model, *rank_half(rank, x, vbar, abar, weights, targets))
    loss.backward()
    # what normalising per rank gives after DDP's average: mean over ranks of sum_r w L / sum_r w
    plain, x_r, vbar_r, abar_r, w_r, t_r = (problem(variant)[0], *rank_half(rank, x, vbar, abar, weights, targets))
    out = plain(x_r)  # (B/2, 2D)
    v, a = F.normalize(out[:, :D], dim=1), F.normalize(out[:, D:], dim=1)  # (B/2, D) each
    per_sample = robust_xid_loss(v, a, vbar_r, abar_r, None, t_r)[1]  # (B/2,)
    ((w_r * per_sample).sum() / w_r.sum()).backward()
    per_rank = plain.weight.grad / 2
    dist.all_reduce(per_rank)
    return encoder.weight.grad.clone(), per_rank, loss.detach()


def worker(rank, init_file, results):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    for variant in VARIANTS:
        results[(variant, rank)] = gradients(rank, variant)
    bank = MemoryBank(N_BANK, dim=D, seed=2)
    idx, v, a = bank_batch()
    half = slice(rank * B // 2, (rank + 1) * B // 2)
    bank.update(idx[half], v[half], a[half])  # each rank its half; the replicas apply the whole batch
    results[("bank", rank)] = (bank.video.clone(), bank.audio.clone())
    end_distributed()  # train.py's way out: a barrier, then the group destroyed with no DDP wrapper alive


@pytest.fixture(scope="module")
def ddp_results():
    with tempfile.TemporaryDirectory() as tmp:
        manager = mp.Manager()
        results = manager.dict()
        mp.spawn(worker, args=(os.path.join(tmp, "init"), results), nprocs=2, join=True)
        return dict(results)


@pytest.mark.parametrize("variant", VARIANTS)
def test_ddp_gradient_of_eq17_equals_the_single_process_gradient_of_the_whole_batch(ddp_results, variant):
    encoder, x, vbar, abar, weights, targets = problem(variant)
    whole = loss_of(encoder, x, vbar, abar, weights, targets)
    whole.backward()
    for rank in (0, 1):
        ddp_grad, per_rank_grad, _ = ddp_results[(variant, rank)]
        torch.testing.assert_close(ddp_grad, encoder.weight.grad, rtol=1e-5, atol=1e-6)
        # the setting is one where it matters: normalising per rank would give another gradient
        assert (per_rank_grad - encoder.weight.grad).abs().max() > 1e-2
    # the ranks' losses are shares whose mean is the global eq. (17)
    mean_loss = (ddp_results[(variant, 0)][2] + ddp_results[(variant, 1)][2]) / 2
    torch.testing.assert_close(mean_loss, whole.detach(), rtol=1e-5, atol=1e-6)


def test_ddp_bank_update_gathers_every_ranks_rows_into_identical_replicas(ddp_results):
    bank = MemoryBank(N_BANK, dim=D, seed=2)
    bank.update(*bank_batch())  # one process, the whole batch
    for rank in (0, 1):
        video, audio = ddp_results[("bank", rank)]
        torch.testing.assert_close(video, bank.video)
        torch.testing.assert_close(audio, bank.audio)
