"""Checks a student's pieces of the method against the reference (losses.py, memory_bank.py, autograd)
and says what differs. TOUR.md, "Exercises".

    python -m exercises.check                       # exercises/student.py, all four
    python -m exercises.check weights targets       # some of them: weights targets ema gradient
    python -m exercises.check --solutions           # the reference solutions (CI runs this)

Exit status 0 when every checked piece matches.
"""

import argparse
import importlib
import sys

import torch
import torch.nn.functional as F

import losses
from memory_bank import MemoryBank

B, K, D, N = 6, 9, 16, 20


def _unit(*shape, g):
    return F.normalize(torch.randn(*shape, generator=g), dim=-1)


def _compare(name, got, expected, atol=1e-5):
    """'' when got matches expected, else one line saying how it differs."""
    if not torch.is_tensor(got):
        return f"{name}: expected a tensor of shape {tuple(expected.shape)}, got {type(got).__name__}"
    if got.shape != expected.shape:
        return f"{name}: shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    diff = (got.float() - expected.float()).abs()
    if not torch.isfinite(got).all():
        return f"{name}: holds NaN or inf"
    if diff.max() > atol:
        where = tuple(int(i) for i in torch.nonzero(diff == diff.max())[0])
        return (
            f"{name}: differs by up to {diff.max():.4g} "
            f"(at index {where}: {got.flatten()[diff.flatten().argmax()]:.4g}, "
            f"expected {expected.flatten()[diff.flatten().argmax()]:.4g})"
        )
    return ""


def check_weights(fn, g):
    scores = torch.randn(50, generator=g) * 0.2 + 0.1  # (50,)
    problems = []
    for delta, kappa, w_min in ((-1.0, 0.5, 0.25), (0.5, 1.0, 0.1), (0.0, 0.25, 0.6)):
        mu, sigma = float(scores.mean()), float(scores.std())
        got = fn(scores, mu, sigma, delta, kappa, w_min)
        expected = losses.sample_weights(scores, mu, sigma, delta, kappa, w_min)
        problems.append(_compare(f"eq. (6) at delta={delta}, kappa={kappa}, w_min={w_min}", got, expected))
    return problems


def check_targets(fn, g):
    vbar, abar = _unit(B, 1 + K, D, g=g), _unit(B, 1 + K, D, g=g)
    problems = []
    for lam, tau_s, tau_t in ((0.5, 0.02, 0.07), (0.3, 0.1, 0.5), (0.0, 0.05, 0.07)):
        got = fn(vbar, abar, lam, tau_s, tau_t)
        expected = losses.soft_targets(vbar, abar, "ccp", lam=lam, tau_s=tau_s, tau_t=tau_t)
        if not isinstance(got, tuple) or len(got) != 2:
            return [f"CCP targets: expected a pair (T_v, T_a), got {type(got).__name__}"]
        for side, a, b in (("T_v", got[0], expected[0]), ("T_a", got[1], expected[1])):
            problems.append(_compare(f"{side} at lam={lam}, tau_s={tau_s}, tau_t={tau_t}", a, b, atol=1e-4))
    return problems


def check_ema(fn, g):
    problems = []
    for momentum in (0.5, 0.9):
        bank = MemoryBank(N, dim=D, momentum=momentum, seed=3)
        before = bank.video.clone()
        idx = torch.randperm(N, generator=g)[:B]  # (B,) distinct slots
        f = _unit(B, D, g=g)
        got = fn(before.clone(), idx, f, momentum)
        bank.update(idx, f, f)
        problems.append(_compare(f"the bank after one update at momentum {momentum}", got, bank.video))
    return problems


def check_gradient(fn, g):
    problems = []
    for tau in (0.07, 0.2):
        v = _unit(B, D, g=g).requires_grad_()
        abar = _unit(B, 1 + K, D, g=g)
        loss = -losses.log_posterior(v, abar, tau)[:, 0].sum()  # the video half of eq. (1), summed over i
        (expected,) = torch.autograd.grad(loss, v)
        got = fn(v.detach(), abar, tau)
        problems.append(_compare(f"dL/dv at tau={tau}", got, expected, atol=1e-4))
    return problems


EXERCISES = {  # name: (exercise number, function in the module, check)
    "weights": (1, "sample_weights", check_weights),
    "targets": (2, "ccp_targets", check_targets),
    "ema": (3, "ema_update", check_ema),
    "gradient": (4, "xid_video_gradient", check_gradient),
}


def run(module_name, names):
    """Check the named exercises in `module_name`; returns {name: list of problems ('' = none)}."""
    module = importlib.import_module(module_name)
    report = {}
    for name in names:
        number, fn_name, check = EXERCISES[name]
        try:
            problems = [p for p in check(getattr(module, fn_name), torch.Generator().manual_seed(number)) if p]
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
    module = "exercises.solutions" if args.solutions else student
    report = run(module, args.names or list(EXERCISES))
    for name, problems in report.items():
        number = EXERCISES[name][0]
        print(f"exercise {number} ({name}): " + ("matches the reference" if not problems else "DIFFERS"))
        for problem in problems:
            print(f"    {problem}")
    return 0 if all(not p for p in report.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
