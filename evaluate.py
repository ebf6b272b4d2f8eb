"""Downstream evaluation of a pre-trained video encoder (paper Sec. 5.1 "Downstream tasks", Sec. 6, App. B).

    retrieval  last feature map (4x4x512; pooled to 4x4 at other sizes) averaged over 10 clips per
               video; test videos query the train set; R@1/5/20 (a hit if any of the top k shares the label)
    fewshot    max-pooled features averaged over 10 clips; one-vs-all linear SVM (C=1) on n videos
               per class; top-1 on the test set, mean +- std over 50 seeded trials
    finetune   encoder + dropout + linear classifier, Adam (wd 1e-3, backbone lr x0.1, cosine);
               top-1 of video-level predictions averaged over 10 clips; a validation split held out
    analysis   histogram of bank scores with the weight function (Fig. weights), AUROC / precision
               of the weights for the faulty-positive flags, soft-target mass on same-class
               candidates vs chance, per-class R@1 (PNG files)

    python evaluate.py all runs/demo/robust/ckpt.pt                      # on the data it was trained on
    python evaluate.py retrieval CKPT --data UCF101 --layout ucf101 --fold 1
Results go to CKPT_DIR/eval.json (and a table on stdout); features are cached next to the checkpoint.
"""
import argparse
import hashlib
import json
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import augment
import data
import manifest
import train
from losses import SOFT_TARGET_STRATEGIES, sample_weights, soft_targets
from memory_bank import MemoryBank


def device_default():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load_pretrained(ckpt):
    """(config, model with the checkpoint's weights, memory bank) from a train.py checkpoint."""
    state = train.load_checkpoint(ckpt)
    cfg = train.Config(**state["config"])
    model = train.build_model(cfg)
    model.load_state_dict(state["model"])
    bank = MemoryBank(state["bank"]["video"].shape[0], momentum=cfg.momentum)
    bank.load_state_dict(state["bank"])
    return cfg, model, bank


def eval_set(cfg, split, train_mode=False, num_clips=10, keep=None):
    """Video-only dataset of one split, for evaluation (UCF101/HMDB51 videos often have no audio);
    `keep` selects records by position (a held-out validation part)."""
    records, classes = manifest.load_records(cfg.layout, cfg.data, split, cfg.fold, cfg.annotations or None,
                                             cfg.manifest or None, need_audio=False)
    if keep is not None:
        records = [records[i] for i in keep]
    return data.AVDataset(records, train.clip_spec(cfg, audio=False), train=train_mode, audio=False,
                          num_clips=num_clips, max_bad_fraction=cfg.max_bad_fraction, preload=cfg.preload), classes


def loader(dataset, batch_size, workers, shuffle=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, num_workers=workers,
                                       drop_last=shuffle, generator=g, worker_init_fn=train._worker_init)


# ----------------------------------------------------------------------------- features

@torch.no_grad()
def extract_features(encoder, dataset, device, batch_size=8, workers=2):
    """Per video, averaged over its clips: `fmap` the last feature map pooled to (1, 4, 4) and
    flattened (retrieval), `pooled` the global max-pooled feature (few-shot). And the labels."""
    encoder.eval().to(device)
    fmaps, pooled, labels = [], [], []
    for batch in loader(dataset, batch_size, workers):
        x = augment.normalise(batch["video"].to(device))  # (B, clips, 3, T, H, W)
        B, C = x.shape[:2]
        fm = encoder.feature_map(x.flatten(0, 1)).float()  # (B*clips, 512, t, h, w)
        fmaps.append(F.adaptive_avg_pool3d(fm, (1, 4, 4)).flatten(1).view(B, C, -1).mean(1).cpu())  # (B, 512*16)
        pooled.append(torch.amax(fm, dim=(2, 3, 4)).view(B, C, -1).mean(1).cpu())  # (B, 512)
        labels.append(batch["label"])
    return {"fmap": torch.cat(fmaps), "pooled": torch.cat(pooled), "labels": torch.cat(labels)}


def cached_features(ckpt, cfg, encoder, split, device, workers=2):
    """extract_features, saved next to the checkpoint under a key of checkpoint and data settings."""
    st = Path(ckpt).stat()
    key = json.dumps([str(Path(ckpt).resolve()), st.st_mtime_ns, st.st_size, cfg.data, cfg.layout, cfg.fold,
                      split, cfg.frames, cfg.fps, cfg.size])
    path = Path(ckpt).parent / f"features_{split}_{hashlib.sha1(key.encode()).hexdigest()[:10]}.pt"
    if path.exists():
        return torch.load(path, weights_only=True)
    feats = extract_features(encoder, eval_set(cfg, split)[0], device, workers=workers)
    torch.save(feats, path)
    return feats


# ----------------------------------------------------------------------------- retrieval and few-shot

def recall_at_k(query, query_labels, gallery, gallery_labels, ks=(1, 5, 20), device=None, chunk=1024):
    """R@k with cosine similarity: the share of queries with a same-label video among their k nearest.
    Returns ({k: R@k}, per-query top-1 hits)."""
    device = device or device_default()
    g = F.normalize(gallery.float(), dim=1).to(device)  # (G, F)
    gl = gallery_labels.to(device)
    kmax = min(max(ks), g.shape[0])
    hits = []
    for q, ql in zip(query.split(chunk), query_labels.split(chunk)):
        sim = F.normalize(q.float(), dim=1).to(device) @ g.T  # (Q, G)
        top = sim.topk(kmax, dim=1).indices  # (Q, kmax)
        hits.append((gl[top] == ql.to(device)[:, None]).cpu())  # (Q, kmax)
    hits = torch.cat(hits)
    recall = {k: float(hits[:, :k].any(1).float().mean()) for k in ks}
    return recall, hits[:, 0]


def few_shot(train_x, train_y, test_x, test_y, shots=(1, 5, 20), trials=50, seed=0):
    """Linear SVM (one-vs-all, C=1) on n videos per class; {n: (mean, std) top-1} over seeded trials."""
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC
    train_x, train_y, test_x, test_y = (t.numpy() for t in (train_x, train_y, test_x, test_y))
    classes = np.unique(train_y)
    out = {}
    for n in shots:
        accs = []
        for t in range(trials):
            rng = np.random.default_rng(seed * 1000 + t)
            pick = np.concatenate([rng.choice(np.flatnonzero(train_y == c), min(n, (train_y == c).sum()),
                                              replace=False) for c in classes])
            scaler = StandardScaler().fit(train_x[pick])
            svm = LinearSVC(C=1.0, max_iter=10000).fit(scaler.transform(train_x[pick]), train_y[pick])
            accs.append(float((svm.predict(scaler.transform(test_x)) == test_y).mean()))
        out[n] = (float(np.mean(accs)), float(np.std(accs)))
    return out


# ----------------------------------------------------------------------------- fine-tuning

class Classifier(nn.Module):
    """The pre-trained video encoder, dropout after its global max pooling, and a linear layer."""

    def __init__(self, encoder, num_classes, dropout=0.5):
        super().__init__()
        self.encoder, self.dropout = encoder, nn.Dropout(dropout)
        self.fc = nn.Linear(encoder.out_dim, num_classes)

    def forward(self, x):
        return self.fc(self.dropout(self.encoder(x)))  # (B, classes)


def finetune_optimizer(clf, lr, backbone_lr_scale=0.1, weight_decay=1e-3, freeze_backbone=False):
    for p in clf.encoder.parameters():
        p.requires_grad_(not freeze_backbone)
    groups = [{"params": clf.fc.parameters(), "lr": lr}]
    if not freeze_backbone:
        groups.append({"params": clf.encoder.parameters(), "lr": lr * backbone_lr_scale})
    for g in groups:
        g["initial_lr"] = g["lr"]  # the schedule scales each group from its own start
    return torch.optim.Adam(groups, weight_decay=weight_decay)


def finetune_step(clf, optimizer, video, label, freeze_backbone=False):
    clf.train()
    if freeze_backbone:
        clf.encoder.eval()  # frozen means BatchNorm statistics too
    loss = F.cross_entropy(clf(video), label)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.item()


@torch.no_grad()
def video_accuracy(clf, dataset, device, workers=2):
    """Top-1 of video-level predictions: softmax averaged over each video's clips."""
    clf.eval()
    correct = total = 0
    for batch in loader(dataset, 8, workers):
        x = augment.normalise(batch["video"].to(device))  # (B, clips, 3, T, H, W)
        probs = clf(x.flatten(0, 1)).softmax(1).view(x.shape[0], x.shape[1], -1).mean(1)  # (B, classes)
        correct += int((probs.argmax(1).cpu() == batch["label"]).sum())
        total += x.shape[0]
    return correct / total


def finetune(encoder, cfg, epochs=10, lr=1e-4, lr_min=1e-5, batch_size=32, val_fraction=0.1,
             freeze_backbone=False, device=None, workers=2, seed=0):
    """Fine-tune on the train split; pick the epoch by accuracy on a held-out part of it; report test."""
    device = device or device_default()
    train_set, classes = eval_set(cfg, "train", train_mode=True)
    rng = np.random.default_rng(seed)
    labels = train_set.labels.numpy()
    val_idx = np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:max(1, int(val_fraction * (labels == c).sum()))]
                              for c in np.unique(labels)])
    fit_idx = np.setdiff1d(np.arange(len(train_set)), val_idx)
    val_set, _ = eval_set(cfg, "train", keep=val_idx)
    test_set, _ = eval_set(cfg, "test")
    clf = Classifier(encoder, len(classes)).to(device)
    opt = finetune_optimizer(clf, lr, freeze_backbone=freeze_backbone)
    aug = augment.ClipAugment(train_set.spec, train=True).to(device)  # the pre-training augmentations
    fit = loader(torch.utils.data.Subset(train_set, fit_idx), batch_size, workers, shuffle=True, seed=seed)
    steps, best = epochs * len(fit), (-1.0, None)
    for epoch in range(epochs):
        for i, batch in enumerate(fit):
            # cosine from lr to lr_min, the backbone's group scaled by the same factor
            scale = lr_min / lr + (1 - lr_min / lr) * 0.5 * (1 + math.cos(math.pi * (epoch * len(fit) + i) / steps))
            for g in opt.param_groups:
                g["lr"] = g["initial_lr"] * scale
            video, _ = aug(batch["video"].to(device))  # (B, 3, T, H, W)
            finetune_step(clf, opt, video, batch["label"].to(device), freeze_backbone)
        val = video_accuracy(clf, val_set, device, workers)
        if val > best[0]:
            best = (val, {k: v.detach().clone() for k, v in clf.state_dict().items()})
    clf.load_state_dict(best[1])
    return {"val_acc": best[0], "test_acc": video_accuracy(clf, test_set, device, workers)}


# ----------------------------------------------------------------------------- analysis

def weight_analysis(bank, faulty, cfg):
    """How well do the weights of eq. (weigths) find the faulty positives? AUROC and precision at
    k = number of faulty instances, ranking by increasing weight."""
    scores = bank.scores()
    w = sample_weights(scores, scores.mean(), scores.std(), cfg.delta, cfg.kappa, cfg.w_min)
    k = int(faulty.sum())
    out = {"faulty_auroc": train.faulty_auroc(scores, faulty), "mean_weight": float(w.mean()),
           "mean_weight_faulty": float(w[faulty].mean()) if k else None,
           "mean_weight_clean": float(w[~faulty].mean())}
    if k:
        out["faulty_precision_at_k"] = float(faulty[scores.argsort()[:k]].float().mean())
    return out, scores, w


@torch.no_grad()
def soft_target_analysis(bank, labels, cfg, num_negatives=None, seed=0):
    """Share of soft-target mass S(j|i), j != i, on same-class candidates (faulty negatives), per
    strategy, and the share expected by chance (the same-class share of the candidates)."""
    torch.manual_seed(seed)
    idx = torch.arange(bank.num_items)
    cand = bank.sample(idx, num_negatives or min(cfg.num_negatives, bank.num_items - 1))  # (N, 1+K)
    vbar, abar = bank.targets(cand)  # (N, 1+K, D)
    same = (labels[cand] == labels[:, None]).float()[:, 1:]  # (N, K)
    out = {"chance": float(same.mean())}
    for strategy in SOFT_TARGET_STRATEGIES:
        S_v, _ = soft_targets(vbar, abar, strategy, lam=1.0, tau_s=cfg.tau_s, tau_t=cfg.tau_t, labels=labels[cand])
        neg = S_v[:, 1:]  # (N, K)
        out[strategy] = float((neg * same).sum() / neg.sum().clamp_min(1e-12))
    return out


def plot_analysis(scores, w, faulty, cfg, per_class, classes, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out_dir = Path(out_dir)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    s = scores.numpy()
    bins = np.linspace(s.min(), s.max(), 40)
    ax.hist([s[~faulty.numpy()], s[faulty.numpy()]], bins=bins, stacked=True, color=["tab:red", "tab:gray"],
            label=["clean", "faulty positive (ground truth)"])
    ax.set_xlabel(r"bank score $\bar v_i^T \bar a_i$")
    ax.set_ylabel("instances")
    ax2 = ax.twinx()
    order = np.argsort(s)
    ax2.plot(s[order], w.numpy()[order], "k-", label="weight")
    ax2.set_ylim(0, 1.05)
    ax2.set_ylabel(rf"$w_i$ ($\delta$={cfg.delta:.2f}, $\kappa$={cfg.kappa}, $w_{{min}}$={cfg.w_min})")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "scores_weights.png", dpi=120)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(range(len(per_class)), per_class)
    ax.set_xticks(range(len(per_class)), classes, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("R@1")
    fig.tight_layout()
    fig.savefig(out_dir / "per_class_r1.png", dpi=120)
    plt.close("all")


# ----------------------------------------------------------------------------- command line

def evaluate(ckpt, tasks, overrides=None, finetune_epochs=10, finetune_lr=1e-4, trials=50, workers=2, device=None,
             shots=(1, 5, 20)):
    device = device or device_default()
    cfg, model, bank = load_pretrained(ckpt)
    for k, v in (overrides or {}).items():
        setattr(cfg, k, v)
    results = {}
    if {"retrieval", "fewshot", "analysis"} & set(tasks):
        tr = cached_features(ckpt, cfg, model.video, "train", device, workers)
        te = cached_features(ckpt, cfg, model.video, "test", device, workers)
        recall, top1 = recall_at_k(te["fmap"], te["labels"], tr["fmap"], tr["labels"], device=device)
        results["retrieval"] = {f"R@{k}": v for k, v in recall.items()}
    if "fewshot" in tasks:
        fs = few_shot(tr["pooled"], tr["labels"], te["pooled"], te["labels"], shots=shots, trials=trials)
        results["fewshot"] = {f"{n}-shot": v for n, v in fs.items()}
    if "analysis" in tasks:
        pretrain = train.build_train_set(cfg)  # the same instances (and injected faults) as the bank
        wa, scores, w = weight_analysis(bank, pretrain.faulty, cfg)
        results["weights"] = wa
        results["soft_targets_same_class"] = soft_target_analysis(bank, pretrain.labels, cfg)
        classes = manifest.list_split(cfg.layout, cfg.data, "test", cfg.fold, cfg.annotations or None)[1]
        per_class = [float(top1[te["labels"] == c].float().mean()) for c in range(len(classes))]
        results["per_class_R@1"] = dict(zip(classes, per_class))
        plot_analysis(scores, w, pretrain.faulty, cfg, per_class, classes, Path(ckpt).parent)
    if "finetune" in tasks:
        results["finetune"] = finetune(model.video, cfg, epochs=finetune_epochs, lr=finetune_lr,
                                       device=device, workers=workers)
    path = Path(ckpt).parent / "eval.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**previous, **results}, indent=1))
    return results


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("task", choices=["retrieval", "fewshot", "finetune", "analysis", "all"])
    p.add_argument("ckpt", help="train.py checkpoint")
    p.add_argument("--data", help="evaluation dataset root (default: the pre-training data)")
    p.add_argument("--layout", help="ucf101 | hmdb51 | kinetics | folder")
    p.add_argument("--fold", type=int, help="split 1-3 of UCF101 / HMDB51")
    p.add_argument("--annotations", help="split files, when not in the layout's default place")
    p.add_argument("--finetune-epochs", type=int, default=10, help="paper: 200")
    p.add_argument("--finetune-lr", type=float, default=1e-4, help="paper: 1e-4 -> 1e-5 cosine, backbone x0.1")
    p.add_argument("--trials", type=int, default=50, help="few-shot trials (paper protocol: 50)")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args(argv)
    overrides = {k: v for k in ("data", "layout", "fold", "annotations") if (v := getattr(args, k)) is not None}
    if "data" in overrides:
        overrides["manifest"] = ""  # the evaluation set's own manifest
    tasks = ["retrieval", "fewshot", "analysis", "finetune"] if args.task == "all" else [args.task]
    if "analysis" in tasks and "data" in overrides:
        tasks.remove("analysis")  # the bank belongs to the pre-training data
    res = evaluate(args.ckpt, tasks, overrides, args.finetune_epochs, args.finetune_lr, args.trials, args.workers)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
