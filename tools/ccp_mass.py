"""Where CCP's soft-target mass goes, by candidate: the mechanism behind soft targets that hold back the
cross-modal correspondence (paper Sec. 4.2, eqs. (13)-(14); the targets of eqs. (8)-(9)).

Each anchor i's S(j|i) over its 1+K candidates (lam = 1: the soft part alone; the target the loss uses
is T = (1 - lam) 1[j=i] + lam S, so T's share on the instance itself is 1 - lam + lam S's) splits into
    itself         column 0, the instance's own memory
    source         the other clips of the anchor's source (ground_truth.csv's `source`: near-duplicates)
    class          the anchor's class, from other sources (the faulty negatives CCP is meant to find)
    other          other classes
beside `chance`, the share of the 1+K candidates in each group. Candidates are drawn as the bank draws
them (uniform, with replacement, never the anchor: tools/bank_report.py's draw_candidates), from
a generator of their own, over the bank's slots. Both sides: S_v, eq. (13) (the anchor's audio
memory against the candidates' video memories), and S_a, eq. (14)'s counterpart. Clean and injected
(or natural) faulty anchors are also reported apart: a faulty anchor's own audio is not its picture's.

    python -m tools.ccp_mass RUN/ckpt.pt [RUN/ckpt_epoch0029.pt ...] [--draws 4] [--json OUT]

Run with train.py --save-every N to have the warm-up's end and the branch's epochs as checkpoints. The
data root (for ground_truth.csv) is the checkpoint's --data unless --data says otherwise; a set without
sources makes every instance its own. Tests: tests/test_ccp_mass.py
"""

import argparse
import csv
import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from checkpoint import CheckpointError, config_from_dict, load_checkpoint
from losses import SOFT_TARGET_STRATEGIES
from tools.bank_report import draw_candidates, soft_targets_at

GROUPS = ("itself", "source", "class", "other")


def candidate_groups(cand: Tensor, labels: Tensor, sources: Tensor) -> Tensor:
    """The group (an index into GROUPS) of each candidate of cand (A, 1+K) against its anchor, column 0.
    labels, sources: (N,) of the bank's slots. -> (A, 1+K) long"""
    same_source = sources[cand] == sources[cand[:, :1]]  # (A, 1+K)
    same_class = labels[cand] == labels[cand[:, :1]]  # (A, 1+K)
    group = torch.where(same_source, 1, torch.where(same_class, 2, 3))  # (A, 1+K)
    group[:, 0] = 0  # the anchor itself (never drawn again as a negative)
    return group


def split_mass(S: Tensor, group: Tensor) -> Tensor:
    """Each anchor's mass per group: S, group (A, 1+K) -> (A, len(GROUPS)), rows summing to S's."""
    return torch.zeros(S.shape[0], len(GROUPS), dtype=S.dtype).scatter_add_(1, group, S)


@torch.no_grad()
def mass_by_candidate(
    video: Tensor,
    audio: Tensor,
    labels: Tensor,
    sources: Tensor,
    faulty: Tensor | None = None,
    num_negatives: int = 256,
    tau_s: float = 0.02,
    tau_t: float = 0.07,
    strategy: str = "ccp",
    draws: int = 1,
    seed: int = 0,
) -> dict[str, Any]:
    """video, audio (N, D) unit-norm memories of the slots, labels, sources (N,), faulty (N,) bool
    or None. Every slot is an anchor in each of `draws` draws of candidates. -> {"S_v", "S_a", "chance":
    {group: mean share per anchor}, and with `faulty`, "clean" and "faulty": {"S_v", "S_a"} over those
    anchors; "anchors", "K"}"""
    video, audio, labels, sources = video.float().cpu(), audio.float().cpu(), labels.cpu(), sources.cpu()
    n = video.shape[0]
    parts: dict[str, list[Tensor]] = {"S_v": [], "S_a": [], "chance": []}
    anchors = []
    for d in range(draws):
        cand = draw_candidates(n, n, num_negatives, seed + d)  # (N, 1+K): every slot, in a random order
        group = candidate_groups(cand, labels, sources)  # (N, 1+K)
        S_v, S_a = soft_targets_at(video, audio, cand, strategy, tau_s, tau_t, labels)  # (N, 1+K) each
        parts["S_v"].append(split_mass(S_v, group))  # (N, 4)
        parts["S_a"].append(split_mass(S_a, group))
        parts["chance"].append(split_mass(torch.full_like(S_v, 1 / cand.shape[1]), group))
        anchors.append(cand[:, 0])
    mass = {k: torch.cat(v) for k, v in parts.items()}  # (draws * N, 4) each
    anchor = torch.cat(anchors)  # (draws * N,)

    def means(rows: Tensor) -> dict[str, float]:
        return {g: float(x) for g, x in zip(GROUPS, rows.mean(0))}

    out: dict[str, Any] = {k: means(v) for k, v in mass.items()}
    if faulty is not None:
        bad = faulty.cpu()[anchor]  # (draws * N,)
        for name, rows in (("clean", ~bad), ("faulty", bad)):
            if rows.any():
                out[name] = {k: means(mass[k][rows]) for k in ("S_v", "S_a")}
    return out | {"anchors": n, "K": num_negatives}


def sources_of(paths: list[str], root: str | Path) -> tuple[Tensor, bool]:
    """Each slot's source id, from ROOT/ground_truth.csv's `source` (a slot's path taken relative to
    ROOT); (ids, True), or where the set names no sources, (each slot its own, False). -> ((N,) long, bool)"""
    root, table = Path(root), Path(root) / "ground_truth.csv"
    rows = list(csv.DictReader(open(table))) if table.is_file() else []
    if not rows or "source" not in rows[0]:
        return torch.arange(len(paths)), False
    by_path = {r["path"]: r["source"] for r in rows}
    names = []
    for p in paths:
        rel = os.path.relpath(p, root).replace(os.sep, "/")
        if rel not in by_path:
            raise ValueError(f"{p}: not in {table} (is --data the set this run trained on?)")
        names.append(by_path[rel])
    ids = {name: k for k, name in enumerate(dict.fromkeys(names))}
    return torch.tensor([ids[name] for name in names]), True


def analyse(ckpt: str | Path, data: str | None = None, draws: int = 4, strategy: str = "ccp") -> dict[str, Any]:
    """mass_by_candidate of a train.py checkpoint's bank, with its run's K, tau_s and tau_t."""
    state = load_checkpoint(ckpt)
    cfg = config_from_dict(state["config"], source=str(ckpt))
    inst, bank = state["instances"], state["bank"]
    sources, named = sources_of(inst["paths"], data or cfg.data)
    epoch = state.get("epoch", -1)
    result = mass_by_candidate(
        bank["video"],
        bank["audio"],
        inst["labels"],
        sources,
        inst["faulty"],
        num_negatives=min(cfg.num_negatives, len(bank["video"]) - 1),
        tau_s=cfg.tau_s,
        tau_t=cfg.tau_t,
        strategy=strategy,
        draws=draws,
    )
    stage = "xid" if epoch < cfg.warmup_epochs else cfg.loss
    return result | {"checkpoint": str(ckpt), "epoch": epoch, "stage": stage, "sources": named, "lam": cfg.lam}


def table(r: dict[str, Any], strategy: str = "ccp") -> str:
    """One checkpoint's split as a few lines of text."""
    head = f"{r['checkpoint']} (epoch {r['epoch']}, {r['stage']}): {strategy}'s S, K={r['K']}, {r['anchors']} anchors"
    if not r["sources"]:
        head += "; the set names no sources: each clip its own"
    cols = [("S_v", r["S_v"]), ("S_a", r["S_a"])]
    cols += [(f"{k} S_v", r[k]["S_v"]) for k in ("clean", "faulty") if k in r]
    cols.append(("chance", r["chance"]))
    lines = [head, f"  {'candidate':10s}" + "".join(f"{name:>14s}" for name, _ in cols)]
    for g in GROUPS:
        lines.append(f"  {g:10s}" + "".join(f"{col[g]:14.3f}" for _, col in cols))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoints", nargs="+", help="train.py checkpoints (OUT/ckpt.pt, OUT/ckpt_epochNNNN.pt)")
    p.add_argument("--data", help="the set's root, for its ground_truth.csv (default: the checkpoint's --data)")
    p.add_argument("--draws", type=int, default=4, help="draws of candidates per anchor (default 4)")
    p.add_argument("--strategy", choices=SOFT_TARGET_STRATEGIES, default="ccp", help="which S to split")
    p.add_argument("--json", help="also write the results, a list with one entry per checkpoint, here")
    args = p.parse_args(argv)
    if args.draws < 1:
        p.error(f"--draws {args.draws}: expected at least 1")
    results = []
    for ckpt in args.checkpoints:
        try:
            results.append(analyse(ckpt, args.data, args.draws, args.strategy))
        except (OSError, ValueError, CheckpointError) as err:  # a missing or unreadable file, another set's
            raise SystemExit(f"tools.ccp_mass: {err}") from None
        print(table(results[-1], args.strategy))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
