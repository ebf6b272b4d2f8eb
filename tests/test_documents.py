"""The documents agree with the tree and with the results they quote: no dead link, path, section or
name (tools/references.py), the README's demo table is lab/results/demo.json's, and the modules import
one way only."""

import ast
import json
import math
import re
import subprocess
from pathlib import Path

from tools import demo_report, references

ROOT = Path(__file__).resolve().parents[1]


def test_the_tree_has_no_dead_link_path_section_or_name():
    assert references.dead_references() == []


def test_a_planted_dead_reference_of_each_kind_is_found(tmp_path):
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "kit.py").write_text("def real():\n    pass\n")
    (tmp_path / "README.md").write_text(
        "# Title\n\n## Two commands\n\n[ok](#two-commands) [ok](tools/kit.py) `tools/kit.py` `kit.real`\n"
        'README, "Two commands"\n'
    )
    files = ["README.md", "tools/kit.py"]
    assert references.dead_references(tmp_path, files) == []
    planted = {
        "[a](missing.md)": "link to a missing file",
        "[a](#no-such-heading)": "link to a missing heading",
        "`tools/gone.py`": "missing path",
        "`tools/kit.py::test_nothing`": "has no function",
        "`gone.py`": "no tracked file",
        "`kit.unreal`": "defines no unreal",
        'README, "Three commands"': 'no section "Three commands"',
    }
    for text, expected in planted.items():
        (tmp_path / "NOTES.md").write_text(f"# Notes\n\n{text}\n")
        found = references.dead_references(tmp_path, [*files, "NOTES.md"])
        assert len(found) == 1 and expected in found[0] and found[0].startswith("NOTES.md:3"), (text, found)
    # in a Python file only the comments and strings are read: code that looks like a path is not
    (tmp_path / "tools" / "kit.py").write_text('def real():\n    return a / "b"  # see README, "Nowhere"\n')
    found = references.dead_references(tmp_path, files)
    assert len(found) == 1 and 'no section "Nowhere"' in found[0]


def test_the_readme_demo_table_is_the_committed_reference():
    """The README quotes `make demo`'s reference table: each cell is lab/results/demo.json's, rounded, and
    every method the demo trains has its row."""
    reference = json.loads((ROOT / "lab" / "results" / "demo.json").read_text())
    rows = reference["results"][0][str(reference["args"]["faulty"][0])]  # make demo's level
    names = {demo_report.method_name(m): m for m in reference["args"]["methods"]}
    text = (ROOT / "README.md").read_text()
    table = text.split("The reference:", 1)[1].split("\n\n", 2)[1].splitlines()
    header = [c.strip() for c in table[0].strip("|").split("|")]
    columns = {i: c for i, c in enumerate(header) if c in demo_report.COLUMNS or c == "weights' AUROC"}
    seen = set()
    for line in table[2:]:
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        method = names[cells[0]]
        quoted = [float(cells[i]) for i in columns]
        expected = [round(100 * rows[method][c.replace("weights' ", "")], 1) for c in columns.values()]
        assert quoted == expected, (cells[0], quoted, expected)
        seen.add(method)
    assert seen == set(names.values())
    auroc = re.search(r"AUROC (\d+) after the xID branch", " ".join(text.split())).group(1)
    assert int(auroc) == round(100 * rows["xid"]["AUROC"])
    said = r"CCP puts (\d+)% of its target mass \(lam = 1\) on same-class candidates\*\* of the trained Soft"
    share = re.search(said, " ".join(text.split()))
    assert int(share.group(1)) == round(100 * rows["soft"]["soft_same_class"]["ccp"])


def python_files() -> list[str]:
    """The tracked Python files, but the student's exercise file, which may hold anything (even a syntax error)."""
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    return [f for f in files if f != references.STUDENT]


def imports(path: Path, modules: set[str], type_hints: bool = False) -> set[str]:
    """The tree's modules that `path` imports, at the top or inside a function; those under
    `if TYPE_CHECKING:`, which name types for annotations and never run, only with type_hints."""
    out = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING" and not type_hints:
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        out |= {n for n in names if n in modules}
    return out


def test_no_module_imports_one_that_imports_it_back():
    files = python_files()
    modules = {f[:-3].replace("/", ".").removesuffix(".__init__"): f for f in files}
    graph = {m: imports(ROOT / f, set(modules)) - {m} for m, f in modules.items()}

    def reaches(start: str, goal: str) -> bool:
        stack, seen = [start], set()
        while stack:
            m = stack.pop()
            if m == goal:
                return True
            if m not in seen:
                seen.add(m)
                stack += graph.get(m, ())
        return False

    cycles = sorted((a, b) for a, deps in graph.items() for b in deps if reaches(b, a))
    assert cycles == []
    assert re.search(r"from lab import .*claims_report", (ROOT / "lab/claims_docs.py").read_text())


# The stack, lowest first (README, "Where things are"): the method's parts; checkpoint.py and the rooms they
# and the recipe call on; the recipe and the protocols; the demo, the tools and the exercises; the lab,
# which produces the evidence (its screens' scripts in lab/screens/; lab/results/ only holds it); the tests.
LEVELS = [
    {"config", "losses", "model", "memory_bank"},
    {"media", "checkpoint", "augment"},
    {"data", "train", "evaluate", "finetune"},
    {"demo", "tools", "exercises"},
    {"lab"},
    {"tests", "conftest"},
]
HANDOUT = 3  # the levels up to this one are the handout: what a student reads and runs


def level(module: str) -> int:
    top = module.split(".")[0]
    found = [k for k, names in enumerate(LEVELS) if top in names or module.startswith("test_")]
    assert found, f"{module}: not in LEVELS; place it there"
    return found[0]


def test_no_module_imports_one_above_its_level_type_hints_included(tmp_path):
    files = python_files()
    modules = {f[:-3].replace("/", ".").removesuffix(".__init__"): f for f in files}
    up = sorted(
        (m, dep)
        for m, f in modules.items()
        for dep in imports(ROOT / f, set(modules), type_hints=True)
        if level(dep) > level(m)
    )
    assert up == []
    # a planted arrow of the kind there was (media/decode.py naming data.ClipSpec for annotations) is seen
    planted = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from data import ClipSpec\n"
    (tmp_path / "decode.py").write_text(planted)
    assert imports(tmp_path / "decode.py", set(modules), type_hints=True) == {"data"} and level("data") > level("media")


def test_the_lab_imports_the_handout_and_the_handout_never_the_lab(tmp_path):
    """The handout (every level up to HANDOUT) stands alone: no module of it imports lab/, type hints
    included, while the lab builds on it; and a planted arrow from the handout into the lab is seen."""
    files = python_files()
    modules = {f[:-3].replace("/", ".").removesuffix(".__init__"): f for f in files}
    handout = {m for m in modules if level(m) <= HANDOUT}
    lab = set(modules) - handout - {m for m in modules if level(m) > level("lab")}
    assert {"lab.claims", "lab.bench", "lab.gpu_check", "lab.statistics"} <= lab and "demo" in handout
    into_lab = sorted(
        (m, dep) for m in handout for dep in imports(ROOT / modules[m], set(modules), True) if dep.startswith("lab")
    )
    assert into_lab == []
    assert any(dep.split(".")[0] in {"train", "demo"} for m in lab for dep in imports(ROOT / modules[m], set(modules)))
    (tmp_path / "demo.py").write_text("from lab import statistics\n")
    assert imports(tmp_path / "demo.py", set(modules)) == {"lab.statistics"} and level("lab") > HANDOUT


def test_the_readme_demo_time_is_the_range_of_benchmarks_md_s_table():
    """The README's 'A to B min on 2 cores' for `make demo` spans BENCHMARKS.md's table, rounded to minutes."""
    readme = " ".join((ROOT / "README.md").read_text().split())
    low, high = map(int, re.search(r"`make demo` \((\d+) to (\d+) min on 2 cores", readme).groups())
    table = (ROOT / "lab" / "BENCHMARKS.md").read_text().split("## `make demo`", 1)[1].split("\n\n")[1]
    walls = []
    for line in table.splitlines()[2:]:  # | CPU | code | wall | split |
        minutes, seconds = re.match(r"(\d+) min (\d+) s", line.strip("|").split("|")[2].strip()).groups()
        walls.append(int(minutes) + int(seconds) / 60)
    assert (low, high) == (round(min(walls)), round(max(walls))), walls


def test_the_time_to_expect_is_computed_from_results_gpu_md():
    """OPERATIONS.md's wall time of the ablation preset: epochs x videos / the slower of lab/results/gpu.md's
    step (ablation, its fastest setting) and its loader (prepared files, its best worker count)."""
    from config import Config

    gpu = (ROOT / "lab" / "results" / "gpu.md").read_text().splitlines()
    step = max(float(row.split("|")[7]) for row in gpu if row.startswith("| ablation |"))
    loader = max(float(c) for row in gpu if row.startswith("| prepared |") for c in row.split("|")[3:-2])
    readme = " ".join((ROOT / "lab" / "OPERATIONS.md").read_text().split())
    assert f"step at {step:.0f} clips/s" in readme and f"at {loader:.0f} clips/s: the step limits" in readme
    videos = int(re.search(r"Kinetics-400's ([\d,]+) videos", readme).group(1).replace(",", ""))
    assert f"Kinetics-400 ({videos:,} files)" in (ROOT / "lab" / "BENCHMARKS.md").read_text()
    epochs, rate = Config().warmup_epochs + Config().epochs, min(step, loader)
    assert f"{videos:,} / {rate:.0f} = {videos / rate:.0f} s" in readme
    hours = float(re.search(r"about ([\d.]+) hours per GPU", readme).group(1))
    assert hours == round(epochs * videos / rate / 3600, 1)
    assert f"about {hours} hours per GPU" in " ".join((ROOT / "README.md").read_text().split())  # its summary
    assert f"50K-video subset, Sec. 5.1: {epochs * 50_000 / rate / 3600:.1f} hours" in readme


# lab/results/ holds evidence, and the lab makes it: no script there, and few enough files to read. Files in a
# folder whose name holds "settings" (lab/results/claims/settings, .../demo_settings, lab/results/ccp_length/settings6)
# are one run's setting each, written by the code that runs them, and are not counted.
RESULTS_FILES = 80


def results_files(files: list[str]) -> tuple[list[str], list[str]]:
    """(the scripts, the files outside settings folders) among tracked paths under lab/results/."""
    held = [f for f in files if f.startswith("lab/results/")]
    scripts = [f for f in held if f.endswith((".py", ".sh"))]
    counted = [f for f in held if not any("settings" in part for part in f.split("/")[:-1])]
    return scripts, counted


def test_results_holds_results_no_script_and_at_most_80_files_outside_its_settings_folders():
    files = subprocess.run(["git", "ls-files", "lab/results"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    scripts, counted = results_files(files)
    assert scripts == [], "lab/results/ holds evidence; a script that makes it belongs in the lab (lab/screens/)"
    assert len(counted) <= RESULTS_FILES, f"{len(counted)} files outside lab/results/'s settings folders: merge some"
    # what is counted and what is not, on planted paths
    planted = [
        "lab/results/a/run.sh",
        "lab/results/a/b.py",
        "lab/results/a/settings/s.json",
        "lab/results/a/W8/demo_settings/s.json",
    ]
    planted += ["lab/results/ccp_length/settings6/s.json", "lab/results/a/settings.md", "lab/screens/x.py"]
    assert results_files(planted) == (
        ["lab/results/a/run.sh", "lab/results/a/b.py"],
        planted[:2] + ["lab/results/a/settings.md"],
    )


def test_the_tours_times_are_the_committed_measurements_of_its_commands():
    """TOUR.md quotes each command's time as lab/results/tour_times.json has it for the CPU kind it names, and
    lab.tour_times times every command TOUR.md writes (the blocks' and the inline ones a reader pastes)."""
    from lab import tour_times

    text = (ROOT / "TOUR.md").read_text()
    commands = tour_times.tour_commands(text)
    blocks = [c for c in commands if c not in re.findall(tour_times.INLINE, text)]
    assert len(blocks) >= 13 and {
        "python -m pytest -q tests/test_tour.py",
        "python -m tools.figures /tmp/tour_run",
    } < set(commands)
    said = re.search(r"on `([^`]+)` each took (\d+) to (\d+) s, step 9's sweep (\d+) min", " ".join(text.split()))
    measured = json.loads(tour_times.result_file(said.group(1)).read_text())
    assert measured["kind"] == said.group(1)
    times = measured["commands"]
    assert set(times) == set(commands)  # every command of today's TOUR was timed
    short = [t["seconds"] for c, t in times.items() if not any(n in c for n in tour_times.LONG)]
    sweep = next(t["seconds"] for c, t in times.items() if "lab.sweep" in c)
    assert (int(said.group(2)), int(said.group(3))) == (math.floor(min(short)), math.ceil(max(short)))
    assert int(said.group(4)) == round(sweep / 60)
