"""Measurement: how well do the scores of eq. (6) find the faulty positives, from the memory bank
(what Weighted-xID uses) and from fresh features of the same checkpoint (centre crops, no
augmentation, averaged over clips)? Tells whether a low weight AUROC is the bank's lag and
augmentation noise or what the encoders know.

    python results/score_probe.py runs/demo/seed0_faulty50/warmup/ckpt.pt [more ckpts] --clips 3
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import data  # noqa: E402
import train  # noqa: E402
from augment import ClipAugment  # noqa: E402
from checkpoint import load_pretrained  # noqa: E402
from evaluate import faulty_auroc  # noqa: E402


@torch.no_grad()
def fresh_scores(model, cfg, clips):
    """v_i . a_i per training instance, from the model itself: (N, clips)."""
    base = train.build_train_set(cfg)  # the same seeded injection as in training
    ds = data.AVDataset(base.records, data.clip_spec(cfg), train=False, num_clips=clips,
                        faulty_fraction=cfg.faulty_fraction, faulty_source=cfg.faulty_source, seed=cfg.seed,
                        preload=True)
    assert torch.equal(ds.injected, base.injected), "the probe must see the training set's injection"
    aug = ClipAugment(ds.spec, train=False)
    model.eval()
    out = []
    for batch in torch.utils.data.DataLoader(ds, batch_size=16):
        video, audio = aug(batch["video"], batch["audio"])  # (B, clips, 3, T, H, W), (B, clips, 1, F, T')
        B, C = video.shape[:2]
        v, a = model(video.flatten(0, 1), audio.flatten(0, 1))  # (B*clips, 128) each
        out.append((v * a).sum(1).view(B, C))
    return torch.cat(out), ds.faulty, ds.injected


def main():
    p = argparse.ArgumentParser()
    p.add_argument("ckpts", nargs="+")
    p.add_argument("--clips", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(2)
    for ckpt in args.ckpts:
        cfg, model, bank, inst = load_pretrained(ckpt)
        s, faulty, injected = fresh_scores(model, cfg, args.clips)
        bank_auc = faulty_auroc(bank.scores(), inst["faulty"])
        print(f"{ckpt}: faulty share {faulty.float().mean():.2f}; AUROC bank {bank_auc:.3f}, "
              f"fresh 1 clip {faulty_auroc(s[:, 0], faulty):.3f}, fresh mean of {args.clips} "
              f"{faulty_auroc(s.mean(1), faulty):.3f}; injected only, fresh mean "
              f"{faulty_auroc(s.mean(1)[~(faulty & ~injected)], injected[~(faulty & ~injected)]):.3f}", flush=True)


if __name__ == "__main__":
    main()
