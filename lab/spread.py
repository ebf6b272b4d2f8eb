"""Where the spread of the demo's outcome comes from: the warm-up's share against the branch's, and the
chaos of one seed under a rounding-level change (lab/results/spread/PLAN.md says what is measured and why).

The outcome is xID's 1-shot after `make demo`'s recipe: a 30-epoch xID warm-up (eq. (1)), then 24 epochs
of xID from it (the Table 2 protocol's second stage), evaluated as the demo evaluates (retrieval, 50
few-shot SVM trials over 2 clips per video, the AUROC of eq. (6)'s bank scores). For each seed:

    warm        the warm-up on 2 threads, every 5th epoch's checkpoint kept; evaluated after 5, 10, 20, 30
    fork{E}     the same warm-up, resumed from its checkpoint after E epochs on 1 thread (E = 0: a fresh run
                on 1 thread): the same arithmetic but for the order of sums, from epoch E on
    ctl10       resumed after 10 epochs on 2 threads: must equal `warm` (a resume alone changes nothing)
    xid         each warm-up's xID branch on 1 thread (as `make demo` runs its branches)
    xid_t2      the reference warm-up's branch on 2 threads: the branch's own chaos
    xid_b{B}    the reference warm-up's branch under branch seed B: other batches, augmentations and
                negatives, the same warm-up and the same injected faults

    python -m lab.spread run --seeds 1000 1001 1002 1003     # resumable; runs/spread/ (hours on 2 cores)
    python -m lab.spread report                              # lab/results/spread/diagnosis.json and tables
    python -m lab.spread screen --seeds 1100 1101 1102 1103  # the regime screen's stage 1 (SCREEN_PLAN.md)
    python -m lab.spread screen-report                       # lab/results/spread/screen.json and SCREEN.md
    python -m lab.spread time-check                          # quiet cores: lab/results/spread/timecheck.json

Every job is a process of its own with OMP_NUM_THREADS set, two 1-thread jobs side by side.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

RUNS = Path("runs/spread")
RESULTS = Path("lab/results/spread")
DATA = "data/synth_src2p"
FAULTY = 0.25
WARMUP, BRANCH = 30, 24
FORKS = (0, 5, 10, 20)  # epochs of the 2-thread warm-up before its 1-thread continuation
EVAL_AT = (5, 10, 20, 30)  # the reference warm-up evaluated after these epochs
BRANCH_SEEDS = (1, 2)  # added to the seed, on the first seed's reference warm-up (with the seed itself: 3)
CONTROL = 10  # the resume control's epoch, on the first seed
# The regime screen's candidates (lab/results/spread/SCREEN_PLAN.md): options added to every run of a seed. A
# warm-up takes them after its own epoch counts (R4's length wins), a branch before its own (its 0 wins).
CANDIDATES = {
    "R0": [],
    "R1": ["--lr", "3e-3"],
    "R2": ["--batch-size", "16"],
    "R3": ["--num-negatives", "64"],
    "R4": ["--warmup-epochs", "45"],
}


def common(seed):
    """train.py's options of every run of one seed: make demo's set, recipe and injection."""
    return ["--preset", "demo", "--data", DATA, "--seed", str(seed), "--faulty-fraction", str(FAULTY)] + [
        "--preload-cache",
        str(RUNS / "preload"),
    ]


def screen_jobs(cand, seed):
    """Stage 1 of the screen for one candidate and seed: the warm-up on 2 threads and on 1 (fork0, the
    rounding-level change), each branched to xID on 1 thread. Folders under runs/spread/screen/CAND/."""
    root = RUNS / "screen" / cand / f"seed{seed}"
    out = [
        ("warm", 2, [], ["warmup", str(seed), str(root / "warm"), "2", "0", cand]),
        ("fork0", 1, [], ["warmup", str(seed), str(root / "fork0"), "1", "0", cand]),
    ]
    for w in ("warm", "fork0"):
        out.append((f"xid_{w}", 1, [w], ["branch", str(seed), str(root / w), str(root / f"xid_{w}"), "1", "0", cand]))
    tag = f"screen/{cand}/{seed}"
    return [(f"{tag}/{n}", t, [f"{tag}/{d}" for d in deps], argv) for n, t, deps, argv in out]


def kept(folder, epochs):
    """The checkpoint --save-every 5 kept after `epochs` epochs (train.py numbers epochs from 0)."""
    return Path(folder) / f"ckpt_epoch{epochs - 1:04d}.pt"


def jobs_for(seed, first):
    """The jobs of one seed: (name, threads, depends-on, argv of `python -m lab.spread job ...`)."""
    root = RUNS / f"seed{seed}"
    out = []
    warm = root / "warm"
    out.append(("warm", 2, [], ["warmup", str(seed), str(warm), "2", "0"]))
    for e in EVAL_AT:
        out.append((f"eval_warm{e}", 1, ["warm"], ["evaluate", str(kept(warm, e)), str(root / f"eval_warm{e}.json")]))
    warmups = {"warm": warm}
    for e in FORKS:
        out.append((f"fork{e}", 1, ["warm"], ["warmup", str(seed), str(root / f"fork{e}"), "1", str(e)]))
        warmups[f"fork{e}"] = root / f"fork{e}"
    if first:
        out.append(("ctl10", 2, ["warm"], ["warmup", str(seed), str(root / "ctl10"), "2", str(CONTROL)]))
    for name, folder in warmups.items():
        out.append((f"xid_{name}", 1, [name], ["branch", str(seed), str(folder), str(root / f"xid_{name}"), "1", "0"]))
    out.append(("xid_t2", 2, ["warm"], ["branch", str(seed), str(warm), str(root / "xid_t2"), "2", "0"]))
    if first:
        for b in BRANCH_SEEDS:
            argv = ["branch", str(seed), str(warm), str(root / f"xid_b{b}"), "1", str(b)]
            out.append((f"xid_b{b}", 1, ["warm"], argv))
    return [(f"{seed}/{n}", t, [f"{seed}/{d}" for d in deps], argv) for n, t, deps, argv in out]


def done_file(argv):
    """Where a job's finish is marked: an evaluation's JSON, a warm-up's or a branch's row (a branch's argv
    names its warm-up before its own folder)."""
    if argv[0] == "evaluate":
        return Path(argv[2])
    return Path(argv[3] if argv[0] == "branch" else argv[2]) / "row.json"


def seed_of(name):
    """A job's seed, the all-digit part of its name ('screen/R0/1100/warm', '1000/xid_t2')."""
    return next(part for part in name.split("/") if part.isdigit())


def wide_first(jobs):
    """The jobs seed by seed, each seed's 2-thread jobs before its 1-thread ones (the list's order otherwise
    kept, so dependencies still come first): in candidate order, every candidate's 2-thread warm-up waits
    for the previous candidate's 1-thread branch while the other core idles; this way the 1-thread jobs run
    in pairs."""
    seeds = list(dict.fromkeys(seed_of(j[0]) for j in jobs))
    return sorted(jobs, key=lambda j: (seeds.index(seed_of(j[0])), -j[1]))


def schedule(all_jobs, cores=2):
    """Runs the jobs as processes, at most `cores` threads at a time, each after its dependencies, in the
    list's order of seeds: a 1-thread job may fill a core beside a 2-thread job that waits only if it is of
    the same seed (else the 2-thread warm-ups starve and every seed's 1-thread jobs run first). A job whose
    row exists is skipped (so a killed run resumes)."""
    pending = [j for j in all_jobs if not done_file(j[3]).exists()]
    finished = {j[0] for j in all_jobs} - {j[0] for j in pending}
    running = {}  # name: (Popen, threads, log file)
    while pending or running:
        for name, (proc, _, log) in list(running.items()):
            if proc.poll() is not None:
                log.close()
                del running[name]
                if proc.returncode:
                    raise SystemExit(f"lab.spread: job {name} failed (exit {proc.returncode}); see {log.name}")
                finished.add(name)
                print(f"[spread] {time.strftime('%H:%M:%S')} done {name}", flush=True)
        used = sum(t for _, t, _ in running.values())
        waiting = None  # the seed of the first ready job that does not fit: no later seed's job passes it
        for job in list(pending):
            name, threads, deps, argv = job
            if waiting is not None and seed_of(name) != waiting:
                break
            ready = all(d in finished for d in deps)
            if ready and used + threads > cores and waiting is None:
                waiting = seed_of(name)
            if ready and used + threads <= cores:
                env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
                RUNS.mkdir(parents=True, exist_ok=True)
                log = open(RUNS / f"{name.replace('/', '_')}.log", "a")
                cmd = [sys.executable, "-m", "lab.spread", "job", *argv]
                running[name] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), threads, log)
                pending.remove(job)
                used += threads
                print(f"[spread] {time.strftime('%H:%M:%S')} start {name} ({threads} thread(s))", flush=True)
        time.sleep(2)


# ----------------------------------------------------------------------------- one job, in its own process


def job_warmup(seed, out, threads, fork, cand="R0"):
    """The warm-up in `out`: from scratch (fork 0), or resumed from the reference's checkpoint after
    `fork` epochs. Its thread count is the process's (OMP_NUM_THREADS)."""
    import torch

    import train
    from config import parse_config
    from tools.bank_report import BankReport

    assert torch.get_num_threads() == int(threads), (torch.get_num_threads(), threads)
    out = Path(out)
    if int(fork) and not (out / "ckpt.pt").exists():
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(kept(out.parent / "warm", int(fork)), out / "ckpt.pt")
    argv = common(int(seed)) + ["--out", str(out), "--warmup-epochs", str(WARMUP), "--epochs", "0", "--save-every", "5"]
    argv += CANDIDATES[cand]
    cfg = parse_config(argv)
    train.main(cfg, report=BankReport(cfg))  # the bank's diagnostics, as make demo's runs log them
    write_row(out, {"threads": int(threads), "fork": int(fork), "log": log_of(out)})


def job_branch(seed, warm, out, threads, branch_seed, cand="R0"):
    """xID for BRANCH epochs from the warm-up in `warm`, evaluated. A branch seed B draws the branch's
    batches, augmentations and negatives from seed + B; the injected faults stay the warm-up's (the
    injection draw's stream is shifted back by B, and --init refuses any other injection)."""
    import torch

    import data
    import train
    from config import parse_config
    from tools.bank_report import BankReport

    assert torch.get_num_threads() == int(threads), (torch.get_num_threads(), threads)
    seed, b = int(seed), int(branch_seed)
    data.INJECTION_STREAM -= b  # INJECTION_STREAM + (seed + b) is the warm-up's draw again
    argv = common(seed + b) + CANDIDATES[cand] + ["--out", str(out), "--init", str(Path(warm) / "ckpt.pt")]
    cfg = parse_config(argv + ["--warmup-epochs", "0", "--epochs", str(BRANCH), "--loss", "xid"])
    train.main(cfg, report=BankReport(cfg))
    row = evaluate_row(Path(out) / "ckpt.pt")
    write_row(Path(out), {"threads": int(threads), "branch_seed": b, **row, "log": log_of(out)})


def evaluate_row(ckpt):
    """The demo's evaluation of one checkpoint (demo.run_branch's columns)."""
    import evaluate
    from demo import shot
    from tools import analyse

    res = evaluate.evaluate(ckpt, ["retrieval", "fewshot"], workers=1, shots=(1, 5), trials=50, clips=2)
    res |= analyse.analysis(ckpt, workers=1, clips=2)
    res_w = res["weights"]
    return {
        "R@1": res["retrieval"]["R@1"],
        "R@5": res["retrieval"]["R@5"],
        "1-shot": shot(res["fewshot"], 1)[0],
        "1-shot trials SD": shot(res["fewshot"], 1)[1],  # over the 50 trials: the evaluation's own noise
        "5-shot": shot(res["fewshot"], 5)[0],
        "AUROC": res_w["faulty_auroc"],
    }


def log_of(out):
    from checkpoint import read_log

    keep = ("epoch", "loss", "faulty_auroc", "knn_class", "xmodal_class", "own_audio", "agreement", "positive_mass")
    return [
        {k: r[k] for k in keep if k in r} | {"ccp_share": r["soft_share"]["ccp"]}
        for r in read_log(Path(out) / "log.jsonl")
    ]


def write_row(out, row):
    tmp = Path(out) / "row.json.tmp"
    tmp.write_text(json.dumps(row))
    tmp.replace(Path(out) / "row.json")  # atomic: the job counts as done only once its row is whole


def time_check(out=RUNS / "timecheck", epochs=4):
    """SCREEN_PLAN.md's amendment 2: each candidate's warm-up clips/s on quiet cores, one run after another
    on 2 threads (`epochs` epochs, the first left out; the candidate's own epoch count is not its cost per
    epoch, so R4 runs R0's steps here). Pause anything else on the machine first. -> {candidate: clips/s}"""
    speed = {}
    for cand, opts in CANDIDATES.items():
        folder = Path(out) / cand
        shutil.rmtree(folder, ignore_errors=True)
        if "--warmup-epochs" in opts:  # R4: its length is counted by the projection, not timed here
            k = opts.index("--warmup-epochs")
            opts = opts[:k] + opts[k + 2 :]
        argv = common(1100) + opts + ["--out", str(folder), "--warmup-epochs", str(epochs), "--epochs", "0"]
        env = {**os.environ, "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
        subprocess.run([sys.executable, "train.py", *argv], env=env, check=True, stdout=subprocess.DEVNULL)
        recs = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines() if line.strip()]
        speed[cand] = sum(r["clips_per_s"] for r in recs[1:]) / len(recs[1:])
        print(f"[spread] time check {cand}: {speed[cand]:.1f} clips/s", flush=True)
    return speed


def _cpu():
    """The CPU's model name, for the record beside a speed."""
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run every job of these seeds (resumable)")
    r.add_argument("--seeds", type=int, nargs="+", required=True)
    c = sub.add_parser("screen", help="stage 1 of lab/results/spread/SCREEN_PLAN.md (resumable; seed by seed)")
    c.add_argument("--seeds", type=int, nargs="+", required=True)
    c.add_argument("--candidates", nargs="+", choices=sorted(CANDIDATES), default=sorted(CANDIDATES))
    sub.add_parser("report", help="collect runs/spread/ into lab/results/spread/diagnosis.json")
    sub.add_parser("screen-report", help="collect runs/spread/screen/ into lab/results/spread/screen.json")
    sub.add_parser("time-check", help="each candidate's clips/s on quiet cores: lab/results/spread/timecheck.json")
    j = sub.add_parser("job", help="one job (what `run` starts)")
    j.add_argument("args", nargs="+")
    a = p.parse_args(argv)
    if a.cmd == "run":
        from tools.synthetic import ensure as ensure_data

        ensure_data(DATA)
        schedule([job for i, s in enumerate(a.seeds) for job in jobs_for(s, i == 0)])
    elif a.cmd == "screen":
        from tools.synthetic import ensure as ensure_data

        ensure_data(DATA)
        schedule(wide_first([job for s in a.seeds for c in a.candidates for job in screen_jobs(c, s)]))
    elif a.cmd == "job":
        kind, *rest = a.args
        if kind == "warmup":
            job_warmup(*rest)
        elif kind == "branch":
            job_branch(*rest)
        else:
            ckpt, dest = rest
            tmp = Path(dest + ".tmp")
            tmp.write_text(json.dumps(evaluate_row(ckpt)))
            tmp.replace(dest)
    elif a.cmd == "time-check":
        speed = time_check()
        record = {"clips_per_s": speed, "cpu": _cpu(), "when": time.strftime("%Y-%m-%d %H:%M")}
        (RESULTS / "timecheck.json").write_text(json.dumps(record, indent=1) + "\n")
    elif a.cmd == "screen-report":
        from lab.spread_report import screen_report

        screen_report(RUNS / "screen", RESULTS, CANDIDATES)
    else:
        from lab.spread_report import report

        report(RUNS, RESULTS)


if __name__ == "__main__":
    main()
