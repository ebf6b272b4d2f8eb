"""Supervised upper bound: demo video encoder + linear head, labels, Adam 1e-3, batch 32."""
import sys, time, json
import torch, torch.nn as nn, torch.nn.functional as F
import augment, data, loader_workers, manifest
from config import parse_config
from model import VideoEncoder
torch.set_num_threads(2)
import os; DATA = os.environ.get("DATA", "data/synth")
cfg = parse_config(["--preset", "demo"])
recs, classes = manifest.load_records("folder", DATA, "train", need_audio=True)
trecs, _ = manifest.load_records("folder", DATA, "test", need_audio=False)
spec = data.clip_spec(cfg)
tr = data.AVDataset(recs, spec, train=True, preload=True)
te = data.AVDataset(trecs, data.clip_spec(cfg, audio=False), train=False, audio=False, num_clips=3, preload=True)
settings = {
  "full ClipAugment": dict(),
  "no colour jitter/grey": dict(p_jitter=0.0, p_grey=0.0),
  "no blur": dict(p_blur=0.0),
  "blur sigma scaled to 64/224": dict(sigma=(0.1 * 64 / 224, 2.0 * 64 / 224)),
  "none (crop+flip only)": dict(p_jitter=0.0, p_grey=0.0, p_blur=0.0),
}
which = sys.argv[1:] or list(settings)
steps, evals = 300, (150, 300)
for name in which:
    torch.manual_seed(0)
    enc = VideoEncoder(9, 0.25); head = nn.Linear(enc.out_dim, len(classes))
    opt = torch.optim.Adam(list(enc.parameters()) + list(head.parameters()), lr=1e-3)
    aug = augment.ClipAugment(spec, train=True, **settings[name])
    g = torch.Generator().manual_seed(0)
    dl = torch.utils.data.DataLoader(tr, batch_size=32, shuffle=True, drop_last=True, generator=g, num_workers=1,
                                     persistent_workers=True, worker_init_fn=loader_workers.worker_init)
    step, t0, out = 0, time.time(), {}
    while step < steps:
        for b in dl:
            enc.train(); head.train()
            x, _ = aug(b["video"], b["audio"])
            loss = F.cross_entropy(head(enc(x)), b["label"])
            opt.zero_grad(); loss.backward(); opt.step(); step += 1
            if step in evals:
                enc.eval(); head.eval(); correct = 0
                with torch.no_grad():
                    for tb in torch.utils.data.DataLoader(te, batch_size=16):
                        xv = augment.normalise(tb["video"])
                        p = head(enc(xv.flatten(0, 1))).softmax(1).view(xv.shape[0], xv.shape[1], -1).mean(1)
                        correct += int((p.argmax(1) == tb["label"]).sum())
                out[step] = correct / len(te)
                print(f"{name}: step {step} loss {loss.item():.3f} test acc {out[step]:.2f} ({time.time()-t0:.0f}s)", flush=True)
            if step >= steps: break
