"""Every program's --help works: each tracked entry point (a file with a `__main__` block: train.py, evaluate.py
and each `python -m` module of the rooms), and each of its subcommands, prints its usage and exits 0. A new
entry point is found, not listed by hand."""

import re
import runpy
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# lab/results/ holds the scripts of finished studies as they ran (a probe, a verdict): records, not programs with a
# command line of their own; tests/ holds the test suite's helpers.
NOT_PROGRAMS = ("lab/results/", "tests/")


def entry_points() -> list[str]:
    """The module name of every tracked file with a __main__ block (train.py -> train)."""
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    found = []
    for rel in files.stdout.split():
        if rel.startswith(NOT_PROGRAMS) or not (ROOT / rel).is_file():
            continue
        if 'if __name__ == "__main__":' in (ROOT / rel).read_text():
            found.append(rel.removesuffix(".py").replace("/", "."))
    return sorted(found)


def help_of(module: str, argv: list[str], capsys) -> str:
    """`python -m MODULE ARGV --help`, run in this process (a subprocess each would cost seconds of imports):
    its output; fails unless it exits 0."""
    saved = sys.argv
    sys.argv = [module, *argv, "--help"]
    try:
        with warnings.catch_warnings():  # runpy warns when the module was imported before: harmless here
            warnings.simplefilter("ignore", RuntimeWarning)
            with pytest.raises(SystemExit) as stop:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        sys.argv = saved
    out = capsys.readouterr().out
    assert stop.value.code in (0, None), f"{module} {' '.join(argv)} --help exited with {stop.value.code}"
    assert out.startswith("usage:"), f"{module} {' '.join(argv)} --help printed no usage:\n{out[:300]}"
    return out


def subcommands(usage: str) -> list[str]:
    """The choices of a positional subcommand in a usage text ({scan,split}); an option's choices, inside
    brackets, are not subcommands."""
    first = usage.split("\n\n")[0]
    while re.search(r"\[[^\[\]]*\]", first):
        first = re.sub(r"\[[^\[\]]*\]", "", first)
    found = re.search(r"\{([\w,-]+)\}", first)
    return found.group(1).split(",") if found else []


def test_the_entry_points_are_found():
    found = entry_points()
    assert {"train", "evaluate", "demo", "lab.sweep", "tools.synthetic", "exercises.check"} <= set(found)
    assert not any(m.startswith(("results.", "tests.")) for m in found)


@pytest.mark.parametrize("module", entry_points())
def test_every_entry_point_and_subcommand_prints_its_usage_and_exits_0(module, capsys):
    usage = help_of(module, [], capsys)
    for sub in subcommands(usage):
        help_of(module, [sub], capsys)
