"""The one-regime screen's judge: criteria (a)-(d) of lab/results/regime/PLAN.md (written before its runs)
on one candidate's finished settings. (e), make demo's wall time, is measured in a fresh clone.

The candidates' runs are demo.py commands (PLAN.md lists them): at 0% injected, xID and
Soft-xID with the oracle's soft targets on the screen seeds 100-102; at 50%, xID and Oracle-xID on
seeds 100-101. The judge reads their settings files and, when given, the honesty log.

    python -m lab.regime judge runs/regime/a runs/regime/a50 [--honesty data/synth_src10]
    python -m lab.regime judge lab/results/regime/settings/e lab/results/regime/settings/e50   # the committed ones
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

import demo
from lab import honesty

SEEDS_0, SEEDS_50 = (100, 101, 102), (100, 101)  # the screen's own seeds: the claims never use them
XID_RANGE = (35.0, 80.0)  # (a): xID 1-shot at 0%, every seed
SOFT_GAIN, SOFT_SD = 8.0, 6.0  # (b): oracle soft targets - xID, 1-shot: mean at least, paired SD at most
AUROC_MIN, ORACLE_GAIN = 80.0, 5.0  # (c): bank AUROC after the xID branch, every seed; Oracle - xID mean
HONESTY_LIMIT = 0.75  # (d): lab.honesty's bound


def rows(folder, seeds, faulty):
    """{seed: {method: metrics in %}} of the finished settings of `seeds` in a demo results folder."""
    out = {}
    for seed in seeds:
        settings = Path(folder) / "demo_settings"  # a demo results folder, or the settings themselves
        path = (settings if settings.is_dir() else Path(folder)) / f"{demo.setting_name(seed, faulty)}.json"
        if path.exists():
            saved = json.loads(path.read_text())["rows"]
            out[seed] = {m: {k: 100 * v for k, v in r.items() if isinstance(v, float)} for m, r in saved.items()}
    return out


def _verdict(per_seed_ok, complete, whole_ok):
    """A criterion's verdict: False once any finished seed breaks a per-seed bound (no later seed can
    mend it); else, with every planned seed, whether the whole criterion holds; else None (pending)."""
    if not all(per_seed_ok):
        return False
    return whole_ok() if complete else None


def criteria(zero, fifty, honesty=None):
    """zero, fifty: rows() at 0% and 50%; honesty: the two best audio-only AUROCs or None.
    -> [(criterion, figures, holds)], holds None while a criterion waits for its seeds."""
    seeds0, seeds50 = [s for s in SEEDS_0 if s in zero], [s for s in SEEDS_50 if s in fifty]
    xid = [zero[s]["xid"]["1-shot"] for s in seeds0]
    gain = [zero[s]["soft:oracle"]["1-shot"] - zero[s]["xid"]["1-shot"] for s in seeds0]
    auroc = [fifty[s]["xid"]["AUROC"] for s in seeds50]
    oracle = [fifty[s]["oracle"]["1-shot"] - fifty[s]["xid"]["1-shot"] for s in seeds50]
    done0, done50 = len(seeds0) == len(SEEDS_0), len(seeds50) == len(SEEDS_50)

    def listed(values, sign=""):
        return " / ".join(f"{v:{sign}.1f}" for v in values) + f" (seeds {', '.join(map(str, seeds0))})"

    out = [
        (
            "(a)",
            f"xID 1-shot at 0%: {listed(xid)}",
            _verdict([XID_RANGE[0] <= x <= XID_RANGE[1] for x in xid], done0, lambda: True),
        ),
        (
            "(b)",
            f"oracle soft - xID 1-shot: {listed(gain, '+')}"
            + (f", mean {statistics.mean(gain):+.1f}, paired SD {statistics.stdev(gain):.1f}" if done0 else ""),
            _verdict(
                [g > 0 for g in gain],
                done0,
                lambda: statistics.mean(gain) >= SOFT_GAIN and statistics.stdev(gain) <= SOFT_SD,
            ),
        ),
        (
            "(c)",
            "bank AUROC at 50%: "
            + " / ".join(f"{a:.1f}" for a in auroc)
            + "; Oracle - xID 1-shot: "
            + " / ".join(f"{g:+.1f}" for g in oracle)
            + f" (seeds {', '.join(map(str, seeds50))})",
            _verdict([a >= AUROC_MIN for a in auroc], done50, lambda: statistics.mean(oracle) >= ORACLE_GAIN),
        ),
    ]
    if honesty is None:
        out.append(("(d)", "not run", None))
    else:
        out.append(
            ("(d)", "best audio-only AUROC " + " / ".join(f"{h:.3f}" for h in honesty), max(honesty) < HONESTY_LIMIT)
        )
    return out


def honesty_aurocs(root):
    """lab.honesty's best audio-only AUROCs on a set: (natural faults, held-out sounds)."""
    return [value for name, (value, _) in honesty.check(root).items() if "AUROC" in name]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["judge"])
    p.add_argument("zero", help="the candidate's results folder at 0%%")
    p.add_argument("fifty", help="the candidate's results folder at 50%%")
    p.add_argument("--honesty", metavar="DATA", help="the candidate's set: run lab.honesty's checks on it")
    args = p.parse_args(argv)
    found = criteria(
        rows(args.zero, SEEDS_0, 0.0),
        rows(args.fifty, SEEDS_50, 0.5),
        honesty_aurocs(args.honesty) if args.honesty else None,
    )
    for name, figures, holds in found:
        print(f"{name} {'holds' if holds else 'fails' if holds is False else 'not judged'}: {figures}")
    sys.exit(0 if all(h for _, _, h in found) else 1)


if __name__ == "__main__":
    main()
