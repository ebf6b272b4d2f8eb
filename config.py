"""Every training setting in one typed place, each with the paper's value in its help (Sec. 5.1, Sec. 6).

`Config`'s defaults are the paper's ablation setting (Sec. 5.1: R(2+1)D-9, 80x80, 11025 Hz); `PRESETS` change
them for the Sec. 6 comparison (`sota`) and the CPU demo (`demo`). `parse_config` makes the argparse options
from the fields (`python train.py --help`, grouped: data, clip, model, optimisation, method, engineering).
The engineering group changes speed, not results; which fields stop a resume is checkpoint.result_changes.
"""

import argparse
import difflib
import math
import re
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import torch

from losses import SOFT_TARGET_STRATEGIES, VARIANTS


class Check(NamedTuple):
    """The values an option allows: a test, and its words for the error message and --help."""

    ok: Callable[[Any], bool]
    allowed: str


def one_of(*values: str) -> Check:
    return Check(lambda v: v in values, "one of " + ", ".join(values))


def at_least(lo: float) -> Check:
    return Check(lambda v: v >= lo, f"a value of at least {lo:g}")


def between(lo: float, hi: float, hi_open: bool = False) -> Check:
    words = f"a value in [{lo:g}, {hi:g}{')' if hi_open else ']'}"
    return Check(lambda v: lo <= v < hi if hi_open else lo <= v <= hi, words)


POSITIVE = Check(lambda v: v > 0, "a value above 0")
SHARE = between(0, 1, hi_open=True)
ANY = Check(lambda v: True, "any value")
DEVICE = Check(
    lambda v: v in ("auto", "cuda", "cpu") or (v[:5] == "cuda:" and v[5:].isdigit()), "auto, cuda, cuda:N or cpu"
)
SIDE = Check(lambda v: v >= 32, "at least 32: the video network's last map has a cell per 32 pixels")
PAIR = Check(lambda v: v >= 2, "at least 2: batch norm needs two clips")
SEED = Check(lambda v: v >= -1, "-1 (--seed's) or a seed of at least 0")
WORKERS = Check(lambda v: v >= -1, "-1 (the cores per process) or a count of at least 0")
FAULTY_SOURCES, LAYOUTS = ("heldout", "train", "noise"), ("ucf101", "hmdb51", "kinetics", "folder")
AMP = ("auto", "bf16", "fp16", "off")
LOSSES = " | ".join(f"{k} ({v.name})" for k, v in VARIANTS.items())


def _opt(default: Any, text: str, group: str, check: Check = ANY) -> Any:
    """A Config field: its default, its --help text and group, and the values it allows."""
    return field(default=default, metadata={"help": text, "group": group, "check": check})


DATA, CLIP, MODEL, OPT, METHOD, ENG = "data", "clip", "model", "optimisation", "method", "engineering"


@dataclass
class Config:
    data: str = _opt("data/synth", "dataset root", DATA)
    layout: str = _opt("folder", " | ".join(LAYOUTS) + " (media/manifest.py)", DATA, one_of(*LAYOUTS))
    split: str = _opt("train", "split to pre-train on", DATA)
    fold: int = _opt(1, "split 1-3 of UCF101 / HMDB51", DATA, between(1, 3))
    annotations: str = _opt("", "split files or the Kinetics CSV, when not in the layout's default place", DATA)
    manifest: str = _opt("", "usable-file list; default ROOT/manifest.csv (python -m tools.scan ROOT)", DATA)
    faulty_fraction: float = _opt(0.0, "share of instances whose audio is replaced (paper Fig. 7: 0-0.8)", DATA, SHARE)
    faulty_source: str = _opt(
        "heldout",
        "injected audio from: heldout (the paper's, Sec. 5.2: files outside both splits, --faulty-pool) | train "
        "(another training video's: a deviation) | noise (the synthetic set's out-of-distribution ROOT/_pool)",
        DATA,
        one_of(*FAULTY_SOURCES),
    )
    fault_seed: int = _opt(
        -1, "seed of the injected faults' draw; -1: --seed's (a branch keeps its warm-up's)", DATA, SEED
    )
    faulty_pool: str = _opt("", "media outside both splits for heldout; default ROOT/_heldout (synthetic.py's)", DATA)
    frames: int = _opt(8, "frames per clip T (paper: 8; Sec. 6 also fine-tunes on 32)", CLIP, at_least(1))
    fps: float = _opt(16.0, "frame rate (paper: 16)", CLIP, POSITIVE)
    size: int = _opt(80, "crop side (paper: 80; Sec. 6: 112)", CLIP, SIDE)
    audio_rate: int = _opt(11025, "audio sample rate in Hz (paper: 11025; Sec. 6: 24000)", CLIP, at_least(1000))
    n_mels: int = _opt(80, "mel bands (paper: 80; Sec. 6: 128)", CLIP, at_least(8))
    n_time: int = _opt(80, "spectrogram time steps over 2 s (paper: 80; Sec. 6: 128)", CLIP, at_least(8))
    augment: float = _opt(1.0, "video augmentation strength (paper: 1, SimCLR's; 0: flips only)", CLIP, between(0, 1))
    video_depth: int = _opt(9, "R(2+1)D depth (paper: 9; Sec. 6: 18)", MODEL, Check(lambda v: v in (9, 18), "9 or 18"))
    width: float = _opt(1.0, "channel multiplier (paper: 1.0; make demo: 0.125)", MODEL, POSITIVE)
    batch_size: int = _opt(224, "global batch, split over processes (paper: 224; Sec. 6: 512)", OPT, PAIR)
    lr: float = _opt(1e-4, "Adam lr of the warm-up and the cosine's start (paper: 1e-4; Sec. 6: 5e-4)", OPT, POSITIVE)
    lr_min: float = _opt(1e-5, "end of the cosine (paper: 1e-5; Sec. 6: 5e-5)", OPT, at_least(0))
    warmup_epochs: int = _opt(400, "epochs of xID warm-up, eq. (1) (paper: 400; Sec. 6: 200)", OPT, at_least(0))
    epochs: int = _opt(200, "epochs of the second stage with --loss (paper: 200)", OPT, at_least(0))
    loss: str = _opt("robust", f"second stage: {LOSSES} (paper: robust)", METHOD, one_of(*VARIANTS))
    soft_targets: str = _opt(
        "ccp", "eqs. (8)-(14); oracle uses the labels (paper: ccp)", METHOD, one_of(*SOFT_TARGET_STRATEGIES)
    )
    num_negatives: int = _opt(1024, "negatives K per sample (paper: 1024)", METHOD, at_least(1))
    tau: float = _opt(0.07, "temperature of eq. (2) (paper: 0.07)", METHOD, POSITIVE)
    tau_s: float = _opt(0.02, "temperature of the softening scores, eqs. (10)-(14) (paper: 0.02)", METHOD, POSITIVE)
    tau_t: float = _opt(0.07, "temperature of CCP's cycle terms, eqs. (13)-(14) (paper: 0.07)", METHOD, POSITIVE)
    lam: float = _opt(0.5, "mixing coefficient lambda of eqs. (8)-(9) (paper: 0.5)", METHOD, between(0, 1))
    kappa: float = _opt(0.5, "kappa of eq. (6) (paper: 0.5)", METHOD, POSITIVE)
    w_min: float = _opt(0.25, "w_min of eq. (6) (paper: 0.25)", METHOD, between(0, 1))
    delta: float = _opt(
        -1.0, "delta of eq. (6), midpoint mu + delta sigma; -1 is this project's, not the paper's", METHOD
    )
    momentum: float = _opt(0.5, "memory-bank EMA constant (paper: 0.5)", METHOD, between(0, 1))
    seed: int = _opt(0, "seed of the model, bank, sampler, augmentations and injected faults", METHOD, at_least(0))
    out: str = _opt("runs/demo", "run folder: ckpt.pt and log.jsonl", ENG, Check(lambda v: v != "", "a folder"))
    init: str = _opt("", "start from this checkpoint's model and bank, with a fresh Adam state", ENG)
    workers: int = _opt(-1, "DataLoader workers per process; -1: the cores per process, at most 16", ENG, WORKERS)
    device: str = _opt("auto", "auto: a usable GPU, else the CPU | cuda, cuda:N: stop if unusable | cpu", ENG, DEVICE)
    preload: str = _opt(
        "auto",
        "on: decode every video once into memory (media/in_memory.py) | off: a DataLoader decodes each clip | "
        "auto: on when it fits in half the free memory; its audio differs slightly, so a resume keeps the path",
        ENG,
        one_of("auto", "on", "off"),
    )
    preload_cache: str = _opt("", "with --preload: a folder of decoded files the run's other processes read", ENG)
    amp: str = _opt("auto", "auto: bf16 on a GPU, off on a CPU (paper: mixed precision)", ENG, one_of(*AMP))
    channels_last: bool = _opt(True, "channels_last_3d video encoder on a GPU", ENG)
    save_every: int = _opt(0, "also keep OUT/ckpt_epochNNNN.pt every Nth epoch; 0: only the latest", ENG, at_least(0))
    allow_config_change: bool = _opt(False, "resume a run whose checkpoint has other result-changing settings", ENG)

    @property
    def injection_seed(self) -> int:
        """The seed of Sec. 5.2's draw: --fault-seed, else --seed (a branch seed that keeps the set's faults)."""
        return self.seed if self.fault_seed < 0 else self.fault_seed


# fmt: off
PRESETS = {
    "ablation": {},  # the dataclass defaults are the paper's Sec. 5.1 values
    "sota": dict(video_depth=18, size=112, audio_rate=24000, n_mels=128, n_time=128,  # Sec. 6
                 batch_size=512, lr=5e-4, lr_min=5e-5, warmup_epochs=200, epochs=200),
    # The larger synthetic regime (README's longer demo): 64x64, as smaller inputs leave the stem's maps a pixel
    # or two wide; workers=0, as with the clips preloaded a worker only competes with the step for 2 cores.
    "demo2000": dict(data="data/synth2000", size=64, frames=4, fps=4.0, augment=0.5, audio_rate=11025, n_mels=40,
                     n_time=40, width=0.25, batch_size=32, lr=1e-3, lr_min=1e-4, warmup_epochs=25, epochs=6,
                     num_negatives=256, workers=0, preload="on"),
}
# make demo's: half as wide, 2 frames a clip (1 s at 2 fps), 30 + 24 epochs (chosen in lab/results/demo_screen/).
PRESETS["demo"] = PRESETS["demo2000"] | dict(data="data/synth_src2p", width=0.125, frames=2, fps=2.0,
                                             warmup_epochs=30, epochs=24)
# fmt: on


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line naming the program and the option (not a screenful of usage for a typo);
    `add_checked` adds an option with the Check its values must pass."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.checks: dict[str, tuple[str, Check]] = {}

    def add_checked(self, flag: str, check: Check, **kwargs: Any) -> None:
        allowed = f" (allowed: {check.allowed})"
        action = self.add_argument(flag, **{**kwargs, "help": kwargs.get("help", "") + allowed})
        self.checks[action.dest] = (flag, check)

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        parsed = super().parse_args(args, namespace)
        for dest, (flag, check) in self.checks.items():
            value = getattr(parsed, dest)
            for one in value if isinstance(value, list) else [value]:  # nargs: each value
                problem = None if one is None else check_value(flag, one, check)
                if problem:
                    self.error(problem)
        return parsed

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):  # a typo: name the option it was probably meant as
            known = [flag for flag in self._option_string_actions if flag.startswith("--")]
            for typed in (a.split("=")[0] for a in message.split(": ", 1)[1].split() if a.startswith("--")):
                if near := difflib.get_close_matches(typed, known, n=1):
                    message += f"; {typed}: did you mean {near[0]}?"
        self.exit(2, f"{self.prog}: {message} (--help lists the options)\n")


def check_value(flag: str, value: Any, check: Check) -> str | None:
    """The complaint about one option's value, or None if it is allowed."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{flag} {value!r}: expected a finite number"
    if not check.ok(value):
        return f"{flag} {value!r}: expected {check.allowed}"
    return None


def relations(cfg: Config) -> list[str]:
    """Complaints about options that are each allowed but not together."""
    out = []
    if cfg.lr_min > cfg.lr:
        out.append(f"--lr-min {cfg.lr_min!r}: expected at most --lr ({cfg.lr!r}), where the cosine starts")
    if cfg.warmup_epochs + cfg.epochs < 1:
        out.append("--warmup-epochs 0 --epochs 0: nothing to train; expected at least one epoch in all")
    bins = round(2.0 * cfg.audio_rate / cfg.n_time) + 1  # FFT bins of the spectrogram's window (augment.py)
    if cfg.n_mels > bins:
        out.append(
            f"--n-mels {cfg.n_mels}: expected at most {bins} at --audio-rate {cfg.audio_rate} and --n-time "
            f"{cfg.n_time} (each mel band needs an FFT bin)"
        )
    return out


def preset_named(argv: list[str]) -> str:
    """The --preset an argument list names (the last, as argparse), for --help's defaults; else ablation."""
    named = "ablation"
    for i, arg in enumerate(argv):
        value = arg.split("=", 1)[1] if arg.startswith("--preset=") else argv[i + 1] if arg == "--preset" else None
        if value in PRESETS:
            named = value
    return named


def parse_config(argv: list[str] | None = None, description: str | None = None) -> Config:
    """--preset NAME, then any field as --field-name VALUE; a bad option or value exits with one line (status 2)."""
    parser = OneLineParser(prog=Path(sys.argv[0]).name or "train.py", description=description)
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="ablation",
        help="paper setting to start from: ablation (Sec. 5.1), sota (Sec. 6), demo (CPU)",
    )
    groups, preset = {}, preset_named(sys.argv[1:] if argv is None else argv)
    for f in fields(Config):
        group = f.metadata["group"]
        if group not in groups:
            groups[group] = parser.add_argument_group(group)
        kind = argparse.BooleanOptionalAction if f.type is bool else None
        allowed = "" if f.metadata["check"] is ANY else f"; allowed: {f.metadata['check'].allowed}"
        shown = PRESETS[preset].get(f.name, f.default)  # --help under a preset shows the values it runs with
        under = "" if shown == f.default else f" under --preset {preset}; ablation: {f.default!r}"
        groups[group].add_argument(
            "--" + f.name.replace("_", "-"),
            type=None if kind else f.type,
            action=kind,
            default=None,
            help=f"{f.metadata['help']} [default: {shown!r}{under}{allowed}]",
        )
    args = vars(parser.parse_args(argv))
    cfg = Config(**PRESETS[args.pop("preset")])
    for k, v in args.items():
        if v is not None:
            setattr(cfg, k, v)
    for f in fields(Config):
        problem = check_value("--" + f.name.replace("_", "-"), getattr(cfg, f.name), f.metadata["check"])
        if problem:
            parser.error(problem)
    for problem in relations(cfg):
        parser.error(problem)
    return cfg


def shown(path: str | Path) -> str:
    """A path as a message names it: a relative one with the working directory it is taken from."""
    return str(path) if Path(path).is_absolute() else f"{path} (in the working directory {Path.cwd()})"


# what --device means
NVIDIA = "/proc/driver/nvidia/version"  # the NVIDIA kernel driver's: there on a GPU machine, usable or not


def nvidia_present() -> bool:  # the driver's file, or a container's device nodes
    return any(Path(f).exists() for f in (NVIDIA, "/dev/nvidiactl", "/dev/nvidia0"))


class DeviceError(RuntimeError):
    """The device a run asked for cannot be used; the message says why, in one line."""


def cuda_problem() -> str | None:
    """None when CUDA is usable, else why not: no NVIDIA driver, a CPU-only torch, or a driver it cannot use."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # torch warns once per process; here we want its words
        if torch.cuda.is_available():
            return None
    build = f"torch {torch.__version__}" + (f" (CUDA {torch.version.cuda})" if torch.version.cuda else "")
    if not nvidia_present():
        return f"no NVIDIA GPU driver is loaded on this machine (no {NVIDIA}); {build}"
    text = Path(NVIDIA).read_text(errors="replace") if Path(NVIDIA).exists() else ""
    found = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", text)
    driver = found.group(1) if found else "(version unknown)"
    if torch.version.cuda is None:
        return f"{build} is a CPU-only build; install the CUDA wheel that matches driver {driver}"
    said = next((str(w.message).strip().splitlines()[0] for w in caught), "torch.cuda.is_available() is False")
    return f"{build} cannot use the NVIDIA driver {driver}: {said}"


def resolve_device(request: str = "auto", say: bool = True) -> torch.device:
    """cuda without a usable GPU is an error; auto then takes the CPU, warning (`say`) where an NVIDIA device is
    present: a GPU run never falls back silently."""
    if request == "cpu":
        return torch.device("cpu")
    problem = cuda_problem()
    if problem is None:
        n = torch.cuda.device_count()
        if request.startswith("cuda:") and int(request[5:]) >= n:
            raise DeviceError(f"--device {request}: CUDA sees {n} GPU(s) here, cuda:0 to cuda:{n - 1}")
        return torch.device("cuda" if request == "auto" else request)
    if request != "auto":
        raise DeviceError(f"--device {request}: no usable GPU: {problem}")
    if say and nvidia_present():
        print(f"warning: --device auto: an NVIDIA device is present but {problem}; running on the CPU", file=sys.stderr)
    return torch.device("cpu")


def start_line(program: str, device: torch.device, world: int, precision: str, workers: int) -> str:
    """A run's first line: device, processes, precision, loader workers."""
    where = f"{device} ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else str(device)
    return f"{program}: device {where}, world size {world}, precision {precision}, {workers} loader workers per process"


def precision(amp: str, device: torch.device) -> str:
    """--amp on `device`: auto is bf16 on a GPU, off (fp32) on a CPU."""
    return amp if amp != "auto" else ("bf16" if device.type == "cuda" else "off")
