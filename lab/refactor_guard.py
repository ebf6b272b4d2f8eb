"""The old-against-new guard of the flat-handout restructure (lab/RESTRUCTURE.md): the code before it (a
`git worktree` of OLD) and this checkout run the same seeded short run side by side, on this machine, and
every logged number must agree to the digit train.py prints. Works on every CPU kind: nothing is recorded,
both sides are computed here and now.

    python -m lab.refactor_guard                 # OLD = d129455, the code before the restructure
    python -m lab.refactor_guard --demo          # also make demo's table, both sides (about 2 x 4-11 min)
    python -m lab.refactor_guard --old COMMIT --keep DIR

What each side runs, through its command lines only (module paths may move; the README's commands stay):
1. the synthetic generator on a tiny set (tests/conftest.py's): every file's bytes must be the same;
2. `train.py` on that set: 2 xID warm-up epochs and 2 Robust-xID epochs at 25% injected, one thread, no
   loader workers (tests/test_refactor_numbers.py's settings): every number of log.jsonl. Since step 5 the bank's
   diagnostics are make demo's report, not train.py's: the new side runs train.main with it (REPORTED) and
   plain train.py too, whose numbers must be the reported log's, less the report's keys;
3. `evaluate.py all` on its checkpoint, few trials and a 2-epoch fine-tune, and since step 7 the analysis that
   left it for tools/analyse.py (ANALYSE): every number of eval.json, each record found by its task;
4. with --demo: make demo's command into a folder of its own, on the threads make demo takes (the thread
   count alone moves its table): demo.md's tables, the timing line aside.

A side's commands are found in its own tree (GENERATOR, DEMO): when a restructure step moves an entry
point, it adds the new place there, and the old commit keeps being run as it was.
"""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLD = "d129455"  # the code before the restructure; its training code is the claims rerun's (a8be88a)
DIGITS = 4  # train.py prints the loss with 4 decimals, the rest with fewer
# Where each entry point may stand, the first found is run: the generator, then make demo's module
GENERATOR = (["-m", "tools.synthetic"], ["synthetic.py"])
DEMO = (["-m", "experiments.demo"], ["demo.py"])
# evaluate.py all's analysis task, which step 7 moved out of it: run after evaluate.py where the tree has it
ANALYSE = ["-m", "tools.analyse", "analysis"]
TINY = [
    *("--classes", "2", "--train-per-class", "8", "--test-per-class", "2", "--pool", "4", "--faulty", "0.25"),
    *("--size", "32", "--seconds", "2.2", "2.6", "--noise", "0.5"),
]
TRAIN = [
    *("--frames", "4", "--size", "32", "--n-mels", "40", "--n-time", "40", "--width", "0.125"),
    *("--batch-size", "8", "--num-negatives", "15", "--workers", "0", "--lr", "2e-3", "--lr-min", "2e-4"),
    *("--warmup-epochs", "2", "--epochs", "2", "--loss", "robust", "--faulty-fraction", "0.25"),
    *("--delta", "-0.67", "--seed", "3"),
    # the path the numbers were recorded on: clips decoded by a loader after a seek (--preload auto would
    # hold this tiny set in memory, whose whole-file audio decode differs in the last bits: config.py)
    *("--preload", "off"),
]  # tests/test_refactor_numbers.py trains the same run, and tests/conftest.py's tiny_data is TINY's set
EVALUATE = [
    *("--trials", "3", "--finetune-epochs", "2", "--finetune-batch", "8", "--workers", "0", "--jobs", "1"),
    *("--clips", "2", "--preload", "off"),
]
# train.py with make demo's report (the bank's diagnostics and drift signals, which left train.py's own log in
# step 5): run where the tree has it, so that the log compared is the one the old train.py wrote
REPORTED = (
    "import sys, train; from config import parse_config; from tools.bank_report import BankReport; "
    "cfg = parse_config(sys.argv[1:]); train.main(cfg, report=BankReport(cfg))"
)
# what the report adds to a record (tools/bank_report.py's bank_report and bank_signals)
LEFT_THE_LOG = {"score_hist", "knn_class", "xmodal_class", "own_audio", "own_audio_faulty", "soft_share"}
LEFT_THE_LOG |= {"agreement", "positive_mass", "drift_start"}
# what left the log with the failed-file substitution (step 6b: a file that fails stops the run); the old side's
# must be 0, what a run whose files all decode logs
GONE = {"skipped", "excluded"}
# leaves that say when, where or how long, not what was computed
NOT_NUMBERS = re.compile(r"time|second|minute|elapsed|per_s|wait|when|path|folder|file|host|sha|digest|version")


def entry(tree, choices):
    """The first of `choices` that stands in `tree` (a module `-m a.b` or a file)."""
    for argv in choices:
        rel = argv[1].replace(".", "/") + ".py" if argv[0] == "-m" else argv[0]
        if (Path(tree) / rel).is_file():
            return argv
    raise SystemExit(f"{tree}: none of {choices} stands there: add the entry point's new place to the guard")


def run(tree, argv, log, threads=1):
    """One command of a side, in its tree, on `threads` threads (None: as make demo runs, the machine's
    default); its output to `log`; refused in one line if it fails."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    if threads:
        env |= {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    with open(log, "a") as out:
        print(f"$ {' '.join(argv)}", file=out, flush=True)
        done = subprocess.run([sys.executable, *argv], cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        raise SystemExit(f"{tree}: `{' '.join(argv)}` failed ({done.returncode}); its output: {log}")


def digests(folder):
    """{relative path: bytes} of every file of a generated set, the manifest included."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def numbers(value, prefix=""):
    """{dotted key: number} of a JSON value's numeric leaves, the ones that say when or where left out."""
    if isinstance(value, dict):
        return {k: v for key, val in value.items() for k, v in numbers(val, f"{prefix}{key}.").items()}
    if isinstance(value, list):
        return {k: v for i, val in enumerate(value) for k, v in numbers(val, f"{prefix}{i}.").items()}
    key = prefix.rstrip(".")
    if isinstance(value, bool) or not isinstance(value, int | float) or NOT_NUMBERS.search(key.lower()):
        return {}
    return {key: value}


def evaluated(path):
    """{format, records.TASK.key: number} of an eval.json: a record by its task, wherever the file has it."""
    text = json.loads(Path(path).read_text())
    return numbers({"format": text["format"], "records": {r["task"]: r for r in text["records"]}})


def logged(out):
    """{epochN.key: number} of a run's log.jsonl."""
    rows = [json.loads(line) for line in (Path(out) / "log.jsonl").read_text().splitlines() if line.strip()]
    return numbers({f"epoch{r.get('epoch', i)}": r for i, r in enumerate(rows)})


def same(a, b):
    return math.isclose(a, b, abs_tol=0.5 * 10**-DIGITS) or (math.isnan(a) and math.isnan(b))


def side(tree, work, demo):
    """Everything one side gives: the tiny set's files, the log's and eval.json's numbers, demo.md's tables."""
    work.mkdir(parents=True, exist_ok=True)
    log, data, out = work / "output.txt", work / "tiny", work / "run"
    run(tree, [*entry(tree, GENERATOR), "--out", str(data), *TINY], log)
    report = Path(tree) / "tools" / "bank_report.py"  # REPORTED's module, where the tree has it
    reported = report.is_file() and "class BankReport" in report.read_text()
    run(tree, [*(["-c", REPORTED] if reported else ["train.py"]), "--data", str(data), "--out", str(out), *TRAIN], log)
    run(tree, ["evaluate.py", "all", str(out / "ckpt.pt"), *EVALUATE], log)
    if (Path(tree) / "tools" / "analyse.py").is_file():
        run(tree, [*ANALYSE, str(out / "ckpt.pt"), *("--clips", "2", "--workers", "0", "--preload", "off")], log)
    got = {"files": digests(data), "log": logged(out), "eval": evaluated(out / "eval.json")}
    if reported:  # and plain train.py: the same numbers, less the report's
        run(tree, ["train.py", "--data", str(data), "--out", str(work / "plain"), *TRAIN], log)
        got["plain"] = logged(work / "plain")
    if demo:
        folder = work / "demo"
        # the thread count moves the table (float rounding grows over training): make demo's own, on both sides
        argv = [*entry(tree, DEMO), "--fresh", "--runs", str(folder / "runs"), "--results", str(folder)]
        run(tree, argv, log, threads=None)
        text = (folder / "demo.md").read_text().split("\n## This run beside the reference")[0]  # the table
        got["demo"] = [line for line in text.splitlines() if line.startswith("|")]  # the tables, not the timing
    return got


def compare(old, new):
    """Lines saying what differs; empty when every part agrees."""
    bad = []
    if old["files"] != new["files"]:
        differ = sorted(
            k for k in old["files"].keys() | new["files"].keys() if old["files"].get(k) != new["files"].get(k)
        )
        bad.append(f"the generator's files differ: {len(differ)} of {len(old['files'])} ({', '.join(differ[:5])})")
    gone = {k: v for k, v in old["log"].items() if k.split(".")[-1] in GONE and k not in new["log"]}
    if any(gone.values()):
        bad.append(f"log: the old side skipped or excluded files: {gone}")
    for part in ("log", "eval"):
        a, b = old[part], new[part]
        a = {k: v for k, v in a.items() if k not in gone}
        if a.keys() != b.keys():
            bad.append(
                f"{part}: keys only old {sorted(a.keys() - b.keys())[:8]}, only new {sorted(b.keys() - a.keys())[:8]}"
            )
        differ = {k: (a[k], b[k]) for k in a.keys() & b.keys() if not same(a[k], b[k])}
        if differ:
            bad.append(
                f"{part}: {len(differ)} of {len(a)} numbers differ (old, new): {dict(sorted(differ.items())[:8])}"
            )
    if "plain" in new:  # plain train.py: the reported log's numbers, none of them different, the report's aside
        plain, full = new["plain"], new["log"]
        if not plain.keys() <= full.keys() or any(not same(plain[k], full[k]) for k in plain):
            bad.append("plain train.py's log differs from the reported run's")
        report = {k.split(".")[1] for k in full.keys() - plain.keys()}
        if report - LEFT_THE_LOG:
            bad.append(f"plain train.py's log lacks more than the report's: {sorted(report - LEFT_THE_LOG)}")
    if "demo" in old and old["demo"] != new["demo"]:
        lines = [f"  old {x}\n  new {y}" for x, y in zip(old["demo"], new["demo"]) if x != y]
        bad.append("make demo's tables differ:\n" + "\n".join(lines[:10]))
    return bad


def worktree(commit, where):
    """A detached worktree of `commit` at `where` (made once; reused while it is at that commit)."""
    if not (where / ".git").exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(where), commit], cwd=ROOT, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, check=True)
    want = subprocess.run(["git", "rev-parse", commit], cwd=ROOT, capture_output=True, text=True, check=True)
    if head.stdout != want.stdout:
        raise SystemExit(f"{where}: a worktree at {head.stdout.strip()[:7]}, not {commit}: remove it or pass --keep")
    return where


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--old", default=OLD, help=f"the commit before the change (default {OLD})")
    p.add_argument("--demo", action="store_true", help="also compare make demo's table (minutes per side)")
    p.add_argument("--keep", help="a folder for the worktree and both sides' runs, kept (default: a temporary one)")
    a = p.parse_args(argv)
    base = Path(a.keep or tempfile.mkdtemp(prefix="refactor_guard_")).resolve()
    old_tree = worktree(a.old, base / f"old_{a.old}")
    sides = {}
    for name, tree in (("old", old_tree), ("new", ROOT)):
        print(f"[guard] {name}: {tree}", flush=True)
        shutil.rmtree(base / "side", ignore_errors=True)
        shutil.rmtree(base / f"{name}_side", ignore_errors=True)
        t0 = time.time()
        sides[name] = side(tree, base / "side", a.demo)  # one path for both: a path in a record stays the same
        print(f"[guard] {name}: {(time.time() - t0) / 60:.1f} min", flush=True)
        (base / "side").rename(base / f"{name}_side")
    bad = compare(sides["old"], sides["new"])
    n = {k: len(v) for k, v in sides["new"].items()}
    what = f"{n['files']} generated files, {n['log']} logged numbers, {n['eval']} evaluation numbers"
    what += f", {n['demo']} table rows of make demo" if a.demo else ""
    if not a.keep:
        subprocess.run(["git", "worktree", "remove", "--force", str(old_tree)], cwd=ROOT, check=False)
        shutil.rmtree(base, ignore_errors=True)
    if bad:
        raise SystemExit(f"[guard] {a.old} against this checkout: DIFFER\n" + "\n".join(bad))
    print(f"[guard] {a.old} against this checkout: the same {what}, to {DIGITS} decimals")


if __name__ == "__main__":
    main()
