"""Checks a student's pieces of the method against the reference and says what differs. TOUR.md, "Exercises".

Four exercises: eq. (6)'s weights, CCP's softening scores of eqs. (13)-(14), the memory bank's EMA update
of a batch's rows (Sec. 3) and the gradient of eqs. (3)-(4), each with one contract in the repository and in a
handout (student.py's function has the name and arguments of the library's). Each is run on a few seeded
inputs and compared with what the full library gives there (losses.py, memory_bank.py, autograd).

    python -m exercises.check                       # all four
    python -m exercises.check weights targets       # some of them: weights targets ema gradient
    python -m exercises.check --solutions           # the reference solutions (CI runs this; not in a handout)

Two places hold the student's pieces. In the repository they are the functions of exercises/student.py.
In a teacher's handout (python -m exercises.handout OUT) the library's own pieces are blanked and the
student writes them there (losses.sample_weights, losses.ccp_similarity, memory_bank.ema_rows; the
gradient, which training leaves to autograd, stays in student.py). The handout then holds no reference
to compare with, only the inputs and the full library's answers, stored when it was made
(exercises/reference_values.pt), and this checker grades the library against them.

An answer may be a tensor or any array-like (a NumPy array, nested lists): it is compared by value.
Exit status 0 when every checked piece matches.
"""

import argparse
import importlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import losses
import memory_bank
from memory_bank import MemoryBank

B, K, D, N = 6, 9, 16, 20
REFERENCE_VALUES = Path(__file__).with_name("reference_values.pt")  # only a handout has it


def _unit(*shape, g):
    return F.normalize(torch.randn(*shape, generator=g), dim=-1)


def _as_tensor(got):
    """A student's answer as a tensor: a tensor as it is, an array-like by value; None if it is neither."""
    if torch.is_tensor(got):
        return got.detach()
    try:
        return torch.as_tensor(np.asarray(got, dtype=np.float64))
    except (TypeError, ValueError, RuntimeError):
        return None


def _compare(name, got, expected, atol=1e-5):
    """'' when got matches expected, else one line saying how it differs."""
    value = _as_tensor(got)
    if value is None:
        return f"{name}: expected a tensor or an array of shape {tuple(expected.shape)}, got {type(got).__name__}"
    if value.shape != expected.shape:
        return f"{name}: shape {tuple(value.shape)}, expected {tuple(expected.shape)}"
    if not torch.isfinite(value).all():
        return f"{name}: holds NaN or inf"
    value, expected = value.double(), expected.double()
    diff = (value - expected).abs()
    if diff.max() > atol:
        where = tuple(int(i) for i in torch.nonzero(diff == diff.max())[0])
        return (
            f"{name}: differs by up to {diff.max():.4g} "
            f"(at index {where}: {value.flatten()[diff.flatten().argmax()]:.4g}, "
            f"expected {expected.flatten()[diff.flatten().argmax()]:.4g})"
        )
    return ""


# Each exercise's cases: (what the case is, the arguments in student.py's order, the full library's answer).
Case = tuple[str, dict, object]


def weights_cases(g) -> Iterator[Case]:
    scores = torch.randn(50, generator=g) * 0.2 + 0.1  # (50,)
    mu, sigma = float(scores.mean()), float(scores.std())
    for delta, kappa, w_min in ((-1.0, 0.5, 0.25), (0.5, 1.0, 0.1), (0.0, 0.25, 0.6)):
        args = {"scores": scores, "mu": mu, "sigma": sigma, "delta": delta, "kappa": kappa, "w_min": w_min}
        yield f"eq. (6) at delta={delta}, kappa={kappa}, w_min={w_min}", args, losses.sample_weights(**args)
    equal = torch.full((50,), 0.3)  # a bank whose scores are all equal: sigma = 0, every weight (1 + w_min) / 2
    args = {"scores": equal, "mu": float(equal[0]), "sigma": 0.0, "delta": -1.0, "kappa": 0.5, "w_min": 0.25}
    yield "eq. (6) at sigma=0 (all scores equal)", args, losses.sample_weights(**args)


def targets_cases(g) -> Iterator[Case]:
    vbar, abar = _unit(B, 1 + K, D, g=g), _unit(B, 1 + K, D, g=g)
    for tau_s, tau_t in ((0.02, 0.07), (0.1, 0.5), (0.05, 0.02)):
        args = {"vbar": vbar, "abar": abar, "tau_s": tau_s, "tau_t": tau_t}
        yield f"at tau_s={tau_s}, tau_t={tau_t}", args, losses.ccp_similarity(vbar, abar, tau_s, tau_t)


def ema_cases(g) -> Iterator[Case]:
    for momentum in (0.5, 0.9):
        bank = MemoryBank(N, dim=D, momentum=momentum, seed=3)
        idx = torch.randperm(N, generator=g)[:B]  # (B,) distinct slots
        args = {"rows": bank.video[idx].clone(), "features": _unit(B, D, g=g), "momentum": momentum}
        bank.update(idx, args["features"], args["features"])  # the rows as training writes them
        yield f"the batch's rows after one update at momentum {momentum}", args, bank.video[idx].clone()


def gradient_cases(g) -> Iterator[Case]:
    for tau in (0.07, 0.2):
        v = _unit(B, D, g=g).requires_grad_()
        abar = _unit(B, 1 + K, D, g=g)
        loss = -losses.log_posterior(v, abar, tau)[:, 0].sum()  # the video half of eq. (1), summed over i
        (expected,) = torch.autograd.grad(loss, v)
        yield f"dL/dv at tau={tau}", {"v": v.detach(), "abar": abar, "tau": tau}, expected


@dataclass(frozen=True)
class Exercise:
    number: int
    function: str  # its name in exercises/student.py
    cases: Callable[[torch.Generator], Iterator[Case]]
    atol: float = 1e-5
    parts: tuple[str, ...] = ()  # the names of an answer's parts, when it is a tuple


EXERCISES = {
    "weights": Exercise(1, "sample_weights", weights_cases),
    "targets": Exercise(2, "ccp_similarity", targets_cases, atol=1e-4, parts=("S_v", "S_a")),
    "ema": Exercise(3, "ema_rows", ema_cases),
    "gradient": Exercise(4, "xid_video_gradient", gradient_cases, atol=1e-4),
}


def reference_values():
    """Every exercise's cases with the full library's answers: what a handout stores."""
    return {name: list(ex.cases(torch.Generator().manual_seed(ex.number))) for name, ex in EXERCISES.items()}


def in_the_handout(name, student):
    """Where a handout's student writes exercise `name`: the library's function of the same name and
    contract as exercises/student.py's, but the gradient, which stays in `student`."""
    where = {"weights": losses, "targets": losses, "ema": memory_bank}.get(name)
    return getattr(where or importlib.import_module(student), EXERCISES[name].function)


def check(name, fn, cases):
    """The problems of `fn` on the exercise's cases, '' for each case it gets right."""
    ex, problems = EXERCISES[name], []
    for label, args, expected in cases:
        got = fn(*(v.clone() if torch.is_tensor(v) else v for v in args.values()))  # in order; its own copies
        if not ex.parts:
            problems.append(_compare(label, got, expected, ex.atol))
        elif not isinstance(got, tuple | list) or len(got) != len(ex.parts):
            return [f"{label}: expected {len(ex.parts)} results ({', '.join(ex.parts)}), got {type(got).__name__}"]
        else:
            problems += [_compare(f"{p} {label}", a, b, ex.atol) for p, a, b in zip(ex.parts, got, expected)]
    return problems


def run(module_name, names):
    """Check the named exercises in `module_name` (in a handout: in the library, and the gradient in
    `module_name`); returns {name: list of problems ('' = none)}."""
    handout = REFERENCE_VALUES.exists()
    stored = torch.load(REFERENCE_VALUES, weights_only=True) if handout else {}
    report = {}
    for name in names:
        ex = EXERCISES[name]
        try:
            if handout:
                fn, cases = in_the_handout(name, module_name), stored[name]
            else:
                fn = getattr(importlib.import_module(module_name), ex.function)
                cases = ex.cases(torch.Generator().manual_seed(ex.number))
            problems = [p for p in check(name, fn, cases) if p]
        except NotImplementedError:
            problems = ["not done yet (it still raises NotImplementedError)"]
        except Exception as err:  # noqa: BLE001 - a student's code may fail in any way; say how
            problems = [f"raised {type(err).__name__}: {err}"]
        report[name] = problems
    return report


def main(argv=None, student="exercises.student"):
    """The command line; `student` is the module checked without --solutions (a test passes another)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", help=f"which: {' '.join(EXERCISES)} (default: all)")
    p.add_argument("--solutions", action="store_true", help="check exercises/solutions.py instead")
    args = p.parse_args(argv)
    unknown = [n for n in args.names if n not in EXERCISES]
    if unknown:
        p.error(f"unknown exercise {unknown[0]!r}: expected some of {list(EXERCISES)}")
    if args.solutions and REFERENCE_VALUES.exists():
        p.error("--solutions: a handout holds no solutions; the checker grades your pieces without it")
    module = "exercises.solutions" if args.solutions else student
    report = run(module, args.names or list(EXERCISES))
    for name, problems in report.items():
        number = EXERCISES[name].number
        print(f"exercise {number} ({name}): " + ("matches the reference" if not problems else "DIFFERS"))
        for problem in problems:
            print(f"    {problem}")
    return 0 if all(not p for p in report.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
