import torch, torch.nn as nn, torch.nn.functional as F, time
import augment, data, manifest
from config import parse_config
from model import AudioEncoder
torch.set_num_threads(1)
cfg = parse_config(["--preset", "demo"])
recs, classes = manifest.load_records("folder", "data/synth", "train", need_audio=True)
spec = data.clip_spec(cfg)
tr = data.AVDataset(recs, spec, train=True, preload=True)
clean = [i for i, r in enumerate(recs) if not r.faulty]
torch.manual_seed(0)
enc = AudioEncoder(0.25); head = nn.Linear(enc.out_dim, len(classes))
opt = torch.optim.Adam(list(enc.parameters()) + list(head.parameters()), lr=1e-3)
aug = augment.ClipAugment(spec, train=True)
dl = torch.utils.data.DataLoader(torch.utils.data.Subset(tr, clean[:400]), batch_size=32, shuffle=True, drop_last=True)
b = next(iter(dl)); _, a = aug(b["video"], b["audio"]); print("logmel", a.shape, float(a.mean()), float(a.std()), float(a.min()), float(a.max()))
step = 0; t0 = time.time()
for ep in range(12):
    for b in dl:
        _, a = aug(b["video"], b["audio"])
        loss = F.cross_entropy(head(enc(a)), b["label"]); opt.zero_grad(); loss.backward(); opt.step(); step += 1
    enc.eval(); head.eval(); c = n = 0
    with torch.no_grad():
        for i in clean[400:]:
            it = tr[i]; _, a = aug(it["video"][None], it["audio"][None]); c += int(head(enc(a)).argmax() == it["label"]); n += 1
    enc.train(); head.train()
    print(f"step {step} loss {loss.item():.3f} held-out acc {c/n:.2f} ({time.time()-t0:.0f}s)", flush=True)
