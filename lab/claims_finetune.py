"""Table 2's fine-tune column (Sec. 5.1's protocol, finetune.finetune) for the claims' checkpoints.

One fine-tune is 200 epochs on the train split (about 33 min on 2 cores), so the column is run
where a GPU is: every checkpoint in its own process, all at once, each appending one JSON line to
lab/results/claims/finetune.jsonl as it finishes (a run cut short keeps what finished).

    python -m lab.claims_finetune pack --out .ft/ckpts.tar.xz   # here: the checkpoints to carry
    python -m lab.claims_finetune run .ft/ckpts.tar.xz          # on the GPU machine
    python -m lab.claims report --run first                     # the column joins the first run's table2.md

Why `pack`: a GPU machine is often reached by copying files to it, and twelve full checkpoints
(18 MB each, with the audio encoder, the bank and Adam's state) are mostly what a fine-tune never
reads. `pack` keeps only what it reads (the video encoder's weights and buffers, the config, the
model's arguments), xz-compressed; `run` rebuilds the encoder from that. It is a carrying format,
not one the project keeps: train.py's checkpoints stay the record.
"""

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import torch

import demo
from checkpoint import load_checkpoint
from lab.claims import FIRST_SEED, TABLE2

RESULTS = Path("lab/results/claims/finetune.jsonl")
SEEDS, LEVEL = tuple(range(FIRST_SEED, FIRST_SEED + 3)), 0.5  # PLAN.md: Table 2 at 50%, the first 3 seeds


def setting_name(seed, method, faulty=LEVEL):
    return f"{demo.setting_name(seed, faulty)}_{method}"


def pack(runs, out, seeds=SEEDS, methods=TABLE2, faulty=LEVEL):
    """Write the slim checkpoints of (seed, method) into one .tar.xz (the module docstring says why)."""
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:xz", preset=9) as tar:
        for seed in seeds:
            for method in methods:
                path = Path(runs) / demo.setting_name(seed, faulty) / method / "ckpt.pt"
                state = load_checkpoint(path)
                slim = {
                    "model_args": state["model_args"],
                    "config": state["config"],
                    "epoch": state["epoch"],
                    "video": {k[len("video.") :]: v for k, v in state["model"].items() if k.startswith("video.")},
                    "seed": seed,
                    "method": method,
                    "faulty": faulty,
                    "source": str(path),
                }
                buf = io.BytesIO()
                torch.save(slim, buf)
                info = tarfile.TarInfo(setting_name(seed, method, faulty) + ".pt")
                info.size = buf.tell()
                buf.seek(0)
                tar.addfile(info, buf)
    print(f"[claims_finetune] {out}: {Path(out).stat().st_size / 2**20:.1f} MiB")


def encoder_of(slim_path):
    """(config, video encoder, the slim dict) of a packed checkpoint: the encoder load_pretrained gives."""
    from checkpoint import config_from_dict
    from model import AVModel

    slim = torch.load(slim_path, map_location="cpu", weights_only=True)
    cfg = config_from_dict(slim["config"], source=str(slim_path))
    args = {k: v for k, v in slim["model_args"].items() if not (k == "head" and v == "mlp")}  # as load_pretrained
    encoder = AVModel(**args).video
    encoder.load_state_dict(slim["video"])
    return cfg, encoder, slim


def finetune_one(slim_path, results, epochs=None, device=None):
    """Sec. 5.1's fine-tune of one slim checkpoint's encoder; appends its line to `results`."""
    import evaluate
    import finetune

    cfg, encoder, slim = encoder_of(slim_path)
    t0 = time.time()
    fa = {**finetune.FINETUNE, "epochs": epochs or finetune.FINETUNE["epochs"], "frames": cfg.frames}
    res = finetune.finetune(encoder, cfg, evaluate.resolve(cfg), **fa, device=device, workers=0)
    line = {
        "seed": slim["seed"],
        "method": slim["method"],
        "faulty": slim["faulty"],
        "test_acc": res["test_acc"],
        "steps": res["steps"],
        "wall_s": round(time.time() - t0, 1),
        "source": slim["source"],
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "protocol": finetune.protocol(fa),
    }
    with open(results, "a") as f:  # one short line per write: the processes' lines do not interleave
        f.write(json.dumps(line) + "\n")
    print(
        f"[claims_finetune] {slim['source']}: test accuracy {100 * res['test_acc']:.1f}% ({line['wall_s']:.0f} s)",
        flush=True,
    )


def unpack(packed, work):
    """The slim checkpoints of a pack, extracted into `work`."""
    Path(work).mkdir(parents=True, exist_ok=True)
    with tarfile.open(packed) as tar:
        tar.extractall(work, filter="data")
    return sorted(Path(work).glob("*.pt"))


def run(packed, results, work="runs/claims_finetune", first=("xid", "weighted"), epochs=None):
    """Every packed checkpoint at once, one process and one thread each; the `first` methods keep the
    CPU's priority, so a run cut short by a time limit leaves whole pairs of them."""
    done = set()
    if Path(results).exists():
        done = {setting_name(r["seed"], r["method"], r["faulty"]) for r in map(json.loads, open(results))}
    procs = []
    for path in unpack(packed, work):
        if path.stem in done:
            continue
        nice = 0 if path.stem.rsplit("_", 1)[1] in first else 10
        cmd = [sys.executable, "-m", "lab.claims_finetune", "one", str(path), "--results", str(results)]
        procs.append(
            subprocess.Popen(
                cmd + (["--epochs", str(epochs)] if epochs else []),
                env={**os.environ, "OMP_NUM_THREADS": "1"},
                preexec_fn=lambda n=nice: os.nice(n),
            )
        )
    return max([p.wait() for p in procs], default=0)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("pack", help="the slim checkpoints of the column, in one .tar.xz")
    a.add_argument("--runs", default="runs/claims")
    a.add_argument("--out", default=".ft/ckpts.tar.xz")
    a = sub.add_parser("run", help="fine-tune every packed checkpoint, all at once")
    a.add_argument("packed")
    a.add_argument("--results", default=str(RESULTS))
    a.add_argument("--epochs", type=int, help="paper: 200 (fewer: a smoke test, not the column)")
    a = sub.add_parser("one", help="fine-tune one slim checkpoint (what `run` starts)")
    a.add_argument("slim")
    a.add_argument("--results", default=str(RESULTS))
    a.add_argument("--epochs", type=int)
    args = p.parse_args(argv)
    if args.cmd == "pack":
        pack(args.runs, args.out)
    elif args.cmd == "run":
        return run(args.packed, args.results, epochs=args.epochs)
    else:
        torch.set_num_threads(1)
        finetune_one(args.slim, args.results, args.epochs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
