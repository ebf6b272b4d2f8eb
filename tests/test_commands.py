"""The README's and the TOUR's commands, in miniature, in a fresh clone of the tree: each runs, and
afterwards `git status` is clean (runs write under runs/ and data/, which are ignored; only the
commands that remake the committed evidence write tracked files, and they write them unchanged).

Slow (a few minutes): `make test-all` runs it."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "TOUR.md")
# tiny sizes for the demo preset: the same code paths, seconds instead of minutes
SMALL = ["--size", "32", "--n-mels", "16", "--n-time", "16", "--width", "0.125", "--batch-size", "8"]


def clone_of_the_tree(dest: Path) -> Path:
    """The tracked files as they are now (committed or not), committed in a fresh repository."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    for rel in files.stdout.split("\0"):
        if rel and (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], cwd=dest, check=True)
    return dest


def commands(tmp: Path) -> list[list[str]]:
    """Every documented command, made small; /tmp/ of the TOUR is `tmp`."""
    tour, run = str(tmp / "tour"), str(tmp / "tour_run")
    data = "data/synth_mini"
    demo_small = ["--warmup-epochs", "1", "--epochs", "1", "--trials", "2", "--no-figures", *SMALL]
    return [
        # TOUR.md, steps 1-9 and the exercises
        ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_memory_bank.py"],
        ["-m", "tools.bench", "model", "--preset", "demo", "--batch", "4", "--steps", "1"],
        [
            "-m",
            "tools.synthetic",
            "--out",
            tour,
            "--classes",
            "4",
            "--train-per-class",
            "8",
            "--test-per-class",
            "3",
            "--pool",
            "0",
            "--workers",
            "1",
        ],
        [
            "-c",
            "import data, config; ds = data.build_train_set(config.parse_config(['--preset', 'demo', '--data', "
            f"'{tour}', '--faulty-fraction', '0.5', '--num-negatives', '31', '--no-preload'])); "
            "print(int(ds.injected.sum()), 'injected')",
        ],
        [
            "train.py",
            "--preset",
            "demo",
            "--data",
            tour,
            "--batch-size",
            "8",
            "--num-negatives",
            "31",
            "--warmup-epochs",
            "1",
            "--epochs",
            "1",
            "--loss",
            "robust",
            "--faulty-fraction",
            "0.5",
            "--out",
            run,
            *SMALL,
        ],
        ["evaluate.py", "retrieval", f"{run}/ckpt.pt", "--workers", "0"],
        ["-m", "analysis.figures", run],
        ["-m", "exercises.check", "--solutions"],
        [
            "-m",
            "experiments.demo",
            "--seeds",
            "0",
            "--data",
            tour,
            "--methods",
            "xid",
            "weighted",
            "--num-negatives",
            "31",
            *demo_small,
        ],
        # README.md: the manual run, make demo's line, real datasets (on the small set), the claims' report
        [
            "-m",
            "tools.synthetic",
            "--out",
            data,
            "--classes",
            "3",
            "--train-per-class",
            "6",
            "--test-per-class",
            "2",
            "--pool",
            "0",
            "--workers",
            "1",
        ],
        [
            "train.py",
            "--preset",
            "demo",
            "--data",
            data,
            "--faulty-fraction",
            "0.5",
            "--warmup-epochs",
            "1",
            "--epochs",
            "0",
            "--num-negatives",
            "15",
            "--out",
            "runs/manual/warmup",
            *SMALL,
        ],
        [
            "train.py",
            "--preset",
            "demo",
            "--data",
            data,
            "--faulty-fraction",
            "0.5",
            "--init",
            "runs/manual/warmup/ckpt.pt",
            "--warmup-epochs",
            "0",
            "--epochs",
            "1",
            "--loss",
            "weighted",
            "--delta",
            "0",
            "--num-negatives",
            "15",
            "--out",
            "runs/manual/weighted",
            *SMALL,
        ],
        ["evaluate.py", "retrieval", "runs/manual/weighted/ckpt.pt"],
        ["evaluate.py", "fewshot", "runs/manual/weighted/ckpt.pt", "--trials", "2"],
        ["evaluate.py", "finetune", "runs/manual/weighted/ckpt.pt", "--finetune-epochs", "1", "--finetune-batch", "6"],
        ["-m", "analysis.figures", "runs/manual"],
        [
            "-m",
            "experiments.demo",
            "--fresh",
            "--runs",
            "runs/make_demo",
            "--results",
            "runs/make_demo",
            "--compare",
            "results/demo.json",
            "--data",
            data,
            "--num-negatives",
            "15",
            *demo_small,
        ],
        ["-m", "tools.prepare", data, "data/mini_prepared", "--workers", "1"],
        ["-m", "media.manifest", "scan", "data/mini_prepared", "--out", "data/mini_prepared/manifest.csv"],
        ["-m", "experiments.claims", "report"],
        ["-m", "experiments.negatives", "report"],
    ]


def documented_programs() -> set[str]:
    """What the docs' code blocks run: `-m MODULE` or a script's name, per python command line."""
    out = set()
    for doc in DOCS:
        blocks = re.findall(r"```bash\n(.*?)```", (ROOT / doc).read_text(), re.S)
        for line in "\n".join(blocks).splitlines():
            m = re.match(r"\s*(?:\.venv/bin/)?python\s+(-m\s+\S+|-c|\S+)", line)
            if m:
                out.add(m.group(1).replace("-m ", "").strip())
    return out


def test_every_documented_program_is_in_the_miniature():
    ran = {c[1] if c[0] == "-m" else c[0] for c in commands(Path("/tmp"))}
    assert documented_programs() - ran == set()


@pytest.mark.slow
def test_the_documented_commands_run_and_leave_a_clone_clean(tmp_path):
    clone = clone_of_the_tree(tmp_path / "clone")
    (tmp_path / "tmp").mkdir()
    for cmd in commands(tmp_path / "tmp"):
        res = subprocess.run([sys.executable, *cmd], cwd=clone, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, (cmd, res.stdout[-2000:], res.stderr[-3000:])
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
    assert status == "", status
