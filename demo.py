"""make demo: the paper's Table 2 on the synthetic set, where the truth is known.

For each seed and share of injected faulty positives (Sec. 5.2), one xID warm-up, then a branch per method from it
for equal epochs (losses.VARIANTS; soft:STRATEGY is Soft-xID with Table 1's targets), each evaluated by retrieval,
few-shot SVMs and the AUROC of its bank scores against the known faults. RESULTS/demo.md holds the means over seeds
and the paired differences against xID with 95% intervals, beside demo.json and the last setting's pictures;
--compare puts each number beside a committed reference, and each gap to xID beside the committed seeds' spread.

    python demo.py --fresh --runs runs/make_demo --results runs/make_demo --compare lab/results/demo.json  # make demo
    python demo.py --methods xid weighted soft robust soft:oracle --seeds 0 1 2 3 4        # Table 2 over seeds

Every run resumes, and a finished (seed, level) is kept in RESULTS/demo_settings/, so that a checkout without the
runs adds only what is missing. A folder is reused only where the settings that shape it are the same: another --lam
trains Soft- and Robust-xID anew (soft_lam0.3) from the same warm-up. A setting's branches run side by side, a
process of one thread each: on 2 cores that trains 1.2-1.4x what one process of 2 threads does (lab/BENCHMARKS.md,
two CPU kinds), with the same numbers on one thread; where they outnumber the cores they take turns at them, an epoch
at a time (tools/turns.py). Options it does not know go to train.py.
"""

import argparse
import hashlib
import json
import multiprocessing
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, fields
from pathlib import Path
from statistics import NormalDist

import torch

import checkpoint
import data
import evaluate
import train
from config import PRESETS, parse_config
from losses import VARIANTS
from tools import analyse, synthetic, turns
from tools.bank_report import BankReport
from tools.demo_report import (
    BESIDE,
    COLUMNS,
    TRANSFER,
    compare,
    method_name,
    paired_spread,
    shown_method,
    time_split,
    timed,
    write_results,
)

ROOT = Path(__file__).resolve().parent
DEMO = PRESETS["demo"]  # train.py --preset demo: make demo's set and epochs
KEYED = ("data", "warmup_epochs", "epochs")  # in a setting's key under names of their own
# A branch's own settings, named in its folder where they are not the preset's (soft_lam0.3): those its second stage
# reads, but the loss (the method's), the epochs (--epochs) and delta (the rule's, in the table)
OWN = ("soft_targets", "lam", "tau_s", "tau_t", "kappa", "w_min", "lr_min")
PRELOAD = ("torch", "torchvision", "sklearn.metrics", "sklearn.svm")  # what a branch's process imports slowly


def opt(default, text, **argparse_kwargs):
    """A DemoArgs field: its one default, and its flag's help and argparse options."""
    made = {"default_factory": lambda: list(default)} if isinstance(default, list) else {"default": default}
    return field(**made, metadata={"help": text, **argparse_kwargs})


@dataclass
class DemoArgs:
    """What a demo run trains and evaluates; the defaults are make demo's regime (lab/results/demo_screen/)."""

    data: str = opt(DEMO["data"], "generated when missing (never into a user's folder): tools/synthetic.py's SETS")
    runs: str = opt("runs/demo", "the warm-ups and branches")
    results: str = opt("runs/demo", "demo.md, demo.json and the finished settings")
    methods: list[str] = opt(["xid", "weighted", "soft", "robust", "oracle"], "the first is the baseline", nargs="+")
    seeds: list[int] = opt([0], "one setting per seed and share", type=int, nargs="+")
    faulty: list[float] = opt([0.25], "shares of injected faulty positives", type=float, nargs="+")
    warmup_epochs: int = opt(DEMO["warmup_epochs"], "epochs of the xID warm-up every branch starts from", type=int)
    epochs: int = opt(DEMO["epochs"], "epochs of each branch", type=int)
    eval_clips: int = opt(2, "clips per video in evaluation (paper: 10; fewer is a named deviation)", type=int)
    trials: int = opt(50, "few-shot SVM trials", type=int)
    transfer: str | None = opt(None, "also evaluate on this set, of classes pre-training never saw")
    preset: str = opt("demo", "the train.py preset the runs start from")
    workers: int | None = opt(None, "loader workers (default: the preset's; 1 in evaluation)", type=int)
    jobs: int = opt(1, "settings side by side, as processes (a GPU box's cores, several GPUs)", type=int)
    branch_jobs: int | None = opt(None, "branches side by side (default: all on 2 cores and --jobs 1)", type=int)
    warmup_ranks: int = opt(1, "the warm-up as torchrun ranks (lab/results/warmup_ranks/: not equal)", type=int)
    figures: bool = opt(True, "skip the pictures", flag="--no-figures", action="store_false")
    settings: str = opt("", "the finished settings' folder under --results (default: demo_settings)")
    fresh: bool = opt(False, "delete earlier runs under --runs and the finished settings", action="store_true")
    compare: str = opt("", "a committed demo.json to print this run's table beside")
    train_args: list[str] = field(default_factory=list)  # what the command line does not know, for train.py

    @property
    def columns(self):
        return COLUMNS + (TRANSFER if self.transfer else ())

    def side_by_side_branches(self):
        if self.branch_jobs is not None:
            return self.branch_jobs
        return len(self.methods) if (os.cpu_count() or 1) >= 2 and self.jobs == 1 else 1


def parse_args(argv=None):
    """The command line, a flag per field, as DemoArgs; options it does not know go to train.py."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for f in fields(DemoArgs)[:-1]:
        flag = f.metadata.get("flag", "--" + f.name.replace("_", "-"))
        meta = {k: v for k, v in f.metadata.items() if k != "flag"}
        p.add_argument(flag, dest=f.name, default=getattr(DemoArgs(), f.name), **meta)
    ns, train_args = p.parse_known_args(argv)
    for m in ns.methods:
        if m.partition(":")[0] not in VARIANTS:
            p.error(f"--methods {m}: expected one of {list(VARIANTS)} or soft:STRATEGY")
    return DemoArgs(**vars(ns), train_args=train_args)


# Sec. 5.2 sets delta "so that the midpoint of the weighting function coincides with the known fraction of altered
# samples": under a normal fit of the bank scores, delta = Phi^-1(share). Nothing injected has no midpoint
# (Phi^-1(0) = -inf): 0% takes config's default, -1, one sigma below the mean, tuned on no run.
DELTA_AT_ZERO = -1.0


def paper_delta(faulty):
    return NormalDist().inv_cdf(min(faulty, 1 - 1e-3)) if faulty > 0 else DELTA_AT_ZERO


def setting_name(seed, faulty):
    return f"seed{seed}_faulty{round(100 * faulty)}"


def setting_file(args, seed, faulty):
    return Path(args.results) / (args.settings or "demo_settings") / f"{setting_name(seed, faulty)}.json"


def setting_key(args, faulty):
    """What a finished setting's numbers depend on beyond its seed and level: the manifest's hash for the data, the
    recipe where it is not demo2000's, and where something is injected, the draw's stream and its pool's files."""
    manifest = Path(args.data) / "manifest.csv"
    digest = hashlib.sha1(manifest.read_bytes()).hexdigest()[:12] if manifest.exists() else None
    cfg = parse_config(["--preset", args.preset, "--data", args.data] + args.train_args)
    recipe = {k: getattr(cfg, k) for k, v in PRESETS["demo2000"].items() if k not in KEYED and getattr(cfg, k) != v}
    key = {"data": args.data, "manifest_sha1": digest, "warmup_epochs": args.warmup_epochs, "epochs": args.epochs}
    key |= {"finetune_epochs": 0, "trials": args.trials, "train_args": args.train_args}  # fine-tunes: the lab's
    key |= {"recipe": recipe} if recipe else {}
    key |= {"eval_clips": args.eval_clips} if args.eval_clips != evaluate.CLIPS else {}
    key |= {"warmup_ranks": args.warmup_ranks} if args.warmup_ranks > 1 else {}
    key |= {"transfer": args.transfer} if args.transfer else {}
    key["delta"] = paper_delta(faulty)
    if faulty == 0:
        return key
    pool = None
    if cfg.faulty_source != "train":
        folder = data.pool_folder(cfg)
        files = sorted((f.name, f.stat().st_size) for f in folder.iterdir()) if folder.is_dir() else []
        pool = hashlib.sha1(repr(files).encode()).hexdigest()[:12]
    return key | {"injection_stream": data.INJECTION_STREAM, "faulty_source": cfg.faulty_source, "pool_sha1": pool}


def finished(args, seed, faulty, quiet=False):
    """A finished setting as its file keeps it (the same key and methods), or None."""
    done = setting_file(args, seed, faulty)
    if done.exists():
        saved = json.loads(done.read_text())
        if saved["key"] == setting_key(args, faulty) and all(m in saved["rows"] for m in args.methods):
            return saved
        if not quiet:
            print(f"[demo] {done} was made with other settings or methods: running this setting again")
    return None


def own_settings(cfg):
    skipped = checkpoint.unread(cfg, cfg.warmup_epochs + 1)  # what an epoch of its second stage does not read
    return {k: getattr(cfg, k) for k in OWN if k not in skipped}


def own_config(args, method):
    """A method's branch Config under the preset with the command's options, and the preset's alone."""
    key, _, targets = method.partition(":")
    options = ["--loss", key] + (["--soft-targets", targets] if targets else [])
    ask = ["--preset", args.preset, "--warmup-epochs", "0", "--epochs", str(args.epochs)]
    return parse_config(ask + args.train_args + options), parse_config(ask + options)


def branch_name(args, method):
    mine, preset = (own_settings(c) for c in own_config(args, method))
    parts = [method.replace(":", "_")]
    for k, v in mine.items():
        if v != preset.get(k, not v):
            parts.append(k if v is True else f"{k}{v:g}" if isinstance(v, float) else f"{k}-{v}")
    return "_".join(parts)


def trained(folder, cfg, why=""):
    """Epochs FOLDER's checkpoint began (None: none), refused in one line where they read other settings than cfg."""
    if not (ckpt := folder / "ckpt.pt").is_file():
        return None
    state = torch.load(ckpt, map_location="cpu", weights_only=True, mmap=True)  # the tensors stay on disk
    saved, epochs = checkpoint.config_from_dict(state["config"], str(ckpt)), state["epoch"] + 1
    if changed := checkpoint.result_changes(saved, cfg, epochs):
        said = ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in changed.items())
        raise SystemExit(f"demo.py: {folder} was trained with other settings ({said}){why}: give it a new --runs")
    return epochs


def check_warm_up(root, warm):
    epochs = trained(root / "warmup", warm, ", which shape every branch's start")
    made = [p.parent.name for p in sorted(root.glob("*/ckpt.pt")) if p.parent.name != "warmup"]
    if epochs is not None and epochs < warm.warmup_epochs and made:
        raise SystemExit(
            f"demo.py: {root} holds branches ({', '.join(made)}) of a {epochs}-epoch warm-up: a new --runs"
        )
    return epochs


def check_setting(args, seed, faulty):
    """Refuse, before anything trains, a setting whose warm-up or branches these settings would not reuse."""
    root, common, warm = setting_configs(args, seed, faulty)
    check_warm_up(root, warm)
    for name, options in branches_of(args, paper_delta(faulty)).values():
        trained(root / name, branch_config(args, root, common, name, options))


def setting_configs(args, seed, faulty):
    """A setting's folder, the train.py options its runs share, and its warm-up's Config."""
    root = Path(args.runs) / setting_name(seed, faulty)
    common = ["--preset", args.preset, "--data", args.data, "--seed", str(seed), "--faulty-fraction", str(faulty)]
    common += ["--preload-cache", str(Path(args.runs) / "preload")]  # the files decoded once for all processes
    common += (["--workers", str(args.workers)] if args.workers is not None else []) + args.train_args
    warm = ["--out", str(root / "warmup"), "--warmup-epochs", str(args.warmup_epochs), "--epochs", "0"]
    return root, common, parse_config(common + warm)


def branches_of(args, delta):
    """{method: (its folder, its train.py options)}."""
    out = {}
    for method in args.methods:
        key, _, targets = method.partition(":")
        options = ["--loss", key, "--delta", f"{delta:.4f}"] + (["--soft-targets", targets] if targets else [])
        out[method] = (branch_name(args, method), options)
    return out


def branch_config(args, root, common, name, options):
    init = ["--init", str(root / "warmup" / "ckpt.pt"), "--warmup-epochs", "0", "--epochs", str(args.epochs)]
    return parse_config(common + ["--out", str(root / name)] + init + options)


def warm_up(args, seed, faulty):
    """The xID warm-up every branch of a setting starts from (resumed if it exists) -> its folder, the options the
    branches share and paper_delta. --warmup-ranks: train.py with the report under torchrun, each rank its threads."""
    root, common, warm = setting_configs(args, seed, faulty)
    check_warm_up(root, warm)  # also for the lab's sweeps and claims, which call this directly
    if args.warmup_ranks == 1:
        train.main(warm, report=turns.each_epoch(BankReport(warm)))
        return root, common, paper_delta(faulty)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={args.warmup_ranks}"]
    cmd += ["-m", "tools.bank_report", *common, "--out", str(root / "warmup")]
    cmd += ["--warmup-epochs", str(warm.warmup_epochs), "--epochs", "0"]
    threads = str(max(1, (os.cpu_count() or 1) // args.warmup_ranks))
    subprocess.run(cmd, check=True, env=os.environ | {"OMP_NUM_THREADS": threads, "PYTHONPATH": str(ROOT)})
    return root, common, paper_delta(faulty)


def run_branch(args, root, common, name, options, split=None):
    """One branch: --epochs from the warm-up in ROOT/NAME (resumed; not retrained when finished), then evaluated.
    Returns its row; adds its seconds to `split`."""
    split = {} if split is None else split
    cfg, ckpt = branch_config(args, root, common, name, options), root / name / "ckpt.pt"
    if (trained(root / name, cfg) or 0) < args.epochs:  # train.py's epoch lines say how far, and the time left
        with timed(split, f"branch {name}"):
            train.main(cfg, report=turns.each_epoch(BankReport(cfg)))
    print(f"[demo] {root.name}: evaluating {name}")
    shown = args.figures and name == branch_name(args, shown_method(args.methods))  # only it draws them
    return evaluate_branch(args, ckpt, shown, split)


def evaluate_branch(args, ckpt, figures=False, split=None):
    """make demo's protocol on a checkpoint: retrieval, few-shot SVMs and the weights' AUROC -> its table row."""
    split = {} if split is None else split
    ask = {"workers": 1 if args.workers is None else args.workers, "shots": (1, 5), "trials": args.trials}
    ask["clips"] = args.eval_clips
    with timed(split, "evaluation"):
        res = evaluate.evaluate(ckpt, ["retrieval", "fewshot"], **ask)
        res |= analyse.analysis(ckpt, workers=ask["workers"], clips=args.eval_clips, figures=figures)
    row = {k: res["retrieval"][k] for k in ("R@1", "R@5")} | {f"{n}-shot": shot(res["fewshot"], n)[0] for n in (1, 5)}
    row["AUROC"] = res["weights"]["faulty_auroc"]
    row |= {k: res["weights"][f"mean_{k}"] for k in ("weight_faulty", "weight_clean")}
    row["soft_same_class"] = res["soft_targets_same_class"]
    row["protocols"] = {k: res[k]["protocol"] for k in ("retrieval", "fewshot")}
    if args.transfer:  # classes pre-training never saw, as the paper's UCF101 and HMDB51
        with timed(split, "evaluation"):
            other = {"data": args.transfer, "manifest": ""}
            res = evaluate.evaluate(ckpt, ["retrieval", "fewshot"], overrides=other, **ask)
        row |= {f"transfer {k}": res["retrieval"][k] for k in ("R@1", "R@5")}
        row |= {f"transfer {n}-shot": shot(res["fewshot"], n)[0] for n in (1, 5)}
    return row


def shot(fewshot, n):
    """The n-shot (mean, SD), or the capped shot's evaluate.py ran where the smallest class has fewer than n."""
    return fewshot[f"{fewshot['protocol'].get('capped', {}).get(str(n), n)}-shot"]


def run_setting(args, seed, faulty):
    """Warm-up and a branch per method for one seed and level -> ({method: row}, delta, its folder or None)."""
    if saved := finished(args, seed, faulty):
        print(f"[demo] seed {seed} faulty {faulty:.0%}: done, from {setting_file(args, seed, faulty)}")
        rows = {m: {"ran_with": own_settings(own_config(args, m)[0])} | saved["rows"][m] for m in args.methods}
        return rows, saved["delta"], None
    check_setting(args, seed, faulty)
    with timed(split := {}, "warm-up"):  # seconds per phase
        root, common, delta = warm_up(args, seed, faulty)
    calls = [(args, root, common, name, options) for name, options in branches_of(args, delta).values()]
    if (n := args.side_by_side_branches()) > 1:
        with timed(split, "branches and evaluations, side by side"):
            rows = dict(zip(args.methods, side_by_side(run_branch, calls, n)))
    else:
        rows = {m: run_branch(*call, split) for m, call in zip(args.methods, calls)}
    for m in args.methods:
        rows[m] |= {"delta": delta, "ran_with": own_settings(own_config(args, m)[0])}
        shown = json.dumps({k: rows[m][k] for k in args.columns})
        print(f"[demo] seed {seed} faulty {faulty:.0%} {method_name(m)}: {shown}")
    done = setting_file(args, seed, faulty)
    done.parent.mkdir(parents=True, exist_ok=True)
    kept = {"key": setting_key(args, faulty), "seed": seed, "faulty": faulty, "delta": delta, "rows": rows}
    done.with_suffix(".tmp").write_text(json.dumps(kept, indent=1))
    done.with_suffix(".tmp").replace(done)  # atomic: a killed run leaves no half-written file
    (root / "time_split.json").write_text(json.dumps(split))  # read back by main, also from --jobs processes
    return rows, delta, root


def side_by_side(fn, calls, jobs):
    """[fn(*call) for call in calls], `jobs` at a time in processes when jobs > 1, each an equal share of the threads
    (and with several GPUs, one of them), in order. Where the processes outnumber the cores, they take turns at the
    cores, an epoch at a time (tools/turns.py): each still trains on its own thread, so its numbers stay the same."""
    if jobs <= 1:
        return [fn(*call) for call in calls]
    context = start_context()
    slots, shared = context.Value("i", 0), turns.turns_for(jobs, os.cpu_count() or 1, context)
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_job_init, initargs=(slots, jobs, shared)) as pool:
        return list(pool.map(turns.in_turn, [fn] * len(calls), *zip(*calls)))


def start_context():
    """The processes' start method. On Linux a forkserver that imported the slow modules once (PRELOAD, found in
    site-packages wherever the command runs), the children forked from it rather than each importing them anew (3.5 s
    a child); it has run no torch op, so no OpenMP threads are forked. It starts at the first pool and keeps the
    environment of then. Elsewhere spawn: macOS, like Python itself, does not fork a process that holds torch."""
    if sys.platform != "linux":
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    return context


def _job_init(slots, jobs, shared):
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))  # Ctrl-C: the parent says what to do; no torn checkpoint
    with slots.get_lock():
        slot, slots.value = slots.value, slots.value + 1
    turns.TURNS = shared
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // jobs))
    data.PROCESSES = jobs  # the default loader workers share the cores between the settings side by side
    if "fork" in multiprocessing.get_all_start_methods():  # the loader's workers: the pool's method would pickle
        multiprocessing.set_start_method("fork", force=True)  # the dataset, which cannot be pickled
    if torch.cuda.device_count() > 1:
        torch.cuda.set_device(slot % torch.cuda.device_count())


def main(argv=None):
    args, t0 = parse_args(argv), time.time()
    if args.fresh:
        shutil.rmtree(args.runs, ignore_errors=True)
        shutil.rmtree(setting_file(args, 0, 0).parent, ignore_errors=True)
    with timed(split := {}, "data"):
        for folder in filter(None, (args.data, args.transfer)):
            synthetic.ensure(folder)
    settings = [(seed, faulty) for seed in args.seeds for faulty in args.faulty]
    for seed, faulty in settings:  # every setting's folders checked before any trains
        if not finished(args, seed, faulty, quiet=True):
            check_setting(args, seed, faulty)
    done = side_by_side(run_setting, [(args, seed, faulty) for seed, faulty in settings], args.jobs)
    results, deltas, root, reused = [], {}, None, 0
    for (_seed, faulty), (rows, delta, ran) in zip(settings, done):
        if faulty == args.faulty[0]:
            results.append({})
        results[-1][faulty], deltas[faulty], root, reused = rows, delta, ran or root, reused + (ran is None)
    shown = shown_method(args.methods)  # the branch whose evaluation pictures demo.md shows
    minutes, shown = (time.time() - t0) / 60, (branch_name(args, shown), method_name(shown))
    table, numbers, *pictures = write_results(args, results, deltas, root, minutes, argv, reused, shown)
    said = []  # what stdout shows goes into demo.md too: the comparison, the seeds' spread, the time split
    if args.compare:
        spread = paired_spread({faulty: setting_key(args, faulty) for faulty in args.faulty})
        said.append(BESIDE + compare(results, json.loads(Path(args.compare).read_text()), args, spread))
    said.append(
        "## Where the time went\n\n" + time_split(split["data"], [ran for _, _, ran in done if ran], time.time() - t0)
    )
    with open(table, "a") as md:
        md.write("\n" + "\n\n".join(said) + "\n")
    print("\n" + "\n\n".join(said))
    beside = f", and beside it {len(pictures)} pictures it links: {', '.join(p.name for p in pictures)}"
    print(f"\n[demo] wrote {table} (the table; its numbers: {numbers.name}){beside if pictures else ''}")


def cli(argv=None):
    """main, where Ctrl-C says in one line what is kept and the command that goes on (its own, less --fresh). It
    reaches the side-by-side processes too, which end at once (_job_init): their pool may break first."""
    argv, stopped = sys.argv[1:] if argv is None else argv, []

    def interrupted(*_):
        stopped.append(True)
        raise KeyboardInterrupt

    main_thread = threading.current_thread() is threading.main_thread()  # signal handlers: the main thread only
    before = signal.signal(signal.SIGINT, interrupted) if main_thread else None
    try:
        main(argv)
    except (KeyboardInterrupt, BrokenProcessPool) as err:
        if not (stopped or isinstance(err, KeyboardInterrupt)):
            raise
        again = " ".join([".venv/bin/python demo.py", *(shlex.quote(a) for a in argv if a != "--fresh")])
        print(f"\n[demo] stopped by Ctrl-C; the finished epochs are kept, and this goes on: {again}", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, before)


if __name__ == "__main__":
    cli()
