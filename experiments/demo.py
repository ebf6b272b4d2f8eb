"""The demo: the paper's Table 2 and Fig. 7 on the synthetic dataset, where the truth is known.

For each seed and share of injected faulty positives: one xID warm-up, then one branch per method
for equal epochs (losses.VARIANTS: xID, Weighted-xID, Oracle-xID, Soft-xID, Robust-xID; `soft:oracle`
is Soft-xID with the oracle's class-label targets of Table 1), each evaluated by retrieval, few-shot
SVMs and the AUROC of its weights against the known faulty positives. Writes RESULTS/demo.md (means
over seeds and paired differences against xID with 95% confidence intervals), RESULTS/demo.json and,
with several noise levels, Fig. 7 as RESULTS/noisy.png.

    make demo        # = python -m experiments.demo --fresh --runs runs/make_demo --results runs/make_demo \
                     #       --compare lab/results/demo.json
    python -m experiments.demo --figure noisy                                   # Fig. 7: 4 levels x 3 methods x 3 seeds
    python -m experiments.demo --methods xid weighted soft robust soft:oracle --seeds 0 1 2 3 4   # Table 2
    python -m experiments.demo --figure noisy --jobs 8                          # settings side by side (GPU box)

What a run trains is one typed object, DemoArgs, whose defaults are `make demo`'s regime; the command
line fills it, and the lab's claims, sweeps and screens build their own (lab/README.md). A setting's
branches (each trained, then evaluated) run side by side by default, a process of one thread each on
2 cores (`--branch-jobs 1`: one after another with every thread); on one thread the two give the same
numbers (tests/test_demo.py).

Faulty positives are injected as the paper does (Sec. 5.2), with sounds from outside both splits:
the synthetic set's `_heldout/` pool (train.py's --faulty-source heldout); any train.py option given
here passes through, e.g. `--faulty-source train` for the donor deviation. As in the paper, delta is
set from the known noise level (`paper_delta`): the weight function's midpoint sits at the quantile of
the injected share, the one a user knows. `weighted@shares` is the named deviation that adds the
natural share, which only the generator knows. Every run resumes: rerunning a command continues where
it stopped, and a finished (seed, level) is kept as RESULTS/NAME_settings/seedS_faultyF.json, so that a
later run (on another machine, its runs/ folder gone) only adds what is missing. A rerun with other settings
reuses a run folder only where the settings that shape it are the same (experiments/reuse.py): another --lam
trains Soft- and Robust-xID anew in folders of their own (soft_lam0.3) from the same warm-up, and demo.md says
what each row ran with.

`--transfer DATA` also evaluates each branch on a set whose classes pre-training never saw (the paper
judges transfer to UCF101 and HMDB51): `--transfer data/synth_transfer` generates the synthetic one.
The sets are experiments/sets.py's; the tables, the progress line and the side-by-side jobs are in
files of their own.
"""

import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from statistics import NormalDist

import checkpoint
import data
import evaluate
import train
from analysis.drift import BankReport
from config import PRESETS, parse_config
from experiments import jobs, reuse
from experiments.demo_args import parse_args
from experiments.demo_report import (
    branch_folder,
    compare,
    method_name,
    paired_spread,
    parse_method,
    shown_method,
    write_results,
)
from experiments.jobs import side_by_side
from experiments.progress import Progress, time_split, timed
from experiments.reuse import own_settings
from experiments.sets import SYNTH_SETS, ensure_data  # noqa: F401  (demo.SYNTH_SETS: the tests, the docs)
from tools import analyse

KEYED = ("data", "warmup_epochs", "epochs")  # in a setting's key under names of their own


# Sec. 5.2 sets delta "so that the midpoint of the weighting function coincides with the known fraction
# of altered samples": under a normal fit of the bank scores, delta = Phi^-1(injected share) puts that
# share below the midpoint mu + delta sigma. With nothing injected the rule has no midpoint
# (Phi^-1(0) = -inf), so 0% uses a fixed delta: config's default, -1, one sigma below the mean (about
# 16% of the scores below it), not tuned on any run.
DELTA_AT_ZERO = -1.0


def paper_delta(faulty):
    """delta of eq. (6) from the known share of injected faulty positives (Sec. 5.2)."""
    return NormalDist().inv_cdf(min(faulty, 1 - 1e-3)) if faulty > 0 else DELTA_AT_ZERO


def faulty_share(cfg):
    """The share of faulty positives in the training set, natural plus injected: the generator knows
    the natural ones, a user does not (the `shares` deviation only)."""
    return float(data.build_train_set(cfg).faulty.float().mean())


def shares_delta(common):
    """The deviation's delta: the midpoint at the quantile of the natural plus the injected share."""
    share = faulty_share(parse_config(common + ["--out", "unused"]))
    return NormalDist().inv_cdf(min(max(share, 1e-3), 1 - 1e-3))


def settings_dir(args):
    """Finished (seed, noise level)s as small files beside the results: kept (the claims commit theirs),
    a rerun in a new checkout (whose runs/ folder is gone) skips what is done and adds only what is missing."""
    return Path(args.results) / (args.settings or f"{args.figure or 'demo'}_settings")


def setting_name(seed, faulty):
    """One (seed, noise level)'s name: its run folder and its settings file."""
    return f"seed{seed}_faulty{round(100 * faulty)}"


def setting_file(args, seed, faulty):
    return settings_dir(args) / f"{setting_name(seed, faulty)}.json"


def setting_key(args, faulty):
    """What a finished setting's numbers depend on, beyond its seed and noise level. The manifest's
    hash stands for the data: a regenerated set with other videos does not reuse old numbers. Where
    something is injected, also the injection: its draw's stream, where the audio comes from and that
    pool's files; at 0% nothing is drawn, so none of them is part of the key."""
    manifest = Path(args.data) / "manifest.csv"
    digest = hashlib.sha1(manifest.read_bytes()).hexdigest()[:12] if manifest.exists() else None
    cfg = parse_config(["--preset", args.preset, "--data", args.data] + args.train_args)
    # The recipe where it differs from the demo2000 preset's, the reference the key's other fields assume:
    # a finished setting is never reused for a run of another model size, clip or rate.
    recipe = {k: getattr(cfg, k) for k, v in PRESETS["demo2000"].items() if k not in KEYED and getattr(cfg, k) != v}
    key = {
        "data": args.data,
        "manifest_sha1": digest,
        "warmup_epochs": args.warmup_epochs,
        "epochs": args.epochs,
        "finetune_epochs": args.finetune_epochs,
        "trials": args.trials,
        "train_args": args.train_args,
        **({"recipe": recipe} if recipe else {}),
        **({"eval_clips": args.eval_clips} if args.eval_clips != evaluate.CLIPS else {}),
        **({"warmup_ranks": args.warmup_ranks} if args.warmup_ranks > 1 else {}),
        **({"transfer": args.transfer} if args.transfer else {}),
        "delta": paper_delta(faulty),  # the rule's: a setting made under another rule runs again
    }
    if faulty == 0:
        return key
    pool = None
    if cfg.faulty_source != "train":
        folder = data.pool_folder(cfg)
        files = sorted((f.name, f.stat().st_size) for f in folder.iterdir()) if folder.is_dir() else []
        pool = hashlib.sha1(repr(files).encode()).hexdigest()[:12]
    return key | {"injection_stream": data.INJECTION_STREAM, "faulty_source": cfg.faulty_source, "pool_sha1": pool}


def finished_settings(folder):
    """Every finished (seed, noise level) kept in a settings folder: {key, seed, faulty, delta, rows}."""
    return [json.loads(p.read_text()) for p in sorted(Path(folder).glob("seed*_faulty*.json"))]


def finished(args, seed, faulty, quiet=False):
    """A finished setting as its settings file keeps it (the same key and methods), or None."""
    done = setting_file(args, seed, faulty)
    if done.exists():
        saved = json.loads(done.read_text())
        if saved["key"] == setting_key(args, faulty) and all(m in saved["rows"] for m in args.methods):
            return saved
        if not quiet:
            print(f"[demo] {done} was made with other settings or methods: running this setting again")
    return None


def run_setting(args, seed, faulty):
    """Warm-up and one branch per method for one seed and noise level; returns {method: metrics}."""
    if saved := finished(args, seed, faulty):
        print(f"[demo] seed {seed} faulty {faulty:.0%}: done, from {setting_file(args, seed, faulty)}")
        rows = {m: {"ran_with": own_settings(own_config(args, m)[0])} | saved["rows"][m] for m in args.methods}
        return rows, saved["delta"], None
    check_setting(args, seed, faulty)  # one line, before anything trains, where its folders cannot be reused
    split = {}  # seconds per phase of this setting: its warm-up, each branch's training, evaluation
    progress = Progress(f"seed {seed}, {faulty:.0%}", args.warmup_epochs, args.epochs, len(args.methods))
    with timed(split, "warm-up"):
        root, common, delta = warm_up(args, seed, faulty, progress)
    branches = branches_of(args, common, delta)  # method: (its folder, its train.py options, its delta)
    if (n_jobs := args.side_by_side_branches()) > 1:  # every branch (training, then evaluation) in a process
        progress.side_by_side(n_jobs)
        calls = [(args, root, common, name, options) for name, options, _ in branches.values()]
        with timed(split, "branches and evaluations, side by side"):
            rows = dict(zip(branches, jobs.with_progress(_branch_job, calls, n_jobs, progress)))
    else:
        rows = {m: run_branch(args, root, common, b[0], b[1], split, progress) for m, b in branches.items()}
    for method in args.methods:
        rows[method] |= {"delta": branches[method][2], "ran_with": own_settings(own_config(args, method)[0])}
        print(
            f"[demo] seed {seed} faulty {faulty:.0%} {method_name(method)}: "
            + json.dumps({k: rows[method][k] for k in args.columns})
        )
    done = setting_file(args, seed, faulty)
    done.parent.mkdir(parents=True, exist_ok=True)
    tmp = done.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {"key": setting_key(args, faulty), "seed": seed, "faulty": faulty, "delta": delta, "rows": rows}, indent=1
        )
    )
    tmp.replace(done)  # atomic: a killed run leaves no half-written file
    (root / "time_split.json").write_text(json.dumps(split))  # read back by main, also from --jobs processes
    return rows, delta, root


def setting_configs(args, seed, faulty):
    """One (seed, noise level)'s folder, the train.py options its runs share, and its warm-up's Config."""
    root = Path(args.runs) / setting_name(seed, faulty)
    common = (
        ["--preset", args.preset, "--data", args.data, "--seed", str(seed), "--faulty-fraction", str(faulty)]
        + ["--preload-cache", str(Path(args.runs) / "preload")]  # the files decoded once for all processes
        + (["--workers", str(args.workers)] if args.workers is not None else [])
        + args.train_args
    )
    warm = ["--out", str(root / "warmup"), "--warmup-epochs", str(args.warmup_epochs), "--epochs", "0"]
    return root, common, parse_config(common + warm)


def own_config(args, method):
    """A method's branch as far as its own settings go (experiments/reuse.py): its Config under the preset, the
    command's train.py options and the method's, and the preset's Config for that method."""
    key, targets, _ = parse_method(method)
    options = ["--loss", key] + (["--soft-targets", targets] if targets else [])
    ask = ["--preset", args.preset, "--warmup-epochs", "0", "--epochs", str(args.epochs)]
    return parse_config(ask + args.train_args + options), parse_config(ask + options)


def branch_name(args, method):
    """A method's branch folder: soft, or named by its own settings where they are not the preset's (soft_lam0.3)."""
    return reuse.branch_name(branch_folder(method), *own_config(args, method))


def branches_of(args, common, delta):
    """{method: (its folder, its train.py options, its delta)} for a setting whose paper delta is `delta`."""
    branches = {}
    for method in args.methods:
        key, targets, rule = parse_method(method)
        used = shares_delta(common) if rule == "shares" else delta
        options = ["--loss", key, "--delta", f"{used:.4f}"] + (["--soft-targets", targets] if targets else [])
        branches[method] = (branch_name(args, method), options, used)
    return branches


def branch_config(args, root, common, name, options):
    """The Config of the branch ROOT/NAME: `args.epochs` epochs from the setting's warm-up, with `options`."""
    init = ["--init", str(root / "warmup" / "ckpt.pt"), "--warmup-epochs", "0", "--epochs", str(args.epochs)]
    return parse_config(common + ["--out", str(root / name)] + init + options)


def check_setting(args, seed, faulty):
    """Stop in one line where a setting's warm-up or a branch was trained with settings that shape it otherwise."""
    root, common, warm = setting_configs(args, seed, faulty)
    reuse.check_warm_up(root, warm)
    for name, options, _ in branches_of(args, common, paper_delta(faulty)).values():
        reuse.check_branch(root / name, branch_config(args, root, common, name, options))


def warm_up(args, seed, faulty, progress=None):
    """The xID warm-up that every branch of one (seed, noise level) starts from (resumed if it exists).
    Returns its folder, the train.py options the branches share, and the paper's delta (paper_delta)."""
    root, common, warm = setting_configs(args, seed, faulty)
    reuse.check_warm_up(root, warm)  # also for the lab's sweeps and claims, which call this directly
    ckpt = root / "warmup" / "ckpt.pt"
    if progress is not None and ckpt.exists():  # epochs an earlier run did: done, but not timed here
        progress.skipped(epochs=checkpoint.load_checkpoint(ckpt)["epoch"] + 1)
    on_epoch = progress and (lambda e: progress.trained(f"warm-up epoch {e + 1}/{args.warmup_epochs}"))
    if args.warmup_ranks > 1:  # not the default: see --warmup-ranks
        _torchrun(
            args.warmup_ranks,
            common + ["--out", str(root / "warmup"), "--warmup-epochs", str(args.warmup_epochs)],
            on_epoch,
        )
    else:
        train.main(warm, report=BankReport(warm, then=on_epoch))
    return root, common, paper_delta(faulty)


def _torchrun(ranks, argv, on_epoch=None):
    """train.py under torchrun: `ranks` processes of one share of the threads each, gloo on the CPU; its
    epoch lines passed on as they come."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"]
    cmd += ["-m", "experiments.train_reported", *argv, "--epochs", "0"]  # train.py, its log as the in-process runs'
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // ranks)), "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = str(Path(train.__file__).parent)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env) as proc:
        for line in proc.stdout:
            print(line, end="")
            if on_epoch and line.startswith("epoch "):
                on_epoch(int(line.split()[1]))
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed with exit status {proc.returncode}")


def _branch_job(args, root, common, name, options, relay):
    """run_branch in a process of the side-by-side branches, its progress relayed to the parent's line."""
    return run_branch(args, root, common, name, options, progress=relay)


def run_branch(args, root, common, name, options, split=None, progress=None):
    """One branch: `args.epochs` epochs from the warm-up with train.py `options`, in ROOT/NAME (resumed,
    and not rebuilt when finished), then evaluated. Returns its row of metrics; adds its training and
    evaluation seconds to `split`."""
    split = {} if split is None else split
    out = root / name
    cfg = branch_config(args, root, common, name, options)
    reuse.check_branch(out, cfg)
    ckpt = out / "ckpt.pt"
    state = checkpoint.load_checkpoint(ckpt) if ckpt.exists() else None
    if progress is not None and state is not None:  # epochs an earlier run did
        progress.skipped(epochs=min(args.epochs, state["epoch"] + 1))
    if state is None or state["epoch"] + 1 < args.epochs:  # check_setting refused other settings
        with timed(split, f"branch {name}"):
            # resumes, or refuses other settings; a finished branch skips it (no preload for nothing)
            then = progress and (lambda e: progress.trained(f"{name} epoch {e + 1}/{args.epochs}"))
            train.main(cfg, report=BankReport(cfg, then=then))
    tasks = ["retrieval", "fewshot"] + (["finetune"] if args.finetune_epochs else [])
    if progress is not None:
        progress.evaluating(name)
    with timed(split, "evaluation"):
        workers = 1 if args.workers is None else args.workers
        res = evaluate.evaluate(
            ckpt,
            tasks,
            workers=workers,
            shots=(1, 5),
            trials=args.trials,
            finetune_args={"epochs": args.finetune_epochs},
            clips=args.eval_clips,
        )
        shown = args.figures and name == branch_name(args, shown_method(args.methods))  # the figures it shows
        res |= analyse.analysis(ckpt, workers=workers, clips=args.eval_clips, figures=shown)
    if progress is not None:
        progress.evaluated(name)
    row = {
        "R@1": res["retrieval"]["R@1"],
        "R@5": res["retrieval"]["R@5"],
        "1-shot": shot(res["fewshot"], 1)[0],
        "5-shot": shot(res["fewshot"], 5)[0],
        "AUROC": res["weights"]["faulty_auroc"],
        "weight_faulty": res["weights"]["mean_weight_faulty"],
        "weight_clean": res["weights"]["mean_weight_clean"],
        "soft_same_class": res["soft_targets_same_class"],
        "protocols": {k: res[k]["protocol"] for k in ("retrieval", "fewshot")},
    }
    if args.finetune_epochs:
        row["fine-tune"] = res["finetune"]["test_acc"]
    if args.transfer:  # classes pre-training never saw, as the paper's UCF101 and HMDB51
        with timed(split, "evaluation"):
            res = evaluate.evaluate(
                ckpt,
                ["retrieval", "fewshot"],
                overrides={"data": args.transfer, "manifest": ""},
                workers=workers,
                shots=(1, 5),
                trials=args.trials,
                clips=args.eval_clips,
            )
        row |= {f"transfer {k}": res["retrieval"][k] for k in ("R@1", "R@5")}
        row |= {f"transfer {n}-shot": shot(res["fewshot"], n)[0] for n in (1, 5)}
    return row


def shot(fewshot, n):
    """The n-shot (mean, SD), or where the set's smallest class has fewer than n training videos, the
    capped shot's that evaluate.py ran and its protocol names."""
    return fewshot[f"{fewshot['protocol'].get('capped', {}).get(str(n), n)}-shot"]


def main(argv=None):
    args = parse_args(argv, description=__doc__.split("\n\n")[0])
    t0 = time.time()
    if args.fresh:
        shutil.rmtree(args.runs, ignore_errors=True)
        shutil.rmtree(settings_dir(args), ignore_errors=True)
    with timed(split := {}, "data"):
        ensure_data(args.data)
        if args.transfer:
            ensure_data(args.transfer)
    settings = [(seed, faulty) for seed in args.seeds for faulty in args.faulty]
    for seed, faulty in settings:  # every setting's folders checked before any trains
        if not finished(args, seed, faulty, quiet=True):
            check_setting(args, seed, faulty)
    done = side_by_side(run_setting, [(args, seed, faulty) for seed, faulty in settings], args.jobs)
    results, deltas, root, reused = [], {}, None, 0
    for (_seed, faulty), (rows, delta, ran) in zip(settings, done):
        if faulty == args.faulty[0]:
            results.append({})
        results[-1][faulty], deltas[faulty] = rows, delta
        root = ran or root
        reused += ran is None
    minutes = (time.time() - t0) / 60
    shown = branch_name(args, shown_method(args.methods))  # the branch whose evaluation pictures demo.md shows
    table, numbers, *pictures = write_results(args, results, deltas, root, minutes, argv, reused, shown)
    if args.compare:
        spread = paired_spread({faulty: setting_key(args, faulty) for faulty in args.faulty})
        print(compare(results, json.loads(Path(args.compare).read_text()), args, spread))
    print("\n" + time_split(split["data"], [ran for _, _, ran in done if ran], time.time() - t0))
    beside = f", and beside it {len(pictures)} pictures it links: {', '.join(p.name for p in pictures)}"
    print(f"\n[demo] wrote {table} (the table; its numbers: {numbers.name}){beside if pictures else ''}")


def resume_command(argv):
    """The command that goes on from where a stopped demo was: its own, less --fresh (which would delete it)."""
    return " ".join([".venv/bin/python -m experiments.demo", *(shlex.quote(a) for a in argv if a != "--fresh")])


def cli(argv=None):
    """main, where Ctrl-C says in one line what is kept and how to go on, not in a traceback. Ctrl-C reaches the
    side-by-side processes too, which end at once (jobs._job_init): the parent may see their pool break first."""
    argv = sys.argv[1:] if argv is None else argv
    stopped = []

    def interrupted(*_):
        stopped.append(True)
        raise KeyboardInterrupt

    main_thread = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGINT, interrupted) if main_thread else None
    try:
        main(argv)
    except (KeyboardInterrupt, BrokenProcessPool) as err:
        if not (stopped or isinstance(err, KeyboardInterrupt)):
            raise
        said = f"[demo] stopped by Ctrl-C; the finished epochs are kept, and this goes on: {resume_command(argv)}"
        print("\n" + said, file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        if before is not None:
            signal.signal(signal.SIGINT, before)


if __name__ == "__main__":
    cli()
