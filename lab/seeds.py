"""The seed registry: which seeds each experiment under results/ used, in one table, and where the next plan's
fresh seeds start. A claim's seeds are never a screen's, a pilot's or a check's (the claims' standard), so a
new plan takes its seeds from `fresh` and adds its row here in the plan's commit, before its first run.

    python -m lab.seeds             # the table: experiment, seeds, what they were for
    python -m lab.seeds fresh 15    # 15 seeds no experiment used, from the next free hundred

tests/test_seeds.py reads every seed the committed results name (a "seed" or "seeds" value, a key seedN, a
settings entry keyed by its seed, a file named seedN) and finds each in its experiment's row; it also holds
that no two rows share a seed unless DEVELOPMENT or SHARED says why.
"""

import argparse
import json
import re
from pathlib import Path

RESULTS = Path("results")

# experiment (a folder under results/, or a file's stem there; the longest naming a path wins) -> its seeds, what for
USED: dict[str, tuple[range | tuple[int, ...], str]] = {
    "demo": ((0,), "make demo's reference seed"),
    "finetune_curve": ((0,), "the fine-tune curve of the demo's xID"),
    "epoch_speed": (range(0, 8), "the faster epoch's equivalence (0-2) and branches (3-7)"),
    "warmup_ranks": (range(0, 3), "two ranks against one process"),
    "regime": (range(100, 103), "the one-regime screen"),
    "ccp_length": (range(200, 203), "CCP's branch length"),
    "power_pilot": (range(300, 304), "the pilot that sized the first claims run"),
    "claims": (range(400, 415), "the first claims run"),
    "faults_screen": (range(600, 603), "the faults screen"),
    "f3b_warmup": (range(600, 603), "F3b's longer warm-ups, grown from the faults screen's"),
    "demo_screen": (range(700, 703), "the branch-length screen"),
    "ccp_drift": (range(750, 753), "the weak-bank drift"),
    "spread": (
        (0, 999, *range(1000, 1004), *range(1100, 1104), *range(1110, 1113), *range(1120, 1126), *range(1200, 1208))
        + tuple(range(1210, 1218)),
        "the spread: make demo timed (0), a 1-epoch check (999), the diagnosis (1000-1003), the regime screen "
        "(1100-1103, 1110-1112; 1120-1125 planned, never run), the 8-seed checks (1200-1207, 1210-1217)",
    ),
    "drums": ((1300, 1301, 1302, 1310, 1320, 1321, 1322), "soft targets on real recordings"),
    "claims/rerun": (range(1500, 1515), "the claims' rerun (RERUN_PLAN.md)"),
}
# Seeds any check of the code may use (the demo's reference and its equivalence checks), never a claim or a screen.
DEVELOPMENT = range(0, 8)
# Rows that share seeds by design, and why.
SHARED = {frozenset({"faults_screen", "f3b_warmup"}): "F3b trains the faults screen's warm-ups on to 120 epochs"}


def seeds_of(name: str) -> set[int]:
    return set(USED[name][0])


def spans(seeds) -> str:
    """1000 1001 1002 1100 -> '1000-1002, 1100'."""
    out, s = [], sorted(seeds)
    for x in s:
        if out and x == out[-1][1] + 1:
            out[-1][1] = x
        else:
            out.append([x, x])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def experiment(rel: str) -> str | None:
    """The registry row a path under results/ belongs to: the longest key naming it, its folder or its stem."""
    keys = [k for k in USED if rel == k or rel.startswith((k + "/", k + "."))]
    return max(keys, key=len) if keys else None


def _named(obj, found: set[int], in_settings=False) -> None:
    """Every seed a JSON document names: "seed"/"seeds" values, seedN keys, settings entries keyed by a number."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("seed", "seeds"):
                found.update(x for x in (v if isinstance(v, list) else [v]) if isinstance(x, int))
            elif m := re.fullmatch(r"seed(\d+)", k):
                found.add(int(m.group(1)))
            elif in_settings and k.isdigit():
                found.add(int(k))
            _named(v, found, in_settings=k == "settings")
    elif isinstance(obj, list):
        for v in obj:
            _named(v, found)


def named_in(root: Path = RESULTS) -> dict[str, set[int]]:
    """Path under root -> the seeds that file names (its name and, for JSON, its content)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        found = {int(s) for s in re.findall(r"(?:^|_)seed(\d+)", path.name)}
        if path.suffix == ".json":
            _named(json.loads(path.read_text()), found)
        if found:
            out[path.relative_to(root).as_posix()] = found
    return out


def unregistered(root: Path = RESULTS) -> list[str]:
    """One line per file naming a seed its experiment's row lacks (or with no row at all)."""
    problems = []
    for rel, found in named_in(root).items():
        name = experiment(rel)
        if name is None:
            problems.append(f"{root / rel}: seeds {sorted(found)}, but lab/seeds.py has no row for it")
        elif extra := sorted(found - seeds_of(name)):
            problems.append(f"{root / rel}: seeds {extra} are not in lab/seeds.py's row '{name}'")
    return problems


def overlaps() -> list[str]:
    """One line per pair of rows that share a seed outside DEVELOPMENT with no reason in SHARED."""
    names = sorted(USED)
    return [
        f"'{a}' and '{b}' share seeds {sorted(common)}"
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if (common := seeds_of(a) & seeds_of(b) - set(DEVELOPMENT)) and frozenset({a, b}) not in SHARED
    ]


def fresh(n: int) -> list[int]:
    """n seeds no row holds: from the first hundred above every seed in use."""
    start = (max(s for name in USED for s in seeds_of(name)) // 100 + 1) * 100
    return list(range(start, start + n))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m lab.seeds", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    f = sub.add_parser("fresh", help="n seeds no experiment used, for a new plan")
    f.add_argument("n", type=int)
    args = parser.parse_args(argv)
    if args.command == "fresh":
        if args.n < 1:
            parser.error(f"n: expected 1 or more, got {args.n}")
        print(" ".join(map(str, fresh(args.n))))
        return
    for name, (seeds, what) in sorted(USED.items(), key=lambda kv: (max(kv[1][0]), kv[0])):
        print(f"{name:<15} {spans(seeds):<32} {what}")
    print(f"fresh: {fresh(1)[0]} on (no row holds them); {spans(DEVELOPMENT)} are for checks of the code only")


if __name__ == "__main__":
    main()
