"""make demo's branch phase timed alone, from one finished warm-up, under settings or checkouts alternated: how the 5
branches share the cores (all 5 side by side, or N at a time) and old code against new on the part of make demo that
runs at one thread a branch.

    python -m lab.branch_share --warmup runs/make_demo/seed0_faulty25/warmup --variant .:5 .:2 [--rounds 2]
    python -m lab.branch_share --warmup W --variant /work/old:5 .:5     # another checkout's demo.py against this one

Each variant is CHECKOUT:JOBS: `CHECKOUT/.venv/bin/python CHECKOUT/demo.py --branch-jobs JOBS --no-figures`, run in
CHECKOUT, into a fresh folder under --scratch holding a copy of the warm-up and a link to the decoded files its run
left (RUNS/preload), so only the branches and their evaluations run. The variants alternate, --rounds times. It prints
each run's wall time and make demo's own time split, and whether every variant's table is the first one's to every
digit. A thread count changes the numbers, and demo.py gives each branch cores // JOBS threads (at least 1): on 2 cores
any JOBS of 2 or more runs every branch at one thread, so there the tables agree unless the code differs. JOBS must be
at least 2: below, the branches run in one process and make demo's split has no side-by-side phase to read.
"""

import argparse
import re
import shutil
import subprocess
import time
from pathlib import Path

import torch

import demo

DEFAULTS = demo.DemoArgs()
SETTING = demo.setting_name(DEFAULTS.seeds[0], DEFAULTS.faulty[0])  # make demo's one setting, its folder's name


def run_variant(checkout, jobs, warmup, out):
    """(seconds, the branch phase's minutes from make demo's split, its table rows) of one run into `out`."""
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(warmup, out / SETTING / "warmup")
    if (cache := warmup.parent.parent / "preload").is_dir():  # the decoded files, as make demo's branches find them
        (out / "preload").symlink_to(cache)
    cmd = [str(checkout / ".venv/bin/python"), "demo.py", "--runs", str(out), "--results", str(out)]
    cmd += ["--branch-jobs", str(jobs), "--no-figures"]
    t0 = time.perf_counter()
    log = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if log.returncode:
        raise SystemExit(
            f"branch_share: {' '.join(cmd)} (in {checkout}) failed:\n{log.stdout[-2000:]}{log.stderr[-2000:]}"
        )
    phase = re.search(r"side by side ([\d.]+) min", log.stdout)
    table = out / "demo.md"
    rows = [line for line in table.read_text().splitlines() if line.startswith("|")] if table.is_file() else []
    if not phase or not rows:
        raise SystemExit(f"branch_share: {' '.join(cmd)} (in {checkout}) wrote no branch phase or no table under {out}")
    return seconds, float(phase.group(1)), rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--warmup", required=True, help="a finished make demo warm-up folder (RUNS/seed0_faulty25/warmup)")
    p.add_argument("--variant", nargs="+", required=True, help="CHECKOUT:JOBS, alternated in this order")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--scratch", default="/tmp/branch_share")
    args = p.parse_args(argv)
    warmup = Path(args.warmup).resolve()
    if not (warmup / "ckpt.pt").is_file():
        raise SystemExit(f"branch_share: --warmup {args.warmup}: no ckpt.pt there (make demo's RUNS/{SETTING}/warmup)")
    variants = []
    for v in args.variant:
        checkout, _, jobs = v.rpartition(":")
        if not checkout or not jobs.isdigit() or int(jobs) < 2 or not (Path(checkout) / "demo.py").is_file():
            raise SystemExit(
                f"branch_share: --variant {v}: expected CHECKOUT:JOBS, CHECKOUT a folder with demo.py, JOBS at least 2"
            )
        variants.append((Path(checkout).resolve(), int(jobs)))
    if len(set(variants)) < len(variants):
        raise SystemExit(f"branch_share: --variant {' '.join(args.variant)}: a variant twice (--rounds repeats them)")
    scratch = Path(args.scratch).resolve()  # demo.py runs in each checkout: the same folder from there
    results = {v: [] for v in variants}
    for r in range(args.rounds):
        for i, (checkout, jobs) in enumerate(variants):
            seconds, phase, rows = run_variant(checkout, jobs, warmup, scratch / f"variant{i}")
            results[(checkout, jobs)].append((seconds, phase, rows))
            print(f"round {r + 1}: {checkout}:{jobs}: {seconds:.1f} s, branch phase {phase} min", flush=True)
    first = results[variants[0]][0][2]
    cpu = torch.backends.cpu.get_cpu_capability()
    print(f"\nbranch phase from {warmup}, {args.rounds} rounds alternated, CPU capability {cpu}")
    print("| variant | wall s per round | mean | vs first | table the first's |\n|---|---|---:|---:|---|")
    base = sum(s for s, _, _ in results[variants[0]]) / args.rounds
    for (checkout, jobs), runs in results.items():
        mean = sum(s for s, _, _ in runs) / len(runs)
        same = all(rows == first for _, _, rows in runs)
        print(
            f"| {checkout}:{jobs} | {', '.join(f'{s:.1f}' for s, _, _ in runs)} | {mean:.1f} | {mean / base:.3f} "
            f"| {'yes' if same else 'no'} |"
        )
    return results


if __name__ == "__main__":
    main()
