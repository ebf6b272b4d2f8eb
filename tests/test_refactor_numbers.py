"""The numbers of a seeded run stay what they were when train.py and evaluate.py were reorganised.

On the tiny generated dataset of tests/conftest.py, one process, one thread, no loader workers:
a training run of 2 xID warm-up epochs and 2 Robust-xID epochs (eq. (17), a quarter of the
positives injected, Sec. 5.2), then evaluate.evaluate's retrieval, few-shot (2 trials) and a 2-epoch
fine-tune, and tools/analyse.py's analysis (the weights of eq. (6) against the injected faults). Every logged
statistic and every result is compared, to the last digit train.py prints (4 decimals), against
tests/refactor_numbers.json.

Kernels round differently on other CPU families, so the file holds one recording per CPU kind
(vendor, torch's vector capability, AMX: `cpu_kind`), each made from the code before a reorganisation:
AMD-AVX2 from the code before the machinery moved out of train.py and evaluate.py; Intel-AVX512-AMX
from 91221d8, before the in-memory training set and the evaluation records keyed by checkpoint version.
AMD-AVX512 from the code of the faster epoch (audio windows on the spectrogram's hop grid, each sound's mel
computed once, colour ops on the drawn clips alone, the power as re^2 + im^2), which moved the numbers,
and anew after the blur became one k x k conv (rounding, augment.py); the two older kinds could
not be recorded anew there and are marked stale (the reason is in the file).
On a kind with no recording, or a stale one, the test is skipped and says so. A change that is meant to
change the numbers (the method, the synthetic generator, the pinned torch, a stated recipe change)
records this kind anew:

    RECORD_NUMBERS=1 .venv/bin/python -m pytest -q tests/test_refactor_numbers.py

and says why in its commit, and marks the kinds it could not record stale, with the reason. Settings
are spelled out rather than taken from the demo preset, so that tuning the demo leaves this test alone.
"""

import hashlib
import json
import math
import os
from pathlib import Path

import pytest
import torch

import checkpoint
import evaluate
import train
from config import parse_config
from lab.refactor_guard import TRAIN
from tools import analyse
from tools.bank_report import BankReport

RECORDED = Path(__file__).with_name("refactor_numbers.json")
DIGITS = 4  # train.py prints the loss with 4 decimals, the rest with fewer

SETTINGS = TRAIN  # the run lab/refactor_guard.py trains on both sides: one list, spelled out there
LOGGED = ("loss", "weight", "mu", "sigma", "soft_mass", "lr", "faulty_auroc", "knn_class", "xmodal_class")


def dataset_fingerprint(root: Path) -> str:
    """The generated files' bytes: recorded numbers only mean something on the same data."""
    h = hashlib.sha1()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in (".mp4", ".txt"):
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


def flatten(value, prefix=""):
    """{'a': {'b': 1}} -> {'a.b': 1}; lists and tuples by position; protocols' text left out."""
    if isinstance(value, dict):
        return {
            k: v for key, val in value.items() if key != "protocol" for k, v in flatten(val, f"{prefix}{key}.").items()
        }
    if isinstance(value, list | tuple):
        return {k: v for i, val in enumerate(value) for k, v in flatten(val, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): value}


def seeded_numbers(tiny_data, out):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a reduction's order, and so its last bits, depends on the thread count
    try:
        cfg = parse_config(["--data", str(tiny_data), "--out", str(out), *SETTINGS])
        train.main(cfg, report=BankReport(cfg))  # the class agreement LOGGED reads is the demo's report's
        res = evaluate.evaluate(
            out / "ckpt.pt",
            ["retrieval", "fewshot", "finetune"],
            workers=0,
            shots=(1, 2),
            trials=2,
            finetune_args={"epochs": 2, "batch_size": 8},
            jobs=1,
        )
        res |= analyse.analysis(out / "ckpt.pt", workers=0, figures=False)  # evaluate.py's analysis task until step 7
    finally:
        torch.set_num_threads(threads)
    numbers = {f"epoch{r['epoch']}.{k}": r[k] for r in checkpoint.read_log(out / "log.jsonl") for k in LOGGED}
    numbers |= {f"eval.{k}": v for k, v in flatten(json.loads(json.dumps(res))).items()}
    return numbers


def cpu_kind() -> str:
    """The CPU family whose kernels a recording holds: vendor, torch's vector capability, AMX or not."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    vendor = "AMD" if "AuthenticAMD" in info else "Intel" if "GenuineIntel" in info else "other"
    return f"{vendor}-{torch.backends.cpu.get_cpu_capability()}" + ("-AMX" if "amx_tile" in info else "")


def test_a_seeded_run_and_its_evaluation_give_the_recorded_numbers(tiny_data, tmp_path):
    kind, kinds = cpu_kind(), json.loads(RECORDED.read_text())
    if kind not in kinds and not os.environ.get("RECORD_NUMBERS"):
        pytest.skip(f"no numbers recorded on this CPU kind ({kind}; recorded: {sorted(kinds)}): see the docstring")
    if "stale" in kinds.get(kind, {}) and not os.environ.get("RECORD_NUMBERS"):
        pytest.skip(f"the numbers recorded on this CPU kind ({kind}) are stale: {kinds[kind]['stale']}")
    numbers = seeded_numbers(tiny_data, tmp_path / "run")
    data = dataset_fingerprint(tiny_data)
    if os.environ.get("RECORD_NUMBERS"):
        kinds[kind] = {"data": data, "numbers": numbers}
        RECORDED.write_text(json.dumps(kinds, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"recorded {len(numbers)} numbers for {kind} into {RECORDED.name}")
    recorded = kinds[kind]
    assert recorded["data"] == data, "the tiny dataset's files changed (tools/synthetic.py?): record anew, see above"
    assert set(numbers) == set(recorded["numbers"])
    differ = {k: (v, recorded["numbers"][k]) for k, v in numbers.items() if not same(v, recorded["numbers"][k])}
    assert differ == {}, f"{len(differ)} of {len(numbers)} numbers differ (now, recorded): {differ}"


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, abs_tol=0.5 * 10**-DIGITS) or (math.isnan(a) and math.isnan(b))
    return a == b
