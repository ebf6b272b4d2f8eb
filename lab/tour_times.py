"""How long each of TOUR.md's commands takes, run as written (the venv activated, from the repository root), on this
machine: its CPU kind's file in lab/results/tour_settings/, the times TOUR.md quotes (a test checks them). The
tour's own folders (FRESH) are removed first, so that every command runs as it does the first time.

    python -m lab.tour_times            # every command but the sweep (about 20 min); --all: it too
    python -m lab.tour_times --show     # the committed times, by CPU kind

TOUR's step 9 needs make demo's runs (runs/make_demo); a command that fails is recorded with its exit status. The
exercises' checker fails on purpose in a checkout (student.py is blank): its time still says what a student waits.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from tools.demo_report import cpu_kind

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "lab" / "results" / "tour_settings"  # a file per CPU kind
# the commands TOUR writes inline, after the blocks': the switches' tests, step 9's figures and sweep
INLINE = r"`(python -m (?:pytest -q tests/test_tour\.py|tools\.figures /tmp/tour_run|lab\.sweep [^`]*))`"
LONG = ("lab.sweep",)  # minutes, not seconds: run with --all
FRESH = ("/tmp/tour", "/tmp/tour_run", "/tmp/handout")  # what the tour writes, removed first: a first time's times


def tour_commands(text: str) -> list[str]:
    """TOUR.md's bash blocks' command lines, continuations joined, comments left out, in order."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.split("#")[0].strip():
                out.append(" ".join(line.split("#")[0].split()))
    return out + re.findall(INLINE, text)


def result_file(kind: str) -> Path:
    return RESULTS / (re.sub(r"[^a-z0-9]+", "_", kind.lower()).strip("_") + ".json")


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m lab.tour_times", description=__doc__.split("\n\n")[0])
    p.add_argument("--all", action="store_true", help="also the minutes-long sweep of step 9")
    p.add_argument("--show", action="store_true", help="print the committed times and run nothing")
    args = p.parse_args(argv)
    if args.show:
        for made in sorted(RESULTS.glob("*.json")):
            print(made.read_text())
        return
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    kind = f"{cpu_kind()}, {cores()} cores"
    for made in FRESH:
        shutil.rmtree(made, ignore_errors=True)
    row = {"kind": kind, "commit": commit.stdout.strip(), "date": time.strftime("%Y-%m-%d"), "commands": {}}
    todo = tour_commands((ROOT / "TOUR.md").read_text())
    for cmd in sorted(todo, key=lambda c: any(name in c for name in LONG)):  # the long ones last
        if any(name in cmd for name in LONG) and not args.all:
            continue
        t0 = time.time()
        done = subprocess.run(["bash", "-c", f"source .venv/bin/activate && {cmd}"], cwd=ROOT, capture_output=True)
        row["commands"][cmd] = {"seconds": round(time.time() - t0, 1), "exit": done.returncode}
        print(f"{time.time() - t0:7.1f} s  exit {done.returncode}  {cmd}", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    result_file(kind).write_text(json.dumps(row, indent=1) + "\n")
    print(f"-> {result_file(kind).relative_to(ROOT)}")


if __name__ == "__main__":
    main()
