"""The demo's own criteria, judged on finished demo settings (the regime criteria (a) and (b); results/spread/
SCREEN_PLAN.md's stage 2 and the 8-seed check read them). 1-shot in %, 25% injected.

    (a) xID's 1-shot has an SD of at most 3.5 points across the seeds, and no method's SD exceeds 4;
    (b) per seed: Weighted's bank AUROC (eq. (6)'s scores against the known faults) at least 80, Oracle
        above xID by at least 5 points, Weighted, Soft and Robust each above xID; on the mean, Robust above
        Weighted and above Soft.

    python -m lab.demo_criteria runs/stage2/R0 --seeds 1110 1111 1112
"""

import argparse
import statistics

from lab.regime import rows as demo_rows

XID_SD, ROW_SD = 3.5, 4.0  # (a)
AUROC_MIN, ORACLE_GAIN = 80.0, 5.0  # (b), per seed


def per_seed(r):
    """(b)'s per-seed tests of one seed's rows {method: {metric: %}} -> {test: bool}."""
    x = r["xid"]["1-shot"]
    return {
        "Weighted AUROC >= 80": r["weighted"]["AUROC"] >= AUROC_MIN,
        "Oracle - xID >= 5": r["oracle"]["1-shot"] - x >= ORACLE_GAIN,
        "Weighted > xID": r["weighted"]["1-shot"] > x,
        "Soft > xID": r["soft"]["1-shot"] > x,
        "Robust > xID": r["robust"]["1-shot"] > x,
    }


def judge(by_seed):
    """{seed: rows} -> the figures and verdicts of (a) and (b), on the seeds given."""
    methods = list(next(iter(by_seed.values())))
    level = {m: [r[m]["1-shot"] for r in by_seed.values()] for m in methods}
    sds = {m: statistics.stdev(v) if len(v) > 1 else None for m, v in level.items()}
    means = {m: statistics.mean(v) for m, v in level.items()}
    tests = {s: per_seed(r) for s, r in by_seed.items()}
    met = [s for s, t in tests.items() if all(t.values())]
    return {
        "seeds": list(by_seed),
        "mean": means,
        "SD": sds,
        "a": None if sds["xid"] is None else sds["xid"] <= XID_SD and all(v <= ROW_SD for v in sds.values()),
        "per seed": tests,
        "seeds meeting (b)": met,
        "Robust above Weighted and Soft on the mean": means["robust"] > max(means["weighted"], means["soft"]),
    }


def show(j):
    lines = [f"seeds {j['seeds']}", "| method | mean | SD |", "|---|---:|---:|"]
    for m, mean in j["mean"].items():
        sd = j["SD"][m]
        lines.append(f"| {m} | {mean:.1f} | {'-' if sd is None else f'{sd:.1f}'} |")
    for s, t in j["per seed"].items():
        failed = [k for k, ok in t.items() if not ok]
        lines.append(f"- seed {s}: " + ("meets (b)'s per-seed tests" if not failed else "fails " + "; ".join(failed)))
    lines.append(
        f"- (a) {j['a']}; (b) per seed on {len(j['seeds meeting (b)'])} of {len(j['seeds'])}; "
        f"Robust above Weighted and Soft on the mean: {j['Robust above Weighted and Soft on the mean']}"
    )
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", help="a demo --results folder (its demo_settings/)")
    p.add_argument("--seeds", type=int, nargs="+", required=True)
    a = p.parse_args(argv)
    by_seed = demo_rows(a.results, a.seeds, 0.25)
    if not by_seed:
        raise SystemExit(f"lab.demo_criteria: no finished 25% setting of seeds {a.seeds} under {a.results}")
    print(show(judge(by_seed)))


if __name__ == "__main__":
    main()
