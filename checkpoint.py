"""What a train.py checkpoint holds, and how it is written and read: it describes itself, as nanoGPT's.

    format      CHECKPOINT_FORMAT
    model_args  AVModel(**model_args) rebuilds the encoders and heads (model.py)
    clip        the data.ClipSpec of the pre-training clips
    config      every config.Config field of the run
    model       the unwrapped model's state dict
    bank        the memory bank's buffers (memory_bank.py)
    instances   one entry per bank slot: path, label, faulty (ground truth or injected), injected,
                the file its audio was replaced by ('' if none), and the class names: what the
                analysis of the weights (Fig. 5) and of the injection (results/donor_scores.py) need
    optimizer, scaler, epoch, step, rng   what a resumed run needs

Writes are atomic (a kill during the write leaves the previous file whole). A checkpoint written
before `format` existed still loads for evaluation: its model arguments come from its config, and
only the analysis, which needs the instances, asks for a newer one.

    used by train.py (save, resume, --init) and evaluate.py (load_pretrained)
"""
import os
import random
from dataclasses import asdict
from pathlib import Path

import torch

from config import config_from_dict
from data import ClipSpec
from memory_bank import MemoryBank
from model import AVModel

CHECKPOINT_FORMAT = 2


def model_args(cfg):
    """The AVModel arguments a Config asks for."""
    return {"video_depth": cfg.video_depth, "width": cfg.width}


def save_checkpoint(path, **state):
    """torch.save to PATH.tmp, then an atomic rename onto PATH."""
    tmp = f"{path}.tmp"
    torch.save({"format": CHECKPOINT_FORMAT, **state}, tmp)
    os.replace(tmp, path)


def load_checkpoint(path):
    """The checkpoint's dict, with `model_args` and `clip` filled in for the first format."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    state = torch.load(path, map_location="cpu", weights_only=True)
    if "config" not in state or "model" not in state:
        raise ValueError(f"{path} is not a train.py checkpoint (it has no config or model)")
    cfg = config_from_dict(state["config"], source=str(path))
    state.setdefault("model_args", model_args(cfg))
    state.setdefault("clip", asdict(ClipSpec(frames=cfg.frames, fps=cfg.fps, size=cfg.size, audio_rate=cfg.audio_rate,
                                             n_mels=cfg.n_mels, n_time=cfg.n_time)))
    state.setdefault("instances", None)
    return state


def load_pretrained(path):
    """(config, model with the checkpoint's weights, memory bank, instances or None) for evaluation."""
    state = load_checkpoint(path)
    cfg = config_from_dict(state["config"], source=str(path))
    model = AVModel(**state["model_args"])
    model.load_state_dict(state["model"])
    bank = MemoryBank(state["bank"]["video"].shape[0], dim=state["bank"]["video"].shape[1], momentum=cfg.momentum)
    bank.load_state_dict(state["bank"])
    return cfg, model, bank, state["instances"]


def instances_of(dataset):
    """The per-slot facts of a training set that a checkpoint keeps (see the module docstring)."""
    return {"paths": [r.path for r in dataset.records], "labels": dataset.labels, "faulty": dataset.faulty,
            "injected": dataset.injected, "classes": list(getattr(dataset, "classes", [])),
            "replacement_audio": [dataset.donor.get(i, ("",))[0] for i in range(len(dataset))]}


def rng_state():
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state):
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
