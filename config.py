"""Every training setting in one typed place, with the paper's value in its help (Sec. 5.1, Sec. 6).

`Config` holds the defaults of the paper's ablation setting (Sec. 5.1: R(2+1)D-9, 80x80, 11025 Hz);
`PRESETS` changes them for the Sec. 6 comparison (`sota`) and for the CPU demo (`demo`).
`parse_config` turns `--preset NAME --field-name VALUE ...` into a Config; an unknown option is an
error. `python train.py --help` prints the options grouped: data, clip, model, optimisation, method
(the paper's hyper-parameters) and engineering (workers, preload, precision, ...: they change speed,
not results).

Which fields change a run's result matters twice: a resumed run refuses to continue under other
values of them (train.py), and `ENGINEERING` lists the ones that do not.
"""

import argparse
from dataclasses import asdict, dataclass, field, fields

from losses import SOFT_TARGET_STRATEGIES, VARIANTS


def _opt(default, text, group):
    return field(default=default, metadata={"help": text, "group": group})


@dataclass
class Config:
    # data
    data: str = _opt("data/synth", "dataset root", "data")
    layout: str = _opt("folder", "ucf101 | hmdb51 | kinetics | folder (media/manifest.py)", "data")
    split: str = _opt("train", "split to pre-train on", "data")
    fold: int = _opt(1, "split 1-3 of UCF101 / HMDB51", "data")
    annotations: str = _opt("", "split files or the Kinetics CSV, when not in the layout's default place", "data")
    manifest: str = _opt("", "usable-file list; default ROOT/manifest.csv, made by a scan when missing", "data")
    faulty_fraction: float = _opt(0.0, "share of instances whose audio is replaced (paper Fig. 7: 0 to 0.8)", "data")
    faulty_source: str = _opt(
        "heldout",
        "where injected audio comes from: 'heldout' (paper, Sec. 5.2: files outside the "
        "training and test sets, --faulty-pool), 'train' (another training video's: a "
        "deviation, its sound then sits in two bank slots) or 'noise' (the synthetic set's "
        "out-of-distribution ROOT/_pool)",
        "data",
    )
    faulty_pool: str = _opt(
        "",
        "folder of media outside both splits for --faulty-source heldout (default "
        "ROOT/_heldout, which synthetic.py writes; for a real dataset, e.g. the videos left "
        "out of a Kinetics subset); each injected instance gets a file of its own",
        "data",
    )
    # clip
    frames: int = _opt(8, "frames per clip T (paper: 8; Sec. 6 also fine-tunes on 32)", "clip")
    fps: float = _opt(16.0, "frame rate (paper: 16)", "clip")
    size: int = _opt(80, "crop side (paper: 80; Sec. 6: 112)", "clip")
    audio_rate: int = _opt(11025, "audio sample rate in Hz (paper: 11025; Sec. 6: 24000)", "clip")
    n_mels: int = _opt(80, "mel bands (paper: 80; Sec. 6: 128)", "clip")
    n_time: int = _opt(80, "spectrogram time steps over 2 s (paper: 80; Sec. 6: 128)", "clip")
    augment: float = _opt(
        1.0,
        "strength of the video augmentation, scaling the crop's area loss, the colour jitter "
        "and the chances of jitter, greyscale and blur (paper: 1, SimCLR's; 0: flips only)",
        "clip",
    )
    # model
    video_depth: int = _opt(9, "R(2+1)D depth, 9 or 18 (paper: 9; Sec. 6: 18)", "model")
    width: float = _opt(1.0, "channel multiplier (paper: 1.0; the demo uses 0.25)", "model")
    # optimisation
    batch_size: int = _opt(224, "global batch, split over processes (paper: 224; Sec. 6: 512)", "optimisation")
    lr: float = _opt(
        1e-4, "Adam learning rate of the warm-up and start of the cosine (paper: 1e-4; Sec. 6: 5e-4)", "optimisation"
    )
    lr_min: float = _opt(1e-5, "end of the cosine (paper: 1e-5; Sec. 6: 5e-5)", "optimisation")
    warmup_epochs: int = _opt(400, "epochs of xID warm-up, eq. (1) (paper: 400; Sec. 6: 200)", "optimisation")
    epochs: int = _opt(200, "epochs of the second stage with --loss (paper: 200)", "optimisation")
    # method (Sec. 4)
    loss: str = _opt(
        "robust",
        "second stage: " + " | ".join(f"{k} ({v.name})" for k, v in VARIANTS.items()) + " (paper: robust)",
        "method",
    )
    soft_targets: str = _opt("ccp", " | ".join(SOFT_TARGET_STRATEGIES) + " (paper: ccp; oracle uses labels)", "method")
    num_negatives: int = _opt(1024, "negatives K per sample (paper: 1024)", "method")
    tau: float = _opt(0.07, "temperature of eq. (2) (paper: 0.07)", "method")
    tau_s: float = _opt(0.02, "temperature of the softening scores, eqs. (10)-(14) (paper: 0.02)", "method")
    tau_t: float = _opt(0.07, "temperature of the cycle terms of CCP, eqs. (13)-(14) (paper: 0.07)", "method")
    lam: float = _opt(0.5, "mixing coefficient lambda of eqs. (8)-(9) (paper: 0.5)", "method")
    kappa: float = _opt(0.5, "kappa of eq. (6) (paper: 0.5)", "method")
    w_min: float = _opt(0.25, "w_min of eq. (6) (paper: 0.25)", "method")
    delta: float = _opt(
        -1.0,
        "delta of eq. (6): the weights' midpoint at mu + delta sigma (paper: set from the "
        "known noise level, Sec. 5.2; demo.py does so)",
        "method",
    )
    momentum: float = _opt(0.5, "memory-bank EMA constant (paper: 0.5)", "method")
    seed: int = _opt(0, "seed of the model, bank, sampler, augmentations and injected faults", "method")
    # engineering: speed and bookkeeping, not results
    out: str = _opt("runs/demo", "run folder: ckpt.pt and log.jsonl", "engineering")
    init: str = _opt(
        "",
        "start from this checkpoint's model and bank (branch a second stage off a warm-up), with "
        "a fresh Adam state, where one uninterrupted two-stage run keeps Adam's (the paper does not say)",
        "engineering",
    )
    workers: int = _opt(4, "DataLoader workers per process", "engineering")
    pin_workers: str = _opt(
        "auto",
        "hold each DataLoader worker to a core of its own: auto (where workers + 2 cores "
        "are free, 2 left to the main process: a GPU workstation) | on | off",
        "engineering",
    )
    preload: bool = _opt(
        False,
        "decode every video once into memory (small datasets only; its audio differs "
        "slightly from a seek's decode, AAC's restart, so a resume keeps it)",
        "engineering",
    )
    amp: str = _opt(
        "auto",
        "bf16 | fp16 | off; auto = bf16 on a GPU, off on a CPU (paper: mixed precision; on some "
        "CPUs bf16 gradients go non-finite: BENCHMARKS.md)",
        "engineering",
    )
    channels_last: bool = _opt(True, "channels_last_3d video encoder on a GPU", "engineering")
    max_bad_fraction: float = _opt(0.05, "stop when more of the files fail to decode", "engineering")
    allow_config_change: bool = _opt(
        False, "resume a run whose checkpoint has other result-changing settings", "engineering"
    )


FAULTY_SOURCES = ("heldout", "train", "noise")

# Fields a resume may change, because they change speed or bookkeeping but not what the run computes:
#   out, allow_config_change, max_bad_fraction  where and whether the run goes on, not its steps
#   init           read only when OUT has no checkpoint yet; a resume starts from the checkpoint
#   workers, pin_workers  each item's draws are seeded by (seed, epoch, index): tests/test_data.py
#   channels_last  the GPU's memory layout only (ignored on a CPU); kernels round as another card's would
#   manifest       which file lists the videos; the resumed bank's size and injected set are checked
# Two engineering options are not in it, and a resume that changes them is refused: preload (a
# preloaded clip's audio is cut from a whole-file decode, a decoded one's after a seek, and AAC's
# restart after a seek changes the samples slightly: tests/test_data.py) and amp (bf16 and fp16 round
# every step; "auto" still resolves by device, so moving a run between a GPU and a CPU changes it).
NOT_RESUMABLE = {"preload", "amp"}
ENGINEERING = {f.name for f in fields(Config) if f.metadata["group"] == "engineering"} - NOT_RESUMABLE | {"manifest"}

PRESETS = {
    "ablation": {},  # the dataclass defaults are the paper's Sec. 5.1 values
    "sota": dict(
        video_depth=18,
        size=112,
        audio_rate=24000,
        n_mels=128,
        n_time=128,
        batch_size=512,
        lr=5e-4,
        lr_min=5e-5,
        warmup_epochs=200,
        epochs=200,
    ),
    # 64x64: at smaller inputs the stem's stride and max pool leave shapes a pixel or two wide.
    # 4 frames, lr 1e-3, 2000 videos, 1-s clips (fps 4) and half the paper's augmentation were chosen by
    # measurement: with them the warm-up's scores find the faults at 50% in 25 epochs (results/HISTORY.md,
    # "How the demo's recipe was found"). workers=0: with the clips preloaded, a loader worker only
    # competes with the step for 2 cores (BENCHMARKS.md, "The training step on a CPU").
    "demo": dict(
        data="data/synth2000",
        size=64,
        frames=4,
        fps=4.0,
        augment=0.5,
        audio_rate=11025,
        n_mels=40,
        n_time=40,
        width=0.25,
        batch_size=32,
        lr=1e-3,
        lr_min=1e-4,
        warmup_epochs=25,
        epochs=6,
        num_negatives=256,
        workers=0,
        preload=True,
    ),
}


def parse_config(argv=None, description=None):
    """--preset NAME, then any Config field as --field-name VALUE. Unknown options are an error."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="ablation",
        help="paper setting to start from: ablation (Sec. 5.1), sota (Sec. 6), demo (CPU)",
    )
    groups = {}
    for f in fields(Config):
        group = f.metadata["group"]
        if group not in groups:
            groups[group] = parser.add_argument_group(group)
        kind = argparse.BooleanOptionalAction if f.type is bool else None
        groups[group].add_argument(
            "--" + f.name.replace("_", "-"),
            type=None if kind else f.type,
            action=kind,
            default=None,
            help=f"{f.metadata['help']} [default: {f.default!r}]",
        )
    args = vars(parser.parse_args(argv))
    cfg = Config(**PRESETS[args.pop("preset")])
    for k, v in args.items():
        if v is not None:
            setattr(cfg, k, v)
    checks = {
        "loss": tuple(VARIANTS),
        "soft_targets": SOFT_TARGET_STRATEGIES,
        "amp": ("auto", "bf16", "fp16", "off"),
        "faulty_source": FAULTY_SOURCES,
        "pin_workers": ("auto", "on", "off"),
    }
    for name, allowed in checks.items():
        if getattr(cfg, name) not in allowed:
            parser.error(f"--{name.replace('_', '-')} {getattr(cfg, name)!r}: expected one of {allowed}")
    if cfg.video_depth not in (9, 18):
        parser.error(f"--video-depth {cfg.video_depth}: expected 9 or 18")
    return cfg


# Options of probes that did not go on (results/HISTORY.md), at the value every run now has.
RETIRED = {"head": "mlp", "lr_ramp": 0, "bank_init": "random"}


def config_from_dict(saved, source="checkpoint"):
    """A Config from a saved dict (a checkpoint's). Fields added since it was written take their
    defaults; a retired option at the only value it now has is dropped; any other field this version
    does not know is an error that names it."""
    known = {f.name for f in fields(Config)}
    saved = {k: v for k, v in saved.items() if not (k in RETIRED and v == RETIRED[k])}
    unknown = sorted(set(saved) - known)
    if unknown:
        raise ValueError(f"{source}: unknown settings {unknown}; it was written by another version of train.py")
    return Config(**saved)


def result_changes(old, new):
    """Fields, other than ENGINEERING ones, whose values differ between two Configs: {name: (old, new)}."""
    a, b = asdict(old), asdict(new)
    return {k: (a[k], b[k]) for k in a if k not in ENGINEERING and a[k] != b[k]}
