"""How big the handout is: the project files each entry point imports, at any depth, tests excluded (the
flat-handout plan, lab/RESTRUCTURE.md, and its targets). Read from the code's own imports with `ast`; nothing
is run or imported.

    python -m lab.handout_size            # the counts against the targets
    python -m lab.handout_size --json     # the same as JSON (tests/test_handout_size.py reads it)

An import counts where it stands, inside a function or under `if` as much as at the top: a reader who follows
the code meets it. `make demo`'s entry is the module the Makefile's demo rule runs; what it adds is counted
beyond the union of the train.py and evaluate.py closures.
"""

import argparse
import ast
import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The flat handout's targets (the plan's item 1): files and lines of an import closure, tests excluded
TARGETS = {"train.py": (8, 1800), "evaluate.py": (10, 2500)}
DEMO_ADDS = 1500  # lines make demo's closure adds beyond the two above
TOP_ENTRIES = 20  # tracked top-level entries, dotfiles aside
DYNAMIC = re.compile(r"\bimportlib\b|\brunpy\b|__import__")  # imports a reader cannot follow


def module_file(root, name):
    """The project file a dotted module name is, or None (a package's __init__.py for a folder)."""
    parts = name.split(".")
    for path in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
        if path.is_file():
            return path
    return None


def imported_names(root, path):
    """Every dotted name a file imports: `import a.b`, `from a import b` (a and a.b), relative ones resolved."""
    package = path.relative_to(root).parent.parts
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            yield base
            yield from (f"{base}.{alias.name}" if base else alias.name for alias in node.names)


def closure(root, entry):
    """The project files `entry` imports at any depth, itself included; tests/ is never entered."""
    seen, todo = set(), [root / entry]
    while todo:
        path = todo.pop()
        if path in seen or "tests" in path.relative_to(root).parts:
            continue
        seen.add(path)
        for name in imported_names(root, path):
            parts = name.split(".")
            todo += [f for i in range(1, len(parts) + 1) if (f := module_file(root, ".".join(parts[:i])))]
    return seen


def lines(paths):
    return sum(len(p.read_text().splitlines()) for p in paths)


def demo_entry(root):
    """The file the Makefile's `demo:` rule runs (`-m pkg.mod`, or a script named by its path)."""
    rule = re.search(r"^demo:.*\n((?:\t.*\n)+)", (root / "Makefile").read_text(), re.M).group(1)
    if m := re.search(r" -m ([\w.]+)", rule):
        return str(module_file(root, m.group(1)).relative_to(root))
    return re.search(r"\b([\w/]+\.py)\b", rule).group(1)


def top_entries(root):
    """The tracked top-level names, dotfiles aside."""
    tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
    return sorted({p.split("/")[0] for p in tracked.splitlines() if not p.startswith(".")})


def counts(root=ROOT):
    """{entry: {files, lines, in_folders}}, the demo's additions, the dynamic imports and the top-level entries."""
    root = Path(root)
    out, union = {}, set()
    for entry in TARGETS:
        files = closure(root, entry)
        union |= files
        out[entry] = {
            "files": len(files),
            "lines": lines(files),
            "in_folders": sorted(str(f.relative_to(root)) for f in files if f.parent != root),
        }
    demo = demo_entry(root)
    both = closure(root, demo)
    added = both - union
    out["make demo"] = {"entry": demo, "files": len(both), "lines": lines(both), "adds_files": len(added)}
    out["make demo"]["adds_lines"] = lines(added)
    handout = union | both
    out["dynamic imports"] = sorted(
        f"{p.relative_to(root)}:{i}"
        for p in handout
        for i, text in enumerate(p.read_text().splitlines(), 1)
        if DYNAMIC.search(text.split("#")[0])
    )
    out["top-level entries"] = top_entries(root)
    return out


def report(c):
    """The counts, each beside its target."""
    rows = []
    for entry, (files, most) in TARGETS.items():
        r = c[entry]
        deep = len(r["in_folders"])
        ok = r["files"] <= files and r["lines"] <= most and not deep
        rows.append(
            f"{entry:12} {r['files']:3} files {r['lines']:6,} lines, {deep} in folders   "
            f"target: <= {files} files, <= {most:,} lines, none in folders   {'met' if ok else 'NOT MET'}"
        )
    d = c["make demo"]
    met = "met" if d["adds_lines"] <= DEMO_ADDS else "NOT MET"
    rows.append(
        f"make demo    {d['files']:3} files {d['lines']:6,} lines ({d['entry']}); adds {d['adds_files']} files, "
        f"{d['adds_lines']:,} lines   target: adds <= {DEMO_ADDS:,}   {met}"
    )
    dyn = c["dynamic imports"]
    rows.append(
        f"importlib, runpy, __import__ in the handout: {len(dyn)}   target: 0   {'met' if not dyn else 'NOT MET'}"
    )
    rows += [f"  {place}" for place in dyn]
    top = c["top-level entries"]
    met = "met" if len(top) <= TOP_ENTRIES else "NOT MET"
    rows.append(f"top-level entries: {len(top)}   target: <= {TOP_ENTRIES}   {met}\n  {' '.join(top)}")
    return "\n".join(rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    p.add_argument("--root", default=str(ROOT), help="the checkout to measure (default: this one)")
    a = p.parse_args(argv)
    c = counts(Path(a.root))
    print(json.dumps(c, indent=1) if a.json else report(c))


if __name__ == "__main__":
    main()
