"""The seed registry: which seeds each experiment under lab/results/ used, in one table, and where the next plan's
fresh seeds start. A claim's seeds are never a screen's, a pilot's or a check's (the claims' standard), so a
new plan takes its seeds from `fresh` and adds its row here in the plan's commit, before its first run.

    python -m lab.seeds             # the table: experiment, seeds, what they were for
    python -m lab.seeds fresh 15    # 15 seeds no experiment used, from the next free hundred

tests/test_seeds.py reads the seeds every tracked file under lab/results/ names in one of these forms, and finds
each in its experiment's row: a file named seedN; in JSON, a "seed" or "seeds" value, a key or string holding
seedN as a word of a path or a name (seed750, W16/seed750, runs/drums/seed1300_faulty25/...), and the keys of
a document, or of its "settings", "signals" or "per seed" entries, that are all numbers. A seed only a
Markdown file names is not read. The test also holds that no two rows share a seed unless SHARED says why,
and that only the rows in DEVELOPMENT_ROWS hold a development seed.
"""

import argparse
import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# experiment (a folder under lab/results/, or a file's stem there; the longest naming a path wins) -> seeds, what for
REGISTRY: dict[str, tuple[tuple[int, ...], str]] = {
    "demo": ((0,), "make demo's reference seed"),
    "finetune_curve": ((0,), "the fine-tune curve of the demo's xID"),
    "protocol_effects": ((0,), "the protocols' variants on a demo xID"),
    "epoch_speed": (tuple(range(0, 8)), "the faster epoch's equivalence (0-2) and branches (3-7)"),
    "warmup_ranks": (tuple(range(0, 3)), "two ranks against one process"),
    "regime": (tuple(range(100, 103)), "the one-regime screen"),
    "ccp_length": (tuple(range(200, 203)), "CCP's branch length"),
    "power_pilot": (tuple(range(300, 304)), "the pilot that sized the first claims run"),
    "claims": (tuple(range(400, 415)), "the first claims run"),
    "faults_screen": (tuple(range(600, 603)), "the faults screen"),
    "f3b_warmup": (tuple(range(600, 603)), "F3b's longer warm-ups, grown from the faults screen's"),
    "demo_screen": (tuple(range(700, 703)), "the branch-length screen"),
    "ccp_drift": (tuple(range(750, 753)), "the weak-bank drift"),
    "spread": (
        (0, 999, *range(1000, 1004), *range(1100, 1104), *range(1110, 1113), *range(1120, 1126))
        + (*range(1200, 1208), *range(1210, 1218)),
        "the spread: make demo timed (0), a 1-epoch check (999), the diagnosis, the regime screen (1120-1125 "
        "planned, never run), the 8-seed checks",
    ),
    "drums": ((1300, 1301, 1302, 1310, 1320, 1321, 1322), "soft targets on real recordings"),
    "claims/rerun": (tuple(range(1500, 1515)), "the claims' rerun (RERUN_PLAN.md)"),
}
# Seeds for checks of the code (the demo's reference, equivalence checks), held only by these rows.
DEVELOPMENT = range(0, 8)
DEVELOPMENT_ROWS = {"demo", "finetune_curve", "protocol_effects", "epoch_speed", "warmup_ranks", "spread"}
# Rows that share seeds by design, and why.
SHARED = {frozenset({"faults_screen", "f3b_warmup"}): "F3b trains the faults screen's warm-ups on to 120 epochs"}
SEED_WORD = re.compile(r"(?:^|[/_])seed(\d+)(?=$|[/_.])")  # seed750, W16/seed750, control_seed0, .../seed1300_faulty25
KEYED_BY_SEED = ("settings", "signals", "per seed")  # entries whose number keys are seeds


def seeds_of(name: str) -> set[int]:
    return set(REGISTRY[name][0])


def spans(seeds) -> str:
    """1000 1001 1002 1100 -> '1000-1002, 1100'."""
    out = []
    for x in sorted(seeds):
        if out and x == out[-1][1] + 1:
            out[-1][1] = x
        else:
            out.append([x, x])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def row_of(rel: str) -> str | None:
    """The registry row of a path under lab/results/: the longest key that is the path, its folder or its stem."""
    keys = [k for k in REGISTRY if rel == k or rel.startswith((k + "/", k + "."))]
    return max(keys, key=len) if keys else None


def _seeds_in_json(obj, found: set[int], keyed=True) -> None:
    """Every seed a JSON value names, in the forms the module's docstring lists (`keyed`: its number keys are seeds)."""
    if isinstance(obj, dict):
        if keyed and obj and all(k.isdigit() for k in obj):
            found.update(int(k) for k in obj)
        for k, v in obj.items():
            if k in ("seed", "seeds"):
                found.update(x for x in (v if isinstance(v, list) else [v]) if type(x) is int)
            found.update(int(s) for s in SEED_WORD.findall(k))
            _seeds_in_json(v, found, keyed=k in KEYED_BY_SEED)
    elif isinstance(obj, list):
        for v in obj:
            _seeds_in_json(v, found, keyed=False)
    elif isinstance(obj, str):
        found.update(int(s) for s in SEED_WORD.findall(obj))


def tracked(root: Path = ROOT) -> list[Path]:
    """The files git tracks under root/lab/results: a run's half-written or uncommitted files are not read."""
    out = subprocess.run(["git", "ls-files", "-z", "lab/results"], cwd=root, capture_output=True, text=True, check=True)
    return [root / p for p in out.stdout.split("\0") if p]


def named_in(files: list[Path], results: Path) -> dict[str, set[int]]:
    """Path under `results` -> the seeds that file names (its name and, for JSON, its content)."""
    out = {}
    for path in sorted(files):
        found = {int(s) for s in SEED_WORD.findall(path.name)}
        if path.suffix == ".json":
            _seeds_in_json(json.loads(path.read_text()), found)
        if found:
            out[path.relative_to(results).as_posix()] = found
    return out


def unregistered(files: list[Path] | None = None, results: Path = ROOT / "lab" / "results") -> list[str]:
    """One line per file naming a seed its experiment's row lacks (or with no row at all)."""
    problems = []
    for rel, found in named_in(tracked() if files is None else files, results).items():
        name = row_of(rel)
        if name is None:
            problems.append(f"lab/results/{rel}: seeds {sorted(found)}, but lab/seeds.py has no row for it")
        elif extra := sorted(found - seeds_of(name)):
            problems.append(f"lab/results/{rel}: seeds {extra} are not in lab/seeds.py's row '{name}'")
    return problems


def overlaps() -> list[str]:
    """One line per pair of rows sharing a seed outside DEVELOPMENT with no reason in SHARED, and per row outside
    DEVELOPMENT_ROWS holding a development seed."""
    names = sorted(REGISTRY)
    shared = [
        f"'{a}' and '{b}' share seeds {sorted(common)}"
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if (common := (seeds_of(a) & seeds_of(b)) - set(DEVELOPMENT)) and frozenset({a, b}) not in SHARED
    ]
    dev = [
        f"'{n}' holds development seeds {sorted(seeds_of(n) & set(DEVELOPMENT))}"
        for n in names
        if n not in DEVELOPMENT_ROWS and seeds_of(n) & set(DEVELOPMENT)
    ]
    return shared + dev


def fresh(n: int) -> list[int]:
    """n seeds no row holds: from the first hundred above every seed in use."""
    start = (max(s for name in REGISTRY for s in seeds_of(name)) // 100 + 1) * 100
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
    for name, (seeds, what) in sorted(REGISTRY.items(), key=lambda kv: (max(kv[1][0]), kv[0])):
        print(f"{name}: {spans(seeds)}  ({what})")
    print(f"fresh: {fresh(1)[0]} on (no row holds them); {spans(DEVELOPMENT)} are for checks of the code only")


if __name__ == "__main__":
    main()
