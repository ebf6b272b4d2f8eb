"""A checkpoint's evaluation records as the paper's table rows, in %: Tables 1-2 (fine-tuning accuracy and
retrieval R@5 on UCF101 and HMDB51, Sec. 5), Table 4 (retrieval R@1/5/20) and Table 5 (few-shot 1/5/20-shot,
Sec. 6). A row per version of the checkpoint file (its epoch and content digest: a run that went on training
saved a later one under the same name), a cell the mean over the folds recorded of that version, one copy of
the dataset and one definition of its split lists, with their standard deviation when there are several; a
cell measured under a protocol other than the paper's, or on split lists other than the layout's own
(--annotations), is marked and the difference named below the table. Then every record of the checkpoint,
whatever its dataset; and `fold_table`, the rows of one `--fold 1 2 3` run (each task's numbers: R@k, n-shot,
fine-tune top-1) with their mean and standard deviation.

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
    return value[0] if isinstance(value, list | tuple) else value


def numbers(results: dict[str, Any]) -> dict[str, float]:
    """A task's headline numbers, by their names in the tables: R@k, n-shot (the trials' mean), and the
    fine-tune's top-1 (test_acc)."""
    names = [k for k in results if k.startswith("R@") or k.endswith("-shot") or k == "test_acc"]
    return {"top-1" if k == "test_acc" else k: number(results, k) for k in names}


def deviations(rec: dict[str, Any]) -> list[str]:
    """How a record's protocol and split lists differ from the paper's, in words ([] for the paper's)."""
    opts, paper = records.options(rec), PAPER.get(rec["task"], {})
    out = [f"{k} {opts[k]} (paper: {v})" for k, v in paper.items() if k in opts and opts[k] != v]
    out += [f"{k} {opts[k]} (paper: 10)" for k in ("clips",) if k in opts]
    out += [
        f"{n}-shot capped at {c} (the fewest train videos of a class)"
        for n, c in rec["protocol"].get("capped", {}).items()
    ]
    return out + ([] if official(rec) else [f"split lists from {rec['splits']['annotations']} (--annotations)"])


def official(rec: dict[str, Any]) -> bool:
    """Whether a record ran on the layout's own split lists (not --annotations')."""
    return not (rec.get("splits") or {}).get("annotations")


def modality(rec: dict[str, Any]) -> str:
    return rec["protocol"].get("modality", "video")


def percent(values: list[float]) -> str:
    """Mean in %, and the standard deviation over folds when there are several."""
    mean = 100 * float(np.mean(values))
    return f"{mean:.1f}" if len(values) == 1 else f"{mean:.1f} ± {100 * float(np.std(values, ddof=1)):.1f}"


def cell(recs: list[dict[str, Any]], task: str, layout: str, mod: str, result: str) -> tuple[str, list[str]]:
    """A table cell: the mean over the folds of one checkpoint version, one copy of the dataset, one
    definition of its split lists and one protocol (the paper's if recorded, else the latest), and how
    that differs from the paper's. `recs` are usually one version's (table's rows)."""
    found = [r for r in recs if r["task"] == task and r["layout"] == layout and modality(r) == mod]
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in found:  # never two checkpoints, two copies of a dataset or two split definitions averaged
        ident = [records.version(r), r["dataset"], r.get("splits"), records.options(r)]
        groups.setdefault(json.dumps(ident, sort_keys=True), []).append(r)
    if not groups:
        return "-", []

    # the layout's own split lists first, then the paper's protocol, the most folds, the latest written
    def rank(g: list[dict[str, Any]]) -> tuple:
        return official(g[0]), not deviations(g[0]), len(g), max(r["written"] or "" for r in g)

    group = max(groups.values(), key=rank)
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
    for version in sorted({records.version(r) for r in recs}):  # a row per version of the checkpoint file
        mine = [r for r in recs if records.version(r) == version]
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
            name = f"{label}, {version_text(version)}{'' if mod == 'video' else f', {mod} encoder'}"
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines + [""] + [f"[{i}] not the paper's protocol: {n}" for i, n in enumerate(notes, 1)]


def version_text(version: tuple[int, str]) -> str:
    """A checkpoint version in words: its epoch and the start of its digest."""
    epoch, digest = version
    return ("epoch not recorded" if epoch < 0 else f"epoch {epoch}") + (f" ({digest[:8]})" if digest else "")


def summary(rec: dict[str, Any]) -> str:
    """A record's numbers in a few words, in %."""
    res = rec["results"]
    if rec["task"] == "analysis":
        auroc = res.get("weights", {}).get("faulty_auroc")
        return "faulty AUROC " + ("-" if auroc is None else f"{100 * auroc:.1f}")
    return ", ".join(f"{k} {100 * v:.1f}" for k, v in numbers(res).items())


def report(ckpt: str | Path) -> str:
    """The text `evaluate.py report CKPT` prints. An eval.json that is not a records file raises
    records.RecordsError naming it (the next evaluation sets it aside)."""
    path = Path(ckpt).parent / records.NAME
    if not path.exists():
        raise FileNotFoundError(f"no evaluation records beside {ckpt} ({path}): evaluate.py writes them")
    recs = records.of_checkpoint(records.load(path), ckpt)
    label = Path(ckpt).name
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
        protocol = r["protocol"]["text"] + f"; {version_text(records.version(r))}"
        protocol += "".join(f"; split lists from {a}" for a in [(r.get("splits") or {}).get("annotations")] if a)
        out.append(f"| {r['task']} | {where} | {r['layout'] or '-'} | {fold} | {summary(r)} | {videos} | {protocol} |")
    return "\n".join(out)


WEIGHTS = {"faulty_auroc": "weights' AUROC", "mean_weight_faulty": "mean w faulty", "mean_weight_clean": "mean w clean"}


def fold_table(by_fold: dict[int | None, dict[str, Any]]) -> str:
    """The rows of a run over one or several folds ({fold: evaluate's results}, None: the set has none): every
    task's numbers (retrieval R@k, few-shot n-shot, fine-tune top-1, the analysis' weights), in % as the
    tables give them, then over several folds their mean ± SD."""
    rows = {
        fold or "-": {
            (f"{task} {k}" if task == "finetune" else k): v
            for task, part in res.items()
            if isinstance(part, dict) and "protocol" in part
            for k, v in numbers(part).items()
        }
        | {shown: res["weights"][k] for k, shown in WEIGHTS.items() if res.get("weights", {}).get(k) is not None}
        for fold, res in by_fold.items()
    }
    names = list(dict.fromkeys(k for row in rows.values() for k in row))  # every fold's, in order
    lines = ["| fold | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    cells = [[f"{100 * row[k]:.1f}" if k in row else "-" for k in names] for row in rows.values()]
    lines += [f"| {fold} | " + " | ".join(c) + " |" for fold, c in zip(rows, cells)]
    if len(rows) > 1:
        means = [percent([row[k] for row in rows.values() if k in row]) for k in names]
        lines.append("| mean ± SD | " + " | ".join(means) + " |")
    return "\n".join(lines)
