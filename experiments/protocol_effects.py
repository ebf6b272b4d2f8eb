"""Measured effect of each evaluation deviation on one checkpoint (same features, same trials)."""
import sys
import json, torch, torch.nn.functional as F
import evaluate
import fewshot
from checkpoint import load_pretrained
ckpts = sys.argv[1:]
rows = []
for ckpt in ckpts:
    cfg, model, bank, _ = load_pretrained(ckpt)
    dev = torch.device("cpu")
    tr, trs = evaluate.cached_features(ckpt, cfg, model.video, "train", dev, workers=1)
    te, tes = evaluate.cached_features(ckpt, cfg, model.video, "test", dev, workers=1)
    r = {"ckpt": ckpt}
    r["retrieval euclidean native (paper)"] = evaluate.recall_at_k(te["fmap"], te["labels"], tr["fmap"], tr["labels"], device=dev)[0]
    cos = evaluate.recall_at_k(F.normalize(te["fmap"], dim=1), te["labels"], F.normalize(tr["fmap"], dim=1), tr["labels"], device=dev)[0]
    r["retrieval cosine native"] = cos  # Euclidean on unit vectors ranks as cosine
    # the old protocol: each clip's map average-pooled up to 4x4; rebuild from the encoder
    model.video.eval()
    def pooled4(ds):
        out = []
        with torch.no_grad():
            for b in evaluate.loader(ds, 8, 1):
                x = evaluate.augment.normalise(b["video"]); B, C = x.shape[:2]
                fm = model.video.feature_map(x.flatten(0, 1)).float()
                out.append(F.adaptive_avg_pool3d(fm, (1, 4, 4)).flatten(1).view(B, C, -1).mean(1))
        return torch.cat(out)
    p_tr, p_te = pooled4(trs), pooled4(tes)
    r["retrieval cosine pooled-up 4x4 (old)"] = evaluate.recall_at_k(F.normalize(p_te, dim=1), te["labels"], F.normalize(p_tr, dim=1), tr["labels"], device=dev)[0]
    r["few-shot raw (paper)"] = fewshot.few_shot(tr["pooled"], tr["labels"], te["pooled"], te["labels"], shots=(1, 5, 20))
    r["few-shot standardised"] = fewshot.few_shot(tr["pooled"], tr["labels"], te["pooled"], te["labels"], shots=(1, 5, 20), standardise=True)
    rows.append(r)
    print(json.dumps(r, indent=1), flush=True)
json.dump(rows, open("results/protocol_effects.json", "w"), indent=1)
