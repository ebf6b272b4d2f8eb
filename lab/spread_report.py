"""The spread's diagnosis, read out: runs/spread/ (lab/spread.py's jobs) collected into
lab/results/spread/diagnosis.json, and lab/results/spread/RESULTS.md's tables answering lab/results/spread/PLAN.md's
four questions by the rules written there.

    python -m lab.spread report
"""

import json
import math
import statistics
from pathlib import Path

from scipy.stats import spearmanr

CHANCE_LOSS = 2 * math.log(1 + 256)  # eq. (1)'s two directions at chance, K = 256 negatives: 11.10
BOUND = 3.0  # points of 1-shot: the regime screen's bound on a rounding-level change
WARMUPS = ("warm", "fork0", "fork5", "fork10", "fork20")


def load(runs):
    """{seed: {name: row}} from every finished job under runs/."""
    seeds = {}
    for folder in sorted(Path(runs).glob("seed*")):
        got = {}
        for row in sorted(folder.glob("*/row.json")):
            got[row.parent.name] = json.loads(row.read_text())
        for ev in sorted(folder.glob("eval_warm*.json")):
            got[ev.stem] = json.loads(ev.read_text())
        seeds[int(folder.name[4:])] = got
    return seeds


def shot(rows, name):
    """A run's 1-shot in %, or None where it has not finished."""
    return 100 * rows[name]["1-shot"] if name in rows and "1-shot" in rows[name] else None


def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.mean(xs) if xs else None


def sd(xs):
    xs = [x for x in xs if x is not None]
    return statistics.stdev(xs) if len(xs) > 1 else None


def plateau_exit(log, below=0.3, chance=CHANCE_LOSS):
    """The first epoch whose loss is `below` under chance (2 ln(1+K)), or None."""
    return next((r["epoch"] for r in log if r["loss"] <= chance - below), None)


def same_run(a, b):
    """Whether two warm-ups' logs agree on every number kept (lab.spread.log_of: no timings)."""
    return a == b


def report(runs, results):
    seeds = load(runs)
    results = Path(results)
    results.mkdir(parents=True, exist_ok=True)
    (results / "diagnosis.json").write_text(json.dumps({str(s): rows for s, rows in seeds.items()}, indent=1))
    lines = [
        "# The spread's diagnosis: results",
        "",
        "Made by `python -m lab.spread report` from the runs of `python -m lab.spread run --seeds "
        + " ".join(map(str, seeds))
        + "` (plan: [PLAN.md](PLAN.md); every number: [diagnosis.json](diagnosis.json)). Set `data/synth_src2p`,",
        "`--preset demo`, 25% injected, 30-epoch xID warm-up, 24-epoch xID branch, the demo's evaluation.",
        "",
        "## Each seed's outcome: xID's 1-shot after the branch",
        "",
        "| seed | warm (2 thr) | fork0 | fork5 | fork10 | fork20 | branch 2 thr | branch seed +1 | +2 | ctl10 same |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|:-:|",
    ]
    for s, rows in seeds.items():
        ctl = "-"
        if "ctl10" in rows and "warm" in rows:
            ctl = "yes" if same_run(rows["ctl10"]["log"], rows["warm"]["log"]) else "**no**"
        cells = [fmt(shot(rows, f"xid_{w}")) for w in WARMUPS]
        cells += [fmt(shot(rows, n)) for n in ("xid_t2", "xid_b1", "xid_b2")]
        lines.append(f"| {s} | " + " | ".join(cells) + f" | {ctl} |")
    lines += ["", "## 1-2. The warm-up's share against the branch's; the chaos", ""]
    warm_moves = [abs(shot(r, "xid_fork0") - shot(r, "xid_warm")) for r in seeds.values() if _has(r, "fork0")]
    branch_moves = [abs(shot(r, "xid_t2") - shot(r, "xid_warm")) for r in seeds.values() if _has(r, "t2")]
    lines.append(
        f"- The warm-up re-rounded (|fork0 - warm|): {', '.join(fmt(x) for x in warm_moves)}; "
        f"mean {fmt(mean(warm_moves))} points."
    )
    lines.append(
        f"- The branch re-rounded (|branch on 2 threads - on 1|): {', '.join(fmt(x) for x in branch_moves)}; "
        f"mean {fmt(mean(branch_moves))} points."
    )
    if warm_moves and branch_moves:
        a, b = mean(warm_moves), mean(branch_moves)
        verdict = "neither is named (within a factor of 1.5)"
        if a > 1.5 * b:
            verdict = "the warm-up moves it more"
        elif b > 1.5 * a:
            verdict = "the branch moves it more"
        lines.append(f"- Rule 1: {verdict}.")
        chaotic = sum(x > BOUND for x in warm_moves)
        lines.append(
            f"- Rule 2: the warm-up's rounding change moves the outcome by more than {BOUND:.0f} points on "
            f"{chaotic} of {len(warm_moves)} seeds: "
            + ("chaotic at the size of the effects." if chaotic >= 2 else "not.")
        )
    signed = [shot(r, "xid_fork0") - shot(r, "xid_warm") for r in seeds.values() if _has(r, "fork0")]
    lines.append(
        f"- Signed, 1 thread minus 2 (fork0 - warm): {', '.join(f'{x:+.1f}' for x in signed)}; higher on 1 thread "
        f"on {sum(x > 0 for x in signed)} of {len(signed)} seeds (not in the plan: a direction, to be checked)."
    )
    warm_outcomes = [shot(r, "xid_warm") for r in seeds.values()]
    lines.append(f"- Across the seeds' reference runs: SD {fmt(sd(warm_outcomes))} (n = {len(warm_outcomes)}).")
    first = next(iter(seeds.values()), {})
    branch_seeds = [shot(first, n) for n in ("xid_warm", "xid_b1", "xid_b2")]
    lines.append(f"- Across 3 branch seeds on one warm-up: SD {fmt(sd(branch_seeds))} (n = 3, not judged).")
    lines += [
        "",
        "## 3. When the outcome is decided",
        "",
        "| rounding changed from epoch | mean abs move | each seed |",
    ]
    lines.append("|---:|---:|---|")
    decided = None
    for e in (0, 5, 10, 20):
        moves = [abs(shot(r, f"xid_fork{e}") - shot(r, "xid_warm")) for r in seeds.values() if _has(r, f"fork{e}")]
        m = mean(moves)
        lines.append(f"| {e} | {fmt(m)} | {', '.join(fmt(x) for x in moves)} |")
        if m is not None:
            decided = e if (m <= BOUND and decided is None) else (decided if m <= BOUND else None)
    lines.append("")
    lines.append(
        f"Rule 3: decided from epoch {decided} on."
        if decided is not None
        else "Rule 3: no fork epoch keeps the move within 3 points: the outcome is not decided in the warm-up."
    )
    lines += _signals(seeds)
    lines += paired_against_level(Path("lab/results/claims/settings"))
    (results / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _has(rows, what):
    return shot(rows, "xid_warm") is not None and shot(rows, f"xid_{what}") is not None


def _signals(seeds):
    """Question 4: the warm-ups' per-epoch signals and their rank correlation with the branch's 1-shot."""
    lines = ["", "## 4. The warm-up's signals (reported, not judged)", ""]
    lines += ["| seed | warm-up | 1-shot after branch | loss leaves chance (epoch) | AUROC e5/10/20/29 | xmodal e29 |"]
    lines.append("|---|---|---:|---:|---|---:|")
    pairs = []  # (outcome, log) of every warm-up with a finished branch
    for s, rows in seeds.items():
        for w in WARMUPS:
            if w in rows and f"xid_{w}" in rows:
                log, out = rows[w]["log"], shot(rows, f"xid_{w}")
                pairs.append((out, log))
                au = "/".join(fmt(log[e]["faulty_auroc"], 2) for e in (5, 10, 20, 29) if e < len(log))
                lines.append(
                    f"| {s} | {w} | {fmt(out)} | {plateau_exit(log)} | {au} | {fmt(log[-1]['xmodal_class'], 2)} |"
                )
    if len(pairs) >= 5:
        lines += ["", "Spearman's rank correlation with the branch's 1-shot, across these warm-ups:", ""]
        lines += ["| epoch | loss | AUROC | 1-NN | xmodal |", "|---:|---:|---:|---:|---:|"]
        for e in (2, 5, 10, 15, 20, 25, 29):
            cells = []
            for k in ("loss", "faulty_auroc", "knn_class", "xmodal_class"):
                rho = spearmanr([o for o, _ in pairs], [log[e][k] for _, log in pairs]).statistic
                cells.append(fmt(rho, 2))
            lines.append(f"| {e} | " + " | ".join(cells) + " |")
    return lines


def paired_against_level(folder):
    """The committed claims' settings read again: each method's 1-shot across seeds (the level) against its
    difference from xID on the same seed and warm-up (what the demo's table and every claim compare)."""
    lines = ["", "## The level against the paired difference (the committed claims' settings, read again)", ""]
    lines += [
        f"From `{folder}/seed*_faulty*.json` (the claims' recipe on this set: 30 + 24 epochs, seeds 400-414).",
        "",
    ]
    lines += ["| injected | method | seeds | 1-shot SD across seeds | SD of its difference from xID |"]
    lines.append("|---:|---|---:|---:|---:|")
    for level in (0, 25, 50):
        rows = [json.loads(p.read_text())["rows"] for p in sorted(Path(folder).glob(f"seed*_faulty{level}.json"))]
        if len(rows) < 3:
            continue
        for m in rows[0]:
            have = [r for r in rows if m in r]
            lvl = [100 * r[m]["1-shot"] for r in have]
            diff = [100 * (r[m]["1-shot"] - r["xid"]["1-shot"]) for r in have]
            lines.append(f"| {level}% | {m} | {len(have)} | {fmt(sd(lvl))} | {'-' if m == 'xid' else fmt(sd(diff))} |")
    return lines


# ----------------------------------------------------------------------------- the regime screen's stage 1

DEMO_MIN = 3.8  # make demo's min on 2 AVX-512 cores (CHECK_PLAN.md's (d)); a candidate's by its warm-up's ratio
DEMO_LIMIT = 5.0
MOVE_RULE = 5.0  # stage 1: a candidate's mean may be at most this far under R0's


def screen_rows(runs):
    """{candidate: {seed: {warm, fork0, xid_warm, xid_fork0: row}}} of every finished job under runs/."""
    out = {}
    for cand in sorted(p for p in Path(runs).iterdir() if p.is_dir()):
        for folder in sorted(cand.glob("seed*")):
            rows = {r.parent.name: json.loads(r.read_text()) for r in folder.glob("*/row.json")}
            rows["s_per_epoch"] = _seconds_per_epoch(folder / "warm" / "log.jsonl")
            out.setdefault(cand.name, {})[int(folder.name[4:])] = rows
    return out


def _seconds_per_epoch(log):
    """A warm-up's mean seconds per epoch from its own clips/s (epoch 0 left out: it warms caches)."""
    if not log.exists():
        return None
    recs = [json.loads(line) for line in log.read_text().splitlines() if line.strip()][1:]
    return mean([1.0 / r["clips_per_s"] for r in recs if r.get("clips_per_s")])  # per clip; a ratio is all we use


# candidates dropped before stage 1 was read, and why: their rows are shown, the rule reads the others
DROPPED = {"R2": "over 5 min of make demo by the quiet time check (SCREEN_PLAN.md, amendment 3)"}


def screen_summary(cands, dropped=()):
    """Each candidate on the seeds every candidate finished: the stage-1 numbers the plan's rule reads.
    `dropped`: candidates left out of both."""
    cands = {c: seeds for c, seeds in cands.items() if c not in dropped}
    done = [
        {s for s, r in seeds.items() if shot(r, "xid_warm") is not None and shot(r, "xid_fork0") is not None}
        for seeds in cands.values()
    ]
    common = sorted(set.intersection(*done)) if done else []
    summary = {"seeds": common, "candidates": {}}
    for c, seeds in cands.items():
        ref = [shot(seeds[s], "xid_warm") for s in common]
        fork = [shot(seeds[s], "xid_fork0") for s in common]
        per_clip = [seeds[s]["s_per_epoch"] for s in common]
        summary["candidates"][c] = {
            "reference": ref,
            "fork0": fork,
            "mean": mean(ref + fork),
            "reference SD": sd(ref),
            "mean |fork0 - reference|": mean([abs(a - b) for a, b in zip(fork, ref)]),
            "pooled SD": sd(ref + fork),
            "time per clip": mean(per_clip),
        }
    return summary


def screen_verdict(summary, cost):
    """SCREEN_PLAN.md's stage-1 rule: mean at least R0's minus 5, pooled SD below R0's; the two smallest pooled
    SDs go on (ties: the cheaper). `cost`: {candidate: projected demo minutes}. Needs 3 seeds."""
    cs = summary["candidates"]
    if len(summary["seeds"]) < 3 or "R0" not in cs:
        return {"read": False, "why": f"{len(summary['seeds'])} seed(s) finished by every candidate; 3 needed"}
    r0 = cs["R0"]
    ok = [
        c
        for c, v in cs.items()
        if c != "R0"
        and v["mean"] >= r0["mean"] - MOVE_RULE
        and v["pooled SD"] < r0["pooled SD"]
        and cost.get(c, 0) <= DEMO_LIMIT
    ]
    ok.sort(key=lambda c: (round(cs[c]["pooled SD"], 1), cost.get(c, 0)))
    return {"read": True, "pass": ok, "stage 2": ok[:2] or ["R0"]}


def thread_direction(cands):
    """The folded stage 0: fork0 - warm (1 thread minus 2) over every finished pair of every candidate."""
    from scipy.stats import binomtest

    from lab.statistics import interval

    d = [
        shot(r, "xid_fork0") - shot(r, "xid_warm")
        for seeds in cands.values()
        for r in seeds.values()
        if shot(r, "xid_warm") is not None and shot(r, "xid_fork0") is not None
    ]
    if len(d) < 2:
        return {"pairs": d}
    m, low, high = interval(d, [0.0] * len(d), paired=True)
    p = binomtest(sum(x > 0 for x in d), sum(x != 0 for x in d)).pvalue
    return {
        "pairs": d,
        "mean": m,
        "ci95": [low, high],
        "higher on 1 thread": sum(x > 0 for x in d),
        "sign test p": p,
        "direction": bool(p < 0.05 and (low > 0 or high < 0)),
    }


def projected_minutes(summary, timecheck, candidates):
    """Each candidate's projected make demo (min): SCREEN_PLAN.md's amendment 2, from the quiet time check
    where it exists (DEMO_MIN x R0's clips/s over its own x its epochs over R0's, a demo's epochs being the
    warm-up's and 5 branches of 24); else, as first amended, from stage 1's own warm-up logs."""

    def epochs(c):
        opts = candidates[c]
        warm = int(opts[opts.index("--warmup-epochs") + 1]) if "--warmup-epochs" in opts else 30
        return warm + 5 * 24

    if Path(timecheck).exists():
        speed = json.loads(Path(timecheck).read_text())["clips_per_s"]
        return {c: DEMO_MIN * speed["R0"] / speed[c] * epochs(c) / epochs("R0") for c in speed}
    r0 = summary["candidates"].get("R0", {}).get("time per clip")
    cost = {
        c: DEMO_MIN * v["time per clip"] / r0 if r0 and v["time per clip"] else None
        for c, v in summary["candidates"].items()
    }
    cost["R4"] = cost.get("R4") and cost["R4"] + 15 / 30 * 0.8  # 15 more warm-up epochs: ~0.8 of 3.8 min is warm-up
    return cost


def screen_report(runs, results, candidates):
    """Stage 1 read out. `candidates`: lab.spread.CANDIDATES, each one's options (passed in: spread imports us)."""
    cands = screen_rows(runs)
    summary = screen_summary(cands, DROPPED)
    cost = projected_minutes(summary, Path(results) / "timecheck.json", candidates)
    verdict = screen_verdict(summary, {c: v or 0 for c, v in cost.items()})
    threads = thread_direction(cands)
    out = {
        "summary": summary,
        "projected demo min": cost,
        "verdict": verdict,
        "threads": threads,
        "rows": {c: {str(s): r for s, r in seeds.items()} for c, seeds in cands.items()},
    }
    Path(results, "screen.json").write_text(json.dumps(out, indent=1))
    lines = [
        "# The regime screen, stage 1: results",
        "",
        "Made by `python -m lab.spread screen-report` from `python -m lab.spread screen --seeds ...` "
        "(plan: [SCREEN_PLAN.md](SCREEN_PLAN.md), with its amendments; every number: [screen.json](screen.json); the "
        "projected minutes from the quiet time check, [timecheck.json](timecheck.json), where it exists). "
        "Set `data/synth_src2p`, `--preset demo` plus each candidate's options, 25% injected, 30-epoch xID "
        "warm-up (R4: 45), 24-epoch xID branch on 1 thread, the demo's evaluation. xID's 1-shot (%).",
        "",
        "| candidate | options | seed | warm-up 2 thr | warm-up 1 thr (fork0) | move | loss leaves chance |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for c, seeds in cands.items():
        for s, r in seeds.items():
            a, b = shot(r, "xid_warm"), shot(r, "xid_fork0")
            move = f"{b - a:+.1f}" if a is not None and b is not None else "-"
            opts = candidates[c]
            k = int(opts[opts.index("--num-negatives") + 1]) if "--num-negatives" in opts else 256
            exit_ = plateau_exit(r["warm"]["log"], chance=2 * math.log(1 + k)) if "warm" in r else None
            lines.append(
                f"| {c} | `{' '.join(candidates[c]) or 'none'}` | {s} | {fmt(a)} | {fmt(b)} | {move} | {exit_} |"
            )
    lines += [
        "",
        f"## Stage 1's rule, on the seeds every candidate finished: {summary['seeds']}",
        "",
        "| candidate | mean (all) | reference SD | mean abs move | pooled SD | projected make demo (min) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c, v in summary["candidates"].items():
        lines.append(
            f"| {c} | {fmt(v['mean'])} | {fmt(v['reference SD'])} | {fmt(v['mean |fork0 - reference|'])} | "
            f"{fmt(v['pooled SD'])} | {fmt(cost.get(c))} |"
        )
    for c, why in DROPPED.items():
        lines.append(f"| {c} | dropped: {why} | | | | {fmt(cost.get(c))} |")
    lines.append("")
    if verdict["read"]:
        lines.append(f"Rule: passing {verdict['pass'] or 'none'}; to stage 2: {', '.join(verdict['stage 2'])}.")
    else:
        lines.append(f"Not read: {verdict['why']}.")
    if "mean" in threads:
        lo, hi = threads["ci95"]
        lines += [
            "",
            "## The folded stage 0: 1 thread minus 2 over every pair",
            "",
            f"{len(threads['pairs'])} pairs: mean {threads['mean']:+.1f} [{lo:+.1f}, {hi:+.1f}], higher on 1 thread "
            f"in {threads['higher on 1 thread']}; sign test p = {threads['sign test p']:.3f}. Rule: "
            + (
                "a direction: the 2-thread path is examined before stage 2."
                if threads["direction"]
                else "no direction shown."
            ),
        ]
    Path(results, "SCREEN.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
