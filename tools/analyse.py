"""What evaluate.py leaves out, being none of the paper's protocols: what a checkpoint's memory bank and eq. (6)'s
weights know of the faults injected into its training set, its features for a probe of one's own, and its records
as the paper's table rows.

    analysis   the weights of eq. (6) from the bank's scores against the known faulty positives (AUROC, precision
               at k, the mean weight of each group; Fig. 5's histogram), the share of soft-target mass (eqs. (8)-(14))
               on same-class candidates per strategy beside chance, per-class R@1 (Fig. 10) and the retrievals
               (Fig. 11); a record of CKPT_DIR/eval.json, as evaluate.py's tasks keep theirs
    features   per video of both splits, the pooled video and audio features, label, path and split, in one .npz
               (a silent video's audio row is NaN); an --out that is not such an .npz is refused
    report     the records of CKPT_DIR/eval.json as the rows of Tables 1-2, 4 and 5, in %: a row per version of
               the checkpoint file, a cell the mean over the folds of one version, one copy of the dataset and one
               definition of its split lists (± their SD); a cell of another protocol or of --annotations' lists is
               marked and the difference named; then every record

    .venv/bin/python -m tools.analyse analysis runs/demo/robust/ckpt.pt
    .venv/bin/python -m tools.analyse features runs/k400/ckpt.pt --data /data/UCF101 --layout ucf101 --out ucf1.npz
    .venv/bin/python -m tools.analyse report runs/k400/ckpt.pt

Tests: tests/test_eval_records.py, tests/test_features.py, tests/test_evaluate.py, tests/test_train.py
"""

import copy
import json
import sys
from pathlib import Path

import numpy as np
import torch

import checkpoint
import data
import evaluate
from config import OneLineParser, resolve_device
from losses import SOFT_TARGET_STRATEGIES, sample_weights, soft_targets
from media import manifest
from memory_bank import MemoryBank, scores_auroc

ANALYSIS = "bank scores and eq. (6) weights vs the known faulty positives; soft-target mass"


def weight_analysis(bank, faulty, cfg):
    """How well do the weights of eq. (6) find the faulty positives? AUROC and precision at k = the number of
    faulty instances, ranking by increasing weight."""
    mu, sigma = bank.score_stats(bank.scores())  # eq. (6)'s statistics
    scores = bank.scores().cpu()  # (N,)
    w = sample_weights(scores, float(mu), float(sigma), cfg.delta, cfg.kappa, cfg.w_min)
    k = int(faulty.sum())
    out = {
        "faulty_auroc": scores_auroc(scores, faulty),
        "mean_weight": float(w.mean()),
        "mean_weight_faulty": float(w[faulty].mean()) if k else None,
        "mean_weight_clean": float(w[~faulty].mean()),
    }
    if k:
        out["faulty_precision_at_k"] = float(faulty[scores.argsort()[:k]].float().mean())
    return out, scores, w, faulty


@torch.no_grad()
def soft_target_analysis(bank, labels, cfg, num_negatives=None, seed=0):
    """Share of soft-target mass S(j|i), j != i, on same-class candidates (faulty negatives), per strategy, and the
    share expected by chance (the same-class share of the candidates)."""
    torch.manual_seed(seed)
    cand = bank.sample(torch.arange(bank.num_items), num_negatives or min(cfg.num_negatives, bank.num_items - 1))
    vbar, abar = bank.targets(cand)  # (N, 1+K, D)
    same = (labels[cand] == labels[:, None]).float()[:, 1:]  # (N, K)
    out = {"chance": float(same.mean())}
    for strategy in SOFT_TARGET_STRATEGIES:
        S_v, _ = soft_targets(vbar, abar, strategy, lam=1.0, tau_s=cfg.tau_s, tau_t=cfg.tau_t, labels=labels[cand])
        neg = S_v[:, 1:]  # (N, K)
        out[strategy] = float((neg * same).sum() / neg.sum().clamp_min(1e-12))
    return out


def prepared(pre, overrides=None, need_audio=False, allow_missing=False):
    """pre with the evaluation's settings in a copy of its config, and its splits, as evaluate.evaluate has them."""
    pre = pre._replace(cfg=copy.copy(pre.cfg))
    for k, v in ({"preload": "auto"} | (overrides or {})).items():
        setattr(pre.cfg, k, v)
    return pre, evaluate.resolve(pre.cfg, need_audio, allow_missing)


def analysis(ckpt, pre=None, workers=2, device=None, clips=evaluate.CLIPS, figures=True, allow_missing=False):
    """The analysis of a checkpoint trained on a set whose faults are known: {"weights", "soft_targets_same_class",
    "per_class_R@1", "analysis": its protocol}, kept as a record of CKPT_DIR/eval.json; figures beside it."""
    device = device or resolve_device(say=False)
    pre, splits = prepared(pre or evaluate.read_pretrained(ckpt), allow_missing=allow_missing)
    if pre.instances is None:
        raise ValueError(f"{ckpt} holds no ground truth of its training set (instances): nothing to analyse")
    bank = MemoryBank(pre.bank["video"].shape[0], dim=pre.bank["video"].shape[1], momentum=pre.cfg.momentum)
    bank.load_state_dict(pre.bank)
    tr, te = (
        evaluate.cached_features(pre, s, g.records, device, workers, clips, "video")
        for s, g in zip(evaluate.SPLITS, splits)
    )
    _, nearest = evaluate.recall_at_k(te["fmap"], te["labels"], tr["fmap"], tr["labels"], device)
    weights, scores, w, faulty = weight_analysis(bank, pre.instances["faulty"], pre.cfg)
    classes, hit = splits.test.classes, tr["labels"][nearest[:, 0]] == te["labels"]
    per_class = [float(hit[te["labels"] == c].float().mean()) for c in range(len(classes))]
    results = {
        "weights": weights,
        "soft_targets_same_class": soft_target_analysis(bank, pre.instances["labels"], pre.cfg),
        "per_class_R@1": dict(zip(classes, per_class)),
    }
    print(f"[analyse] analysis: {ANALYSIS}")
    evaluate.add(
        Path(ckpt).parent / evaluate.NAME,
        [evaluate.record("analysis", pre, splits, results | {"protocol": {"text": ANALYSIS}})],
    )
    if figures:
        from tools import figures as figs

        out = Path(ckpt).parent
        figs.scores_and_weights(scores, w, faulty, pre.cfg, out / "scores_weights.png")
        figs.per_class(per_class, classes, out / "per_class_r1.png")
        test, train = (data.eval_set(pre.cfg, g.records, preload=False) for g in (splits.test, splits.train))
        figs.retrievals(test, train, nearest, classes, out / "retrievals.png")  # decodes only the frames it shows
    return results | {"analysis": {"protocol": {"text": ANALYSIS}}}


def check_out(out):
    """`features --out`: a new file, or an .npz this command wrote before (it holds `about`); anything else there
    (a folder, a checkpoint, a file of the user's) is refused in one line, not overwritten."""
    out = Path(out)
    if out.is_dir():
        raise ValueError(f"--out {out}: a folder; expected the .npz file to write (e.g. {out / 'features.npz'})")
    if out.exists():
        try:
            with np.load(out) as old:
                ours = "about" in old.files and "video" in old.files
        except (OSError, ValueError, EOFError):
            ours = False
        if not ours:
            raise ValueError(
                f"--out {out}: exists and is not a features .npz of tools.analyse; refusing to overwrite it "
                "(expected a new file, or one `features` wrote)"
            )


def export(pre, splits, out, device, workers=2, clips=evaluate.CLIPS):
    """Write OUT (.npz): per video of the train and test splits, `video` and `audio` (the pooled features of both
    encoders, averaged over `clips` clips; NaN rows and `has_audio` False for videos without a clip of audio),
    `label`, `path` and `split`; `classes` and `about` (what made them, as JSON). Returns the number of videos."""
    check_out(out)
    columns = {k: [] for k in ("video", "audio", "has_audio", "label", "path", "split")}
    for split, got in zip(evaluate.SPLITS, splits):
        video = evaluate.cached_features(pre, split, got.records, device, workers, clips, "video")
        heard = [r for r in got.records if r.audio_duration >= manifest.MIN_AUDIO_SECONDS]
        audio = torch.full_like(video["pooled"], float("nan"))
        if heard:
            feats = evaluate.cached_features(pre, split, heard, device, workers, clips, "audio")
            row = {r.path: i for i, r in enumerate(got.records)}
            audio[[row[r.path] for r in heard]] = feats["pooled"]
        columns["video"].append(video["pooled"].numpy())
        columns["audio"].append(audio.numpy())
        columns["has_audio"].append(~torch.isnan(audio[:, 0]).numpy())
        columns["label"].append(video["labels"].numpy())
        columns["path"].append(np.array([r.path for r in got.records]))
        columns["split"].append(np.array([split] * len(got.records)))
    arrays = {k: np.concatenate(v) for k, v in columns.items()}
    about = {
        "checkpoint": str(Path(pre.path).resolve()),
        "checkpoint_epoch": pre.epoch,
        "checkpoint_digest": pre.digest,
    }
    about |= {"clips": clips, "dataset": str(Path(pre.cfg.data).resolve()), "layout": pre.cfg.layout}
    about["fold"] = evaluate.fold_of(pre.cfg)
    arrays |= {"classes": np.array(splits.test.classes), "about": np.array(json.dumps(about))}
    evaluate.write_atomically(out, lambda f: np.savez(f, **arrays))
    return len(arrays["label"])


# ----------------------------------------------------------------------------- report: the paper's table rows

DATASETS = {"ucf101": "UCF", "hmdb51": "HMDB"}
TABLES = [  # (title, [(task, column, result)])
    ("Tables 1-2: fine-tuning accuracy, retrieval R@5", [("finetune", "Acc", "test_acc"), ("retrieval", "R@5", "R@5")]),
    ("Table 4: retrieval", [("retrieval", k, k) for k in ("R@1", "R@5", "R@20")]),
    ("Table 5: few-shot", [("fewshot", k, k) for k in ("1-shot", "5-shot", "20-shot")]),
]
PAPER = {  # the protocol options whose values are the paper's (Sec. 5.1, Sec. 6); frames 8 and 32 both are
    "fewshot": {"trials": 50, "standardise": False},
    "finetune": {"epochs": 200, "batch_size": 192, "accumulate": 1, "lr": 1e-4, "lr_min": 1e-5, "select_on_val": False},
}


def options(rec):
    return {k: v for k, v in rec["protocol"].items() if k not in evaluate.DERIVED}


def version(rec):
    """Which version of its checkpoint file a record measured: (epoch, digest)."""
    return rec["checkpoint_epoch"], rec["checkpoint_digest"]


def number(results, name):
    """One result; a few-shot result is [mean, SD] over its trials, and its mean is the number."""
    value = results.get(name)
    return value[0] if isinstance(value, list | tuple) else value


def official(rec):
    """Whether a record ran on the layout's own split lists (not --annotations')."""
    return not rec["splits"]["annotations"]


def deviations(rec):
    """How a record's protocol and split lists differ from the paper's, in words ([] for the paper's)."""
    opts, paper = options(rec), PAPER.get(rec["task"], {})
    out = [f"{k} {opts[k]} (paper: {v})" for k, v in paper.items() if k in opts and opts[k] != v]
    out += [f"clips {opts['clips']} (paper: 10)"] if "clips" in opts else []
    out += [
        f"{n}-shot capped at {c} (the fewest train videos of a class)"
        for n, c in rec["protocol"].get("capped", {}).items()
    ]
    return out + ([] if official(rec) else [f"split lists from {rec['splits']['annotations']} (--annotations)"])


def modality(rec):
    return rec["protocol"].get("modality", "video")


def cell(recs, task, layout, mod, result):
    """A table cell: the mean over the folds of one checkpoint version, one copy of the dataset, one definition of
    its split lists and one protocol (the paper's if recorded, else the latest), and how that differs from the
    paper's. `recs` are usually one version's (table's rows)."""
    groups = {}
    for r in recs:  # never two checkpoints, two copies of a dataset or two split definitions averaged
        if r["task"] == task and r["layout"] == layout and modality(r) == mod:
            ident = [version(r), r["dataset"], r["splits"], options(r)]
            groups.setdefault(json.dumps(ident, sort_keys=True), []).append(r)
    if not groups:
        return "-", []

    # the layout's own split lists first, then the paper's protocol, the most folds, the latest written
    def rank(g):
        return official(g[0]), not deviations(g[0]), len(g), max(r["written"] for r in g)

    group = max(groups.values(), key=rank)
    values = [v for r in sorted(group, key=lambda r: r["fold"] or 0) if (v := number(r["results"], result)) is not None]
    if not values:
        return "-", []
    folds = sorted(r["fold"] for r in group) if len(group) > 1 else []
    return evaluate.percent(values) + (f" (folds {', '.join(map(str, folds))})" if folds else ""), deviations(group[0])


def table(title, columns, recs, label):
    head = [f"{DATASETS[layout]} {name}" for layout in DATASETS for _, name, _ in columns]
    lines = [f"{title} (%)", "", "| checkpoint | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    notes = []
    for ver in sorted({version(r) for r in recs}):  # a row per version of the checkpoint file
        mine = [r for r in recs if version(r) == ver]
        for mod in sorted({modality(r) for r in mine}, key=lambda m: m != "video"):
            if mod != "video" and any(task == "finetune" for task, _, _ in columns):
                continue  # fine-tuning is the video encoder's
            cells = []
            for layout in DATASETS:
                for task, _, result in columns:
                    text, dev = cell(mine, task, layout, mod, result)
                    if dev:
                        notes.append(f"{DATASETS[layout]} {task}: " + ", ".join(dev))
                        text += f" [{len(notes)}]"
                    cells.append(text)
            name = f"{label}, {version_text(ver)}{'' if mod == 'video' else f', {mod} encoder'}"
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines + [""] + [f"[{i}] not the paper's protocol: {n}" for i, n in enumerate(notes, 1)]


def version_text(ver):
    """A checkpoint version in words: its epoch and the start of its digest."""
    return f"epoch {ver[0]} ({ver[1][:8]})"


def summary(rec):
    """A record's numbers in a few words, in %."""
    if rec["task"] == "analysis":
        auroc = rec["results"]["weights"].get("faulty_auroc")
        return "faulty AUROC " + ("-" if auroc is None else f"{100 * auroc:.1f}")
    return ", ".join(f"{k} {100 * v:.1f}" for k, v in evaluate.headline({rec["task"]: rec["results"]}).items())


def report(ckpt):
    """The text `report CKPT` prints; an eval.json that is not a records file raises ValueError naming it."""
    path = Path(ckpt).parent / evaluate.NAME
    if not path.exists():
        raise FileNotFoundError(f"no evaluation records beside {ckpt} ({path}): evaluate.py writes them")
    recs = [r for r in evaluate.load(path) if r["checkpoint"] == Path(ckpt).name]
    out = [f"{len(recs)} evaluation records of {ckpt} in {path}", ""]
    for title, columns in TABLES:
        out += table(title, columns, recs, Path(ckpt).name) + [""]
    out += ["Every record", "", "| task | dataset | layout | fold | numbers (%) | test videos (missing) | protocol |"]
    out.append("|---|---|---|---:|---|---|---|")
    for r in sorted(recs, key=lambda r: (r["task"], r["dataset"], r["fold"] or 0)):
        test = r["videos"]["test"]
        fold = "-" if r["fold"] is None else r["fold"]
        protocol = r["protocol"]["text"] + f"; {version_text(version(r))}"
        protocol += "".join(f"; split lists from {a}" for a in [r["splits"]["annotations"]] if a)
        videos = f"{test['used']} ({test['missing']})"
        out.append(f"| {r['task']} | {r['dataset']} | {r['layout']} | {fold} | {summary(r)} | {videos} | {protocol} |")
    return "\n".join(out)


def main(argv=None):
    p = OneLineParser(prog="tools/analyse.py", description=__doc__.split("\n\n")[0])
    p.add_argument("task", choices=["analysis", "features", "report"], help="see the module's docstring")
    evaluate.data_options(p)
    p.add_argument("--out", help="features: the .npz to write (a new file, or one features wrote)")
    p.add_argument("--no-figures", action="store_true", help="analysis: without Fig. 5, 10 and 11's pictures")
    args = p.parse_args(argv)
    if args.task == "report":
        ckpt = Path(args.ckpt) / "ckpt.pt" if Path(args.ckpt).is_dir() else Path(args.ckpt)
        try:
            print(report(ckpt))
        except (FileNotFoundError, ValueError) as err:  # an unreadable eval.json: nothing of it read
            aside = "; the next evaluation sets it aside" if isinstance(err, ValueError) else ""
            raise SystemExit(f"{p.prog}: {err}{aside}") from None
        return
    if args.task == "features":
        if not args.out:
            p.error("features: --out FILE.npz names the file to write")
        if len(args.fold or []) > 1:  # one --out file: a second fold would overwrite the first
            p.error(f"features: one --fold per file (given {' '.join(map(str, args.fold))}); run it once per fold")
        try:
            check_out(args.out)  # before the checkpoint is read: a folder, or a file of another kind, stays
        except ValueError as err:
            p.error(str(err))
    elif any(getattr(args, k) for k in ("data", "layout", "annotations", "manifest", "fold")):
        p.error("analysis: the bank belongs to the pre-training data; it takes no --data, --layout, --fold or lists")
    device, workers, overrides = evaluate.started(args, p)
    try:
        pre = evaluate.read_pretrained(args.ckpt)
        if args.task == "analysis":
            res = analysis(args.ckpt, pre, workers, device, args.clips, not args.no_figures, args.allow_missing)
            print(json.dumps({k: v for k, v in res.items() if k != "analysis"}, indent=1))
            return
        folded = overrides | {"preload": args.preload} | ({"fold": args.fold[0]} if args.fold else {})
        pre, splits = prepared(pre, folded, allow_missing=args.allow_missing)
        n = export(pre, splits, args.out, device, workers, args.clips)
        print(f"{p.prog}: {n} videos' pooled video and audio features -> {args.out}")
    except (checkpoint.CheckpointError, FileNotFoundError, ValueError) as err:
        raise SystemExit(f"{p.prog}: {err}") from None


if __name__ == "__main__":
    main(sys.argv[1:])
