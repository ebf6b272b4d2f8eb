"""The features the evaluation protocols read, and the ones a user takes away (paper Sec. 5.1, retrieval;
Sec. 6, few-shot: both average a video's features over 10 clips).

    extract_features  per video, averaged over its clips: the last conv map, flattened (retrieval), and
                      the global max-pooled feature (few-shot), of the video encoder or, for modality
                      "audio", of the audio encoder on each clip's 2 s log-mel spectrogram
    cached_features   extract_features of a split, saved next to the checkpoint as
                      features_CKPTSTEM_DIGEST_KEY.SPLIT.pt, under a key of what made it; prune_caches
                      removes those of other versions of the checkpoint file (evaluate.py --keep-cache keeps them)
    export            `evaluate.py features`: per video of both splits, the pooled video and audio
                      features, label, path and split, in one .npz (a silent video's audio row is NaN);
                      an --out that exists and is not such an .npz is refused (check_out)

    .venv/bin/python evaluate.py features runs/k400/ckpt.pt --data /data/UCF101 --layout ucf101 --out ucf1.npz

Each reads the records it is handed (protocols/splits.resolve's: one evaluation, one version of the
lists); evaluate.py runs the protocols on them. Tests: tests/test_eval_records.py, tests/test_evaluate.py,
tests/test_features.py
"""

import hashlib
import io
import json
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn as nn
from torch import Tensor

import augment
import checkpoint
import data
from config import Config
from media import manifest
from media.loader_workers import loader, progress
from memory_bank import MemoryBank
from model import AVModel
from persistence.records import write_atomically
from protocols.splits import EvalSplits, fold_of


class Pretrained(NamedTuple):
    """What evaluation reads from a checkpoint. `epoch`: the last epoch it trained (log.jsonl's
    numbering); `stamp`: the file's (mtime_ns, size) when read; `digest`: the first 12 hex digits of the
    SHA-1 of the bytes read, naming that version of its content (evaluation records are keyed by it)."""

    cfg: Config
    model: AVModel
    bank: MemoryBank
    instances: dict[str, Any] | None
    epoch: int
    stamp: tuple[int, int]
    digest: str


def read_pretrained(path: str | Path) -> Pretrained:
    """The checkpoint for evaluation, read once into memory: its digest names the bytes loaded. A run
    still training may replace it while it is read (by a rename: the read file stays whole); the stamp is
    then taken again, so that it names the version read."""
    for _ in range(3):
        before = _stamp(path)
        raw = Path(path).read_bytes()
        if _stamp(path) == before:
            break
    state = checkpoint.load_checkpoint(path, raw)
    cfg = checkpoint.config_from_dict(state["config"], source=str(path))
    args = {k: v for k, v in state["model_args"].items() if not (k == "head" and v == "mlp")}  # a retired option
    model = AVModel(**args)
    model.load_state_dict(state["model"])
    bank = MemoryBank(state["bank"]["video"].shape[0], dim=state["bank"]["video"].shape[1], momentum=cfg.momentum)
    bank.load_state_dict(state["bank"])
    digest = hashlib.sha1(raw).hexdigest()[:12]
    return Pretrained(cfg, model, bank, state["instances"], state.get("epoch", -1), before, digest)


def _stamp(path: str | Path) -> tuple[int, int]:
    if not Path(path).is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size


def load_pretrained(path: str | Path) -> tuple[Config, AVModel, MemoryBank, dict[str, Any] | None]:
    """(config, model with the checkpoint's weights, memory bank, instances or None) for evaluation."""
    return read_pretrained(path)[:4]


CLIPS = 10  # clips per video averaged for retrieval and few-shot (Sec. 5.1, Sec. 6)
MODALITIES = ("video", "audio")


@torch.no_grad()
def extract_features(
    encoder: nn.Module,
    dataset: data.AVDataset,
    device: torch.device,
    batch_size: int = 8,
    workers: int = 2,
    modality: str = "video",
) -> dict[str, Tensor]:
    """Per video, averaged over its clips: `fmap` the last conv feature map, flattened (retrieval),
    `pooled` the global max-pooled feature (few-shot); and the labels. modality "audio": `encoder` is
    the audio encoder and the dataset's items carry audio.

    The paper's map is 4x4x512, what R(2+1)D gives at its 112x112 input. At other sizes we keep the
    network's own map (3x3 at 80x80, 2x2 at 64x64) rather than resample it to 4x4: pooling a 3x3 map
    up to 4x4 would repeat the centre positions and weight them more in the distance."""
    encoder.eval().to(device)
    logmel = augment.LogMel(dataset.spec).to(device) if modality == "audio" else None
    fmaps, pooled, labels = [], [], []
    for batch in progress(loader(dataset, batch_size, workers), f"{modality} features ({len(dataset)} videos)"):
        if logmel is None:
            x = augment.normalise(batch["video"].to(device))  # (B, clips, 3, T, H, W)
            B, C = x.shape[:2]
            fm = encoder.feature_map(x.flatten(0, 1)).float().mean(2)  # (B*clips, 512, h, w): the 1-frame time axis
        else:
            x = logmel(batch["audio"].to(device))  # (B, clips, 1, n_mels, n_time)
            B, C = x.shape[:2]
            fm = encoder.feature_map(x.flatten(0, 1)).float()  # (B*clips, 512, h, w)
        fmaps.append(fm.flatten(1).view(B, C, -1).mean(1).cpu())  # (B, 512*h*w)
        pooled.append(torch.amax(fm, dim=(2, 3)).view(B, C, -1).mean(1).cpu())  # (B, 512)
        labels.append(batch["label"])
    return {"fmap": torch.cat(fmaps), "pooled": torch.cat(pooled), "labels": torch.cat(labels)}


def version_file(kind: str, ckpt: str | Path, digest: str, key: str, tail: str = "") -> Path:
    """KIND_CKPTSTEM_DIGEST_KEY + TAIL beside CKPT: what evaluation keeps of one version of the checkpoint
    file (feature caches, a fine-tune's state and result), named so that prune_caches can tell. Callers
    append to it rather than call with_suffix, which would take a dotted stem's (ckpt.pt.prev) key away."""
    key = hashlib.sha1(key.encode()).hexdigest()[:10]
    return Path(ckpt).parent / f"{kind}_{Path(ckpt).stem}_{digest[:8]}_{key}{tail}"


def prune_caches(ckpt: str | Path, digest: str) -> list[Path]:
    """Remove what evaluation kept beside CKPT for other versions of its file (a run that went on training
    replaced it): feature caches, and the state of fine-tunes that cannot resume any more (their results,
    finetune_*.json, stay); also caches named before they carried a version (features_SPLIT_KEY.pt).
    Another checkpoint file's are kept. Returns what it removed."""
    # the whole name to its tail: a looser one read features_ckpt_20261128_x_... (ckpt_20261128_x.pt's) as ckpt's
    stem, tail = re.escape(Path(ckpt).stem), r"_([0-9a-f]{8})_[0-9a-f]{10}(\.train|\.test)?\.pt(\.prev)?"
    mine = re.compile(rf"(features|finetune)_{stem}{tail}")
    gone = []
    for path in sorted(Path(ckpt).parent.glob("*.pt*")):
        found = mine.fullmatch(path.name)
        if (found and found.group(2) != digest[:8]) or re.fullmatch(
            r"features_(train|test)_[0-9a-f]{10}\.pt", path.name
        ):
            path.unlink(missing_ok=True)
            gone.append(path)
    return gone


def cached_features(
    ckpt: str | Path,
    pre: Pretrained,
    cfg: Config,
    encoder: nn.Module,
    split: str,
    records: list[manifest.Record],
    device: torch.device,
    workers: int = 2,
    clips: int = CLIPS,
    modality: str = "video",
) -> dict[str, Tensor]:
    """extract_features of a split's `records`, saved next to the checkpoint under a key of the
    checkpoint (its path and digest: the version read), the data settings and the files. The dataset
    is built, and decoded, only when the features are not cached."""
    audio = modality == "audio"
    key = json.dumps(
        [
            str(Path(ckpt).resolve()),
            pre.digest,
            cfg.data,
            cfg.layout,
            cfg.fold,
            split,
            cfg.frames,
            cfg.fps,
            cfg.size,
            "native-map",
            *([clips] if clips != CLIPS else []),  # the paper's 10 keeps the key (and the caches) it had
            *(["audio", cfg.audio_rate, cfg.n_mels, cfg.n_time] if audio else []),
            [r.path for r in records],
        ]
    )
    path = version_file("features", ckpt, pre.digest, key, f".{split}.pt")
    if path.exists():
        return torch.load(path, weights_only=True)
    dataset = data.eval_set(cfg, records, num_clips=clips, audio=audio)
    feats = extract_features(encoder, dataset, device, workers=workers, modality=modality)
    write_atomically(path, lambda f: torch.save(feats, f))
    return feats


def check_out(out: str | Path) -> None:
    """`features --out`: a new file, or an .npz this command wrote before (it holds `about`); anything
    else there (a folder, a checkpoint, a file of the user's) is refused in one line, not overwritten."""
    out = Path(out)
    if out.is_dir():
        raise ValueError(f"--out {out}: a folder; expected the .npz file to write (e.g. {out / 'features.npz'})")
    if out.exists():
        try:
            with np.load(out) as old:
                ours = "about" in old.files and "video" in old.files
        except (OSError, ValueError, EOFError):
            ours = False
        if not ours:
            raise ValueError(
                f"--out {out}: exists and is not a features .npz of evaluate.py; refusing to overwrite it "
                "(expected a new file, or one `features` wrote)"
            )


def export(
    ckpt: str | Path,
    pre: Pretrained,
    cfg: Config,
    splits: EvalSplits,
    out: str | Path,
    device: torch.device,
    workers: int = 2,
    clips: int = CLIPS,
) -> int:
    """Write OUT (.npz): per video of the train and test splits, `video` and `audio` (the pooled
    features of both encoders, averaged over `clips` clips; NaN rows for videos without a clip of audio,
    `has_audio` False), `label`, `path` and `split`; `classes` and `about` (what made them, as JSON).
    Returns the number of videos."""
    check_out(out)
    columns: dict[str, list] = {k: [] for k in ("video", "audio", "has_audio", "label", "path", "split")}
    for split, got in splits.items():
        video = cached_features(ckpt, pre, cfg, pre.model.video, split, got.records, device, workers, clips)
        heard = splits.heard(split)
        audio = torch.full_like(video["pooled"], float("nan"))
        if heard:
            feats = cached_features(ckpt, pre, cfg, pre.model.audio, split, heard, device, workers, clips, "audio")
            row = {r.path: i for i, r in enumerate(got.records)}
            audio[[row[r.path] for r in heard]] = feats["pooled"]
        columns["video"].append(video["pooled"].numpy())
        columns["audio"].append(audio.numpy())
        columns["has_audio"].append(~torch.isnan(audio[:, 0]).numpy())
        columns["label"].append(video["labels"].numpy())
        columns["path"].append(np.array([r.path for r in got.records]))
        columns["split"].append(np.array([split] * len(got.records)))
    arrays = {k: np.concatenate(v) for k, v in columns.items()}
    about = {"checkpoint": str(Path(ckpt).resolve()), "checkpoint_epoch": pre.epoch, "checkpoint_digest": pre.digest}
    about["clips"] = clips
    about |= {"dataset": str(Path(cfg.data).resolve()), "layout": cfg.layout, "fold": fold_of(cfg)}
    arrays["classes"] = np.array(splits.test.classes)
    arrays["about"] = np.array(json.dumps(about))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    write_atomically(out, lambda f: f.write(buffer.getvalue()))
    return len(arrays["label"])
