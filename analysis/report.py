"""A checkpoint's evaluation records as the paper's table rows, in %: Tables 1-2 (fine-tuning accuracy and
retrieval R@5 on UCF101 and HMDB51, Sec. 5), Table 4 (retrieval R@1/5/20) and Table 5 (few-shot 1/5/20-shot,
Sec. 6). A cell is the mean over the folds recorded, with their standard deviation when there are several;
a cell measured under a protocol other than the paper's is marked and its deviation named below the table.
Then every record of the checkpoint, whatever its dataset; and `fold_table`, the rows of one `--fold 1 2 3`
run with their mean and standard deviation.

    .venv/bin/python evaluate.py report runs/k400/ckpt.pt

The records are persistence/records.py's. Tests: tests/test_eval_records.py
"""

import json
from pathlib import Path
from typing import Any

import numpy as np

from persistence import records

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


def number(results: dict[str, Any], name: str) -> float | None:
    """One result; a few-shot result is [mean, std] over its trials, and its mean is the number."""
    value = results.get(name)
    return value[0] if isinstance(value, list) else value


def deviations(rec: dict[str, Any]) -> list[str]:
    """How a record's protocol differs from the paper's, in words ([] for the paper's)."""
    opts, paper = records.options(rec), PAPER.get(rec["task"], {})
    out = [f"{k} {opts[k]} (paper: {v})" for k, v in paper.items() if k in opts and opts[k] != v]
    return out + [f"{k} {opts[k]} (paper: 10)" for k in ("clips",) if k in opts]


def modality(rec: dict[str, Any]) -> str:
    return rec["protocol"].get("modality", "video")


def percent(values: list[float]) -> str:
    """Mean in %, and the standard deviation over folds when there are several."""
    mean = 100 * float(np.mean(values))
    return f"{mean:.1f}" if len(values) == 1 else f"{mean:.1f} ± {100 * float(np.std(values, ddof=1)):.1f}"


def cell(recs: list[dict[str, Any]], task: str, layout: str, mod: str, result: str) -> tuple[str, list[str]]:
    """A table cell: the mean over the folds of one protocol (the paper's if recorded, else the latest),
    and that protocol's deviations."""
    found = [r for r in recs if r["task"] == task and r["layout"] == layout and modality(r) == mod]
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in found:  # folds of one copy of the dataset under one protocol: never two copies averaged
        groups.setdefault(json.dumps([r["dataset"], records.options(r)], sort_keys=True), []).append(r)
    if not groups:
        return "-", []
    # the paper's protocol first, then the most folds, then the latest written
    group = max(groups.values(), key=lambda g: (not deviations(g[0]), len(g), max(r["written"] or "" for r in g)))
    values = [v for r in sorted(group, key=lambda r: r["fold"] or 0) if (v := number(r["results"], result)) is not None]
    if not values:
        return "-", []
    folds = [r["fold"] for r in group]
    text = percent(values) + (f" (folds {', '.join(map(str, sorted(folds)))})" if len(folds) > 1 else "")
    return text, deviations(group[0])


def table(title: str, columns: list[tuple[str, str, str]], recs: list[dict[str, Any]], label: str) -> list[str]:
    head = [f"{DATASETS[layout]} {name}" for layout in DATASETS for _, name, _ in columns]
    lines = [f"{title} (%)", "", "| checkpoint | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    notes = []
    for mod in sorted({modality(r) for r in recs}, key=lambda m: m != "video"):
        if mod != "video" and any(task == "finetune" for task, _, _ in columns):
            continue  # fine-tuning is the video encoder's
        cells = []
        for layout in DATASETS:
            for task, _, result in columns:
                text, dev = cell(recs, task, layout, mod, result)
                if dev:
                    notes.append(f"{DATASETS[layout]} {task}: " + ", ".join(dev))
                    text += f" [{len(notes)}]"
                cells.append(text)
        lines.append(f"| {label}{'' if mod == 'video' else f', {mod} encoder'} | " + " | ".join(cells) + " |")
    return lines + [""] + [f"[{i}] not the paper's protocol: {n}" for i, n in enumerate(notes, 1)]


def summary(rec: dict[str, Any]) -> str:
    """A record's numbers in a few words, in %."""
    res = rec["results"]
    if rec["task"] == "analysis":
        auroc = res.get("weights", {}).get("faulty_auroc")
        return "faulty AUROC " + ("-" if auroc is None else f"{100 * auroc:.1f}")
    names = [k for k in res if k.startswith("R@") or k.endswith("-shot") or k == "test_acc"]
    return ", ".join(f"{k} {100 * number(res, k):.1f}" for k in names)


def report(ckpt: str | Path) -> str:
    """The text `evaluate.py report CKPT` prints."""
    path = Path(ckpt).parent / records.NAME
    if not path.exists():
        raise FileNotFoundError(f"no evaluation records beside {ckpt} ({path}): evaluate.py writes them")
    recs = records.of_checkpoint(records.load(path), ckpt)
    epochs = sorted({r["checkpoint_epoch"] for r in recs if r["checkpoint_epoch"] is not None})
    label = Path(ckpt).name + (f", epoch {epochs[-1]}" if epochs else "")
    out = [f"{len(recs)} evaluation records of {ckpt} in {path}", ""]
    for title, columns in TABLES:
        out += table(title, columns, recs, label) + [""]
    out += ["Every record", "", "| task | dataset | layout | fold | numbers (%) | test videos (missing) | protocol |"]
    out.append("|---|---|---|---:|---|---|---|")
    for r in sorted(recs, key=lambda r: (r["task"], r["dataset"] or "", r["fold"] or 0)):
        test = (r["videos"] or {}).get("test")
        videos = f"{test['used']} ({test['missing']})" if test else "-"
        where = r["dataset"] or f"not recorded ({r.get('legacy', '')})"
        fold = "-" if r["fold"] is None else r["fold"]
        protocol = r["protocol"]["text"] + (f"; epoch {r['checkpoint_epoch']}" if r["checkpoint_epoch"] else "")
        out.append(f"| {r['task']} | {where} | {r['layout'] or '-'} | {fold} | {summary(r)} | {videos} | {protocol} |")
    return "\n".join(out)


def fold_table(by_fold: dict[int, dict[str, Any]]) -> str:
    """The rows of a run over several folds ({fold: evaluate's results}), then their mean ± SD, in %."""
    rows = {
        fold: {k: number(part, k) for part in res.values() if isinstance(part, dict) for k in part if k != "protocol"}
        for fold, res in by_fold.items()
    }
    names = [k for k, v in next(iter(rows.values())).items() if isinstance(v, float)]
    lines = ["| fold | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    lines += [f"| {fold} | " + " | ".join(f"{100 * row[k]:.1f}" for k in names) + " |" for fold, row in rows.items()]
    lines.append("| mean ± SD | " + " | ".join(percent([row[k] for row in rows.values()]) for k in names) + " |")
    return "\n".join(lines)
