"""Measurement: how well do the scores of eq. (6) find the faulty positives, from the memory bank
(what Weighted-xID uses) and from fresh features of the same checkpoint (centre crops, no
augmentation, averaged over clips)? Tells whether a low weight AUROC is the bank's lag and
augmentation noise or what the encoders know. --held-out also scores the test videos, never seen in
pre-training, with the same share of their audio swapped among them: if those faults are found and
the training set's are not, the encoders have fitted (memorised) the faulty pairs they trained on.

    python results/score_probe.py runs/demo/seed0_faulty50/warmup/ckpt.pt [more ckpts] --clips 3 [--held-out]
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import data  # noqa: E402
import manifest  # noqa: E402
import train  # noqa: E402
from augment import ClipAugment  # noqa: E402
from checkpoint import load_pretrained  # noqa: E402
from evaluate import faulty_auroc  # noqa: E402


@torch.no_grad()
def fresh_scores(model, cfg, clips, split="train"):
    """v_i . a_i per instance of the split, from the model itself: (N, clips)."""
    if split == "train":
        base = train.build_train_set(cfg)  # the same seeded injection as in training
        records = base.records
    else:  # held out: the test videos, with the same share of audio swapped among themselves
        records, _ = manifest.load_records(cfg.layout, cfg.data, "test", cfg.fold, cfg.annotations or None,
                                           cfg.manifest or None, need_audio=True)
    ds = data.AVDataset(records, data.clip_spec(cfg), train=False, num_clips=clips,
                        faulty_fraction=cfg.faulty_fraction, faulty_source="dataset" if split != "train"
                        else cfg.faulty_source, seed=cfg.seed, preload=True)
    if split == "train":
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
    p.add_argument("--held-out", action="store_true", help="also score swapped audio among the test videos")
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
        if args.held_out:
            s, faulty, injected = fresh_scores(model, cfg, args.clips, split="test")
            keep = ~(faulty & ~injected)  # (N,) drop the test set's natural faults: injected vs clean only
            print(f"    held-out test videos, {injected.float().mean():.2f} swapped: AUROC fresh mean of "
                  f"{args.clips} {faulty_auroc(s.mean(1)[keep], injected[keep]):.3f}", flush=True)


if __name__ == "__main__":
    main()
