"""The claims of lab/results/claims/PLAN.md as data: the primary endpoints, the seeds of each group of claims,
and every claim, 'A > B' or 'A >= B', with the two arms it compares. lab/claims_report.py judges
them; lab/claims.py runs the settings they read.

    python -m lab.claims report --run first   # judges these claims from lab/results/claims/settings/
    python -m lab.claims report               # the rerun's (lab/claims_rerun.py's claims_of)

Each comparison is one claim, counted once: where the paper's figures and the earlier faulty-negative
plan name the same comparison, it has one name here (PLAN.md lists the earlier names).
"""

import json
from dataclasses import dataclass
from pathlib import Path
from statistics import mean

PRIMARY = ("1-shot", "transfer 1-shot")  # in-domain and on classes pre-training never saw (PLAN.md)
SHOWN = ("5-shot", "transfer 5-shot", "R@1")
CHANCE = 0.10  # both sets have 10 classes

# Seeds per group of claims (PLAN.md, seeds): `python -m lab.claims seeds` computes them from the
# power pilot's paired SDs; they are pasted here and into PLAN.md before the first claims run. Empty
# until then: `run` refuses, and the claims below are listed with 5 seeds each.
SEEDS = {"0%": 15, "50%": 15, "F1": 15, "F3b": 10, "S1": 15}
# beside them, from the same output: each group's planning SD (the pilot's bound, in accuracy), and the
# power at 15 seeds of the groups that 15 cannot power (their "not shown" reads as underpowered)
BOUND = {"0%": 0.0998, "50%": 0.0998, "F1": 0.1493, "F3b": 0.0254, "S1": 0.0998}
SHORT = {"0%": 0.12, "50%": 0.12, "F1": 0.06, "S1": 0.03}
FIG7_ONLY = 5  # seeds at 25% and 75%: reported, not judged
FIRST_SEED = 400  # the claims' seeds are 400, 401, ...: no screen, pilot, study or demo run used them
# the sweeps' values beside the default's branch, which the 50% setting trains (delta: the paper's rule,
# "known", is delta 0 at 50%; lambda 0.5 is CCP's branch; lambda 0 is xID exactly, tests/test_losses.py)
SWEEP_VALUES = {"delta": ("-2", "-1", "1", "known"), "lambda": ("0.25", "0.5", "0.65", "0.9", "1")}


# The regime every claims setting is trained and measured on (PLAN.md, regime): the fields of a setting's key
# that the plan fixes. lab/claims.py runs with them; a file made otherwise is refused, not judged.
DATA, TRANSFER = "data/synth_src2p", "data/synth_transfer"
WARMUP_EPOCHS, EPOCHS = 30, 24
RECIPE = dict(data=DATA, warmup_epochs=WARMUP_EPOCHS, epochs=EPOCHS, trials=50, eval_clips=2, transfer=TRANSFER)


def planned(path):
    """A finished setting's file, refused when its key says another set or recipe made it (PLAN.md: a
    change of set or recipe reruns every claim, so no file of another one may enter a verdict)."""
    setting = json.loads(Path(path).read_text())
    key = setting.get("key") or {}
    wrong = {k: key.get(k) for k, v in RECIPE.items() if key.get(k) != v}
    if wrong:
        raise SystemExit(f"{path}: not made by the plan's regime: {wrong}, where the plan has {RECIPE}")
    return setting


def load(folder):
    """{level: {seed: {method: row}}} of every finished setting; at 0% Oracle-xID is xID's row (nothing is
    injected, so its weights are all 1: the same run)."""
    out = {}
    for s in map(planned, sorted((Path(folder) / "settings").glob("seed*_faulty*.json"))):
        rows = dict(s["rows"])
        if s["faulty"] == 0 and "xid" in rows:
            rows.setdefault("oracle", rows["xid"])
        out.setdefault(s["faulty"], {})[s["seed"]] = rows
    return out


MARGIN = 0.02  # "not worse": the one-sided bound (Claim.not_worse_level) must stay above -2 points (PLAN.md)
CEILING = 0.97  # a baseline at or above 97% leaves no room for a gain: that endpoint is untestable here
FLOOR = CHANCE + 0.03  # both sides within 3 points of chance: nothing learnt to compare


@dataclass(frozen=True)
class Claim:
    """'A > B' (or 'A >= B' with at_least) over the plan's seeds. `a` and `b` give each side's value on
    (settings, seed, metric), None when missing. paired: the two sides share a warm-up per seed, so
    the test is on the per-seed differences; else (sides from different warm-ups) Welch's unpaired
    t-test. `baseline` gives the value whose ceiling makes a gain untestable (default: B itself;
    None: no ceiling applies); `floor`: the values that, all near chance, make it untestable."""

    name: str
    text: str
    seeds: tuple
    a: object
    b: object
    at_least: bool = False
    paired: bool = True
    baseline: object = "b"
    floor: tuple = ()
    group: str = ""  # its group of seeds (SEEDS), whose planning bound and power its verdict quotes
    # a claim sized on its own (the rerun, lab/claims_rerun.py), in place of its group's: (((endpoint, planning SD
    # bound), ...) for each endpoint its sizing measured, power at 15 seeds where 15 could not power it else None,
    # the effect 15 seeds find where capped else None)
    sized: tuple = None
    # 'A >= B': the one-sided confidence of the bound held against -MARGIN. PLAN.md's 0.95 (the first run);
    # RERUN_PLAN.md's amendment 1: 0.975, the lower end of the two-sided 95% interval its VERDICT.md prints
    not_worse_level: float = 0.95

    def sides(self, res, metric):
        """(A's values, B's values) over the plan's seeds where both are present."""
        pairs = [(self.a(res, s, metric), self.b(res, s, metric)) for s in self.seeds]
        pairs = [(x, y) for x, y in pairs if x is not None and y is not None]
        return [x for x, _ in pairs], [y for _, y in pairs]

    def base(self, res, metric):
        fn = self.b if self.baseline == "b" else self.baseline
        if fn is None:
            return []
        return [v for v in (fn(res, s, metric) for s in self.seeds) if v is not None]

    def at_floor(self, res, metric):
        """Every side this claim compares averages within 3 points of chance (PLAN.md, verdict rules)."""
        fns = self.floor or (self.a, self.b)
        values = [[x for x in (fn(res, s, metric) for s in self.seeds) if x is not None] for fn in fns]
        return all(v and mean(v) < FLOOR for v in values)


def at(level, method):
    """One method's value at one level (a settings key), for a seed and metric."""

    def value(res, seed, metric):
        try:
            return res[level][seed][method][metric]
        except KeyError:
            return None

    value.arms = ((level, method),)  # the branches it reads: what a plan must train (lab/claims_rerun.py)
    return value


def gain(level, method, base):
    """method - base at one level, same seed (one warm-up)."""
    a, b = at(level, method), at(level, base)

    def value(res, seed, metric):
        x, y = a(res, seed, metric), b(res, seed, metric)
        return None if x is None or y is None else x - y

    value.arms = a.arms + b.arms
    return value


def seeds(group):
    return tuple(range(FIRST_SEED, FIRST_SEED + SEEDS.get(group, 5)))


def diff_claim(name, text, group, level_a, a, level_b, b, **kw):
    return Claim(name, text, seeds(group), at(level_a, a), at(level_b, b), group=group, **kw)


# PLAN.md's claims, each once: the paper's Fig. 7, Table 1 and Table 2 claims and the faulty-negative claims
# (N1-N4 of the earlier plan) where they name the same comparison under one name.
CLAIMS = [
    # F1 compares two warm-ups (0% and 50%) per seed: nothing pairs them, so Welch's test
    diff_claim(
        "F1", "xID falls with noise: xID(0%) - xID(50%) > 0", "F1", 0.0, "xid", 0.5, "xid", paired=False, baseline=None
    ),
    diff_claim("F2", "Oracle > xID at high noise: Oracle - xID at 50%", "50%", 0.5, "oracle", 0.5, "xid"),
    diff_claim("F3a", "Weighted > xID at 50% (Table 2 at 50%)", "50%", 0.5, "weighted", 0.5, "xid"),
    # the gains are paired within a warm-up, the two levels are not
    Claim(
        "F3b",
        "Weighted's gain over xID grows with noise: gain(50%) - gain(0%)",
        seeds("F3b"),
        gain(0.5, "weighted", "xid"),
        gain(0.0, "weighted", "xid"),
        paired=False,
        baseline=at(0.0, "xid"),
        floor=(at(0.5, "weighted"), at(0.5, "xid")),
        group="F3b",
    ),
    diff_claim(
        "F4", "Weighted > Oracle at low noise: at 0% Oracle is xID (Table 2 at 0%)", "0%", 0.0, "weighted", 0.0, "xid"
    ),
    diff_claim("T1a", "Soft-xID with oracle targets > xID at 0%", "0%", 0.0, "soft:oracle", 0.0, "xid"),
    diff_claim("T1b", "Soft-xID with CCP targets > xID at 0% (Table 2's Soft at 0%)", "0%", 0.0, "soft", 0.0, "xid"),
    *(
        diff_claim(f"N2 {n}", f"Soft-xID with {n} targets > xID at 0%", "0%", 0.0, f"soft:{m}", 0.0, "xid")
        for n, m in (("bootstrap", "bootstrap"), ("neighbour", "neighbor"), ("swapped", "swapped"))
    ),
    *(
        diff_claim(f"T1c {n}", f"CCP > {n} targets at 0%", "0%", 0.0, "soft", 0.0, f"soft:{m}")
        for n, m in (("bootstrap", "bootstrap"), ("neighbour", "neighbor"), ("swapped", "swapped"))
    ),
    *(
        diff_claim(f"N3 {n}", f"{n} > bootstrap targets at 0%", "0%", 0.0, f"soft:{m}", 0.0, "soft:bootstrap")
        for n, m in (("neighbour", "neighbor"), ("swapped", "swapped"))
    ),
    diff_claim("T2b 50%", "Soft-xID (CCP) > xID at 50%", "50%", 0.5, "soft", 0.5, "xid"),
]
for level in (0.0, 0.5):
    pct = f"{level:.0%}"
    CLAIMS += [
        diff_claim(f"T2c {pct}", f"Robust-xID > xID at {pct}", pct, level, "robust", level, "xid"),
        diff_claim(f"T2d {pct}", f"Robust-xID > Weighted-xID at {pct}", pct, level, "robust", level, "weighted"),
        diff_claim(f"T2e {pct}", f"Robust-xID > Soft-xID at {pct}", pct, level, "robust", level, "soft"),
    ]
SWEEP = ("delta", 0.5), ("lambda", 0.5)  # the sweeps' settings keys, beside the levels
SWEEP_CLAIMS = [  # PLAN.md's S1 and S2; S3 (the best lambda) is read off sweeps.md, not judged
    *(
        diff_claim(
            f"S1 delta {v}",
            f"delta = {v} not worse than the paper's rule (delta 0) at 50%",
            "S1",
            SWEEP[0],
            v,
            SWEEP[0],
            "known",
            at_least=True,
        )
        for v in ("-2", "-1", "1")
    ),
    *(
        diff_claim(f"S2 lambda {v}", f"lambda 0.5 > lambda {v} at 50% (CCP)", "50%", SWEEP[1], "0.5", SWEEP[1], v)
        for v in ("0.9", "1")
    ),
]
FIVE = tuple(range(FIRST_SEED, FIRST_SEED + FIG7_ONLY))
REPORTED = [  # shown with their intervals, not judged (PLAN.md)
    Claim("F2 at 25%", "Oracle - xID at 25%", FIVE, at(0.25, "oracle"), at(0.25, "xid")),
    Claim("F2 at 75%", "Oracle - xID at 75%", FIVE, at(0.75, "oracle"), at(0.75, "xid")),
    Claim("F3 at 25%", "Weighted - xID at 25%", FIVE, at(0.25, "weighted"), at(0.25, "xid")),
    Claim("F3 at 75%", "Weighted - xID at 75%", FIVE, at(0.75, "weighted"), at(0.75, "xid")),
    Claim("F4 at 25%", "Weighted - Oracle at 25%", FIVE, at(0.25, "weighted"), at(0.25, "oracle")),
]


@dataclass(frozen=True)
class Run:
    """One claims run as its report reads it: the judged claims, the sweeps' claims, the rows reported but
    not judged, its plan's file (beside its settings), the code it ran on (as the README says it), Table 2's
    levels, and whether each row of a table has its own seeds (the rerun sizes each branch on its own)."""

    claims: list
    sweeps: list
    reported: list
    plan: str = "PLAN.md"
    code: str = (
        "run on the code before the faster epoch (0756166), not today's (lab/results/HISTORY.md says how it differs)"
    )
    table2: tuple = (0.0, 0.5)
    per_row: bool = False
    command: str = "python -m lab.claims report --run first"  # the command that remakes its report, as its files say


FIRST_RUN = Run(CLAIMS, SWEEP_CLAIMS, REPORTED)  # the first claims run, seeds 400-414 (lab/results/claims/PLAN.md)
