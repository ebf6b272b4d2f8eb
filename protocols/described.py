"""What an evaluation task ran, as evaluate.py prints it and stores it beside its numbers (persistence/
records.py): the paper's protocol in words (Sec. 5.1, Sec. 6) with its settings, the deviations named.

    protocol_of  a task's protocol: its text and the settings that made it
    named        a protocol's clip count and modality, stored only when not the paper's

    .venv/bin/python evaluate.py all runs/demo/robust/ckpt.pt     # prints each task's protocol line

Tests: tests/test_evaluate.py, tests/test_eval_records.py
"""

from typing import Any

from protocols.features import CLIPS


def named(clips: int, modality: str = "video") -> dict[str, Any]:
    """A protocol's clip count and modality, stored only when not the paper's (its records stay as they were)."""
    return ({} if clips == CLIPS else {"clips": clips}) | ({} if modality == "video" else {"modality": modality})


def protocol_of(task: str, **settings: Any) -> dict[str, Any]:
    """What a task ran, as printed and stored beside its numbers."""
    text = {
        "retrieval": "{encoder}last conv map ({feature_dim} values{paper_map}) averaged over "
        "{clips_text}, Euclidean distance, test queries the train split",
        "fewshot": "{encoder}max-pooled features averaged over {clips_text}, one-vs-all linear SVM C=1, "
        "{trials} trials{scaled}{capped_text}",
        "finetune": "{epochs} epochs, batch {batch_size} ({accumulate} micro-batches), Adam {lr:g}->{lr_min:g} "
        "cosine, backbone x0.1, wd 1e-3, dropout 0.5, {frames}-frame clips, {select}",
        "analysis": "bank scores and eq. (6) weights vs the known faulty positives; soft-target mass",
    }[task]
    audio = settings.get("modality") == "audio"
    fmt = {
        **settings,
        "encoder": "the audio encoder's 2-s log-mel clips (not the paper's): " if audio else "",
        "paper_map": "" if audio else "; the paper's is 4x4x512 at 112x112",
        "scaled": ", standardised (not the paper's)" if settings.get("standardise") else ", raw",
        "capped_text": "".join(
            f"; {n}-shot capped at {c}, the fewest train videos of a class"
            for n, c in settings.get("capped", {}).items()
        ),
        "clips_text": "10 clips"
        if settings.get("clips", CLIPS) == CLIPS
        else f"{settings['clips']} clips (the paper's: 10)",
        "select": "validation-selected epoch (not the paper's)"
        if settings.get("select_on_val")
        else "final epoch on the test split",
    }
    return {"text": text.format(**fmt), **settings}
