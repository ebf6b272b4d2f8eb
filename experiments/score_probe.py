"""Measurement: how well do the scores of eq. (6) find the faulty positives, from the memory bank
(what Weighted-xID uses) and from fresh features of the same checkpoint (centre crops, no
augmentation, averaged over clips)? Tells whether a low weight AUROC is the bank's lag and
augmentation noise or what the encoders know. --held-out also scores the test videos, never seen in
pre-training, with the same share of their audio swapped among them: if those faults are found and
the training set's are not, the encoders have fitted (memorised) the faulty pairs they trained on.

    python -m experiments.score_probe runs/demo/seed0_faulty50/warmup/ckpt.pt [more ckpts] --clips 3 [--held-out]
"""
import argparse
import sys
from pathlib import Path

import torch

import data
import manifest
import train
from augment import ClipAugment
from checkpoint import load_pretrained
from diagnostics import faulty_auroc


def probe_set(cfg, split, clips):
    """Centre-crop clips of the split with its faulty positives: "train" is the training set with the
    run's own seeded injection; "test" the test videos, the same share of their audio swapped among them."""
    if split == "train":
        records = train.build_train_set(cfg).records
        injection = train.injection(cfg, records)
    else:
        records, _ = manifest.load_records(cfg.layout, cfg.data, "test", cfg.fold, cfg.annotations or None,
                                           cfg.manifest or None, need_audio=True)
        injection = {"faulty_source": "train"}
    return data.AVDataset(records, data.clip_spec(cfg), train=False, num_clips=clips,
                          faulty_fraction=cfg.faulty_fraction, **injection, seed=cfg.seed, preload=True)


@torch.no_grad()
def fresh_scores(model, ds):
    """v_i . a_i per instance, from the model itself (eq. (6)'s s_i without the bank): (N, clips)."""
    aug = ClipAugment(ds.spec, train=False)
    model.eval()
    out = []
    for batch in torch.utils.data.DataLoader(ds, batch_size=16):
        video, audio = aug(batch["video"], batch["audio"])  # (B, clips, 3, T, H, W), (B, clips, 1, F, T')
        B, C = video.shape[:2]
        v, a = model(video.flatten(0, 1), audio.flatten(0, 1))  # (B*clips, 128) each
        out.append((v * a).sum(1).view(B, C))
    return torch.cat(out)  # (N, clips)


def injected_auroc(scores, ds):
    """AUROC for the injected faults against clean instances, the data's natural faults left out."""
    keep = ~(ds.faulty & ~ds.injected)  # (N,)
    return faulty_auroc(scores[keep], ds.injected[keep])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("ckpts", nargs="+")
    p.add_argument("--clips", type=int, default=3)
    p.add_argument("--held-out", action="store_true", help="also score swapped audio among the test videos")
    args = p.parse_args()
    torch.set_num_threads(2)
    for ckpt in args.ckpts:
        cfg, model, bank, inst = load_pretrained(ckpt)
        ds = probe_set(cfg, "train", args.clips)
        assert torch.equal(ds.faulty.cpu(), inst["faulty"].cpu()), "the probe must see the training set's faults"
        s = fresh_scores(model, ds)  # (N, clips)
        print(f"{ckpt}: faulty share {ds.faulty.float().mean():.2f}; AUROC bank "
              f"{faulty_auroc(bank.scores(), inst['faulty']):.3f}, fresh 1 clip "
              f"{faulty_auroc(s[:, 0], ds.faulty):.3f}, fresh mean of {args.clips} {faulty_auroc(s.mean(1), ds.faulty):.3f}; injected only, fresh mean "
              f"{injected_auroc(s.mean(1), ds):.3f}", flush=True)
        if args.held_out:
            ds = probe_set(cfg, "test", args.clips)
            s = fresh_scores(model, ds)  # (N, clips)
            print(f"    held-out test videos, {ds.injected.float().mean():.2f} swapped: AUROC fresh mean of "
                  f"{args.clips} {injected_auroc(s.mean(1), ds):.3f}", flush=True)


if __name__ == "__main__":
    main()
