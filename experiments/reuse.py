"""Which run folders of the demo's --runs a command may reuse: each only where the settings that shape it are
the ones asked for.

A setting's folder (RUNS/seedS_faultyF) holds its xID warm-up and a branch per method. The warm-up is shaped
by what xID reads, not by a branch's own settings (lam, tau_s, kappa, ...: config.result_changes given the
epochs it trained); a branch by its variant's. A branch whose own settings differ from the preset's trains in
a folder named by them, beside the default one (soft_lam0.3 beside soft), so that another lam trains Soft- and
Robust-xID anew from the same warm-up and leaves the earlier branches and their numbers as they were. Where no
folder can be reused (another tau shapes the warm-up every branch starts from; a warm-up grown under branches
made from the shorter one), the command is refused in one line that asks for a new --runs, before anything
trains. Tests: tests/test_demo_reuse.py
"""

from pathlib import Path

import torch

from checkpoint import config_from_dict, result_changes, unread
from config import Config

# A branch's own settings, named in its folder: those of the second stage that its variant reads, but the loss
# (the method names it), the epochs (the demo's --epochs, the same for every branch) and delta (the demo's rule
# sets it from the noise level; the table gives it). SECOND_STAGE, in the order the table names them.
OWN = ("soft_targets", "lam", "tau_s", "tau_t", "kappa", "w_min", "lr_min")


def own_settings(cfg: Config) -> dict:
    """A branch's own settings under cfg, those its variant reads: {name: value}, in OWN's order."""
    skipped = unread(cfg, cfg.warmup_epochs + 1)  # what an epoch of its second stage does not read
    return {k: getattr(cfg, k) for k in OWN if k not in skipped}


def branch_name(folder: str, cfg: Config, preset: Config) -> str:
    """The method's folder, followed by each own setting whose value differs from the preset's: soft_lam0.3."""
    mine, theirs = own_settings(cfg), own_settings(preset)
    parts = [folder]
    for k, v in mine.items():
        if v != theirs.get(k, not v):
            parts.append(k if v is True else f"{k}{v:g}" if isinstance(v, float) else f"{k}-{v}")
    return "_".join(parts)


def described(settings: dict, delta: float | None = None) -> str:
    """A row's own settings in words, 'ccp targets, lam 0.5, tau_s 0.02, tau_t 0.07', with the delta of eq. (6)
    where its weights read it. lr_min, which every branch reads alike, is the command's to say."""
    words = []
    for k, v in settings.items():
        if k == "kappa" and delta is not None:
            words.append(f"delta {delta:.2f}")
        if k != "lr_min":
            words.append(f"{v} targets" if k == "soft_targets" else f"{k} {v:g}")
    return ", ".join(words) or "none"


def _trained(ckpt: Path) -> tuple[Config, int] | None:
    """The config a checkpoint was trained with and how many epochs it has begun, or None if there is none."""
    if not ckpt.is_file():
        return None
    state = torch.load(ckpt, map_location="cpu", weights_only=True, mmap=True)  # the tensors stay on disk
    return config_from_dict(state["config"], str(ckpt)), state["epoch"] + 1


def _refuse(folder: Path, why: str) -> None:
    raise SystemExit(f"experiments.demo: {folder} {why}: give these settings a new --runs")


def check_warm_up(root: Path, cfg: Config) -> None:
    """Refuse a setting folder whose warm-up another command's settings would not reuse."""
    found = _trained(root / "warmup" / "ckpt.pt")
    if found is None:
        return
    saved, trained = found
    if changed := result_changes(saved, cfg, trained):
        said = ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in changed.items())
        _refuse(root / "warmup", f"was trained with other settings ({said}), which shape every branch's start")
    branches = [p.parent.name for p in sorted(root.glob("*/ckpt.pt")) if p.parent.name != "warmup"]
    if trained < cfg.warmup_epochs and branches:
        _refuse(root, f"holds branches ({', '.join(branches)}) made from its {trained}-epoch warm-up, not a longer one")


def check_branch(folder: Path, cfg: Config) -> None:
    """Refuse a branch folder trained with settings its epochs read otherwise (another --epochs, a preset's)."""
    found = _trained(folder / "ckpt.pt")
    if found is None:
        return
    saved, trained = found
    if changed := result_changes(saved, cfg, trained):
        said = ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in changed.items())
        _refuse(folder, f"was trained with other settings ({said})")
