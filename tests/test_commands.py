"""The commands of the README, the TOUR, OPERATIONS.md and lab/README.md, in miniature, in a fresh clone of
the tree: each runs, and afterwards `git status` is clean (runs write under runs/ and data/, which are ignored; only the
commands that remake the committed evidence write tracked files, and they write them unchanged). Every
documented program has its miniature (a fast test); running them is slow (a few minutes): `make test-all`."""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ucf_layout

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "TOUR.md", "lab/OPERATIONS.md", "lab/README.md")
# Documented commands with no miniature, and why. Each of the others runs in the slow test.
NOT_RUN = {
    "make test": "the suite itself; CI runs it (.ci/run)",
    "pip": "OPERATIONS.md's offline PyAV wheel for a GPU machine: a download, then an install from it",
}
# Documented commands whose miniature runs what they run
SAME_AS = {"make demo": "demo.py", "make gpu-check": "lab.gpu_check"}
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
    """Every documented command, made small; /tmp/ of the TOUR is `tmp`; `tmp`/ucf101 a UCF101 layout."""
    tour, run = str(tmp / "tour"), str(tmp / "tour_run")
    data = "data/synth_mini"
    ucf, ucf_eval = str(tmp / "ucf101"), ["--data", "data/ucf_prepared", "--layout", "ucf101", "--clips", "2"]
    demo_small = ["--warmup-epochs", "1", "--epochs", "1", "--trials", "2", "--no-figures", *SMALL]
    return [
        # TOUR.md, steps 1-9 and the exercises
        ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_memory_bank.py"],
        ["-m", "lab.bench", "model", "--preset", "demo", "--batch", "4", "--steps", "1"],
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
            f"'{tour}', '--faulty-fraction', '0.5', '--num-negatives', '31', '--preload', 'off'])); "
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
        ["-m", "tools.analyse", "analysis", f"{run}/ckpt.pt", "--workers", "0"],
        ["-m", "tools.figures", run],
        ["-m", "exercises.check", "--solutions"],
        ["-m", "exercises.handout", str(tmp / "handout")],
        [
            "demo.py",
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
            "--clips-per-source",
            "2",
            "--source-pitch",
            "own",
            "--audio-codec",
            "flac",
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
        ["-m", "tools.figures", "runs/manual"],
        [
            "demo.py",
            "--fresh",
            "--runs",
            "runs/make_demo",
            "--results",
            "runs/make_demo",
            "--compare",
            "lab/results/demo.json",
            "--data",
            data,
            "--num-negatives",
            "15",
            *demo_small,
        ],
        # TOUR.md, step 9: a sweep from make demo's runs (its warm-up and default branch reused)
        ["-m", "lab.sweep", "lambda", "--values", "0.3", "0.5", "--faulty", "0.25", "--seeds", "0"]
        + ["--runs", "runs/make_demo", "--results", "runs/lam03", "--data", data, "--warmup-epochs", "1"]
        + ["--epochs", "1", "--trials", "2", "--num-negatives", "15", *SMALL],
        # TOUR.md, step 9: the modify-and-rerun off make demo's warm-up
        ["-m", "tools.rerun", "--lam", "0.3", "--data", data, "--warmup-epochs", "1", "--epochs", "1", "--trials", "2"]
        + ["--num-negatives", "15", *SMALL],
        # README.md: the earlier regime's demo (width 0.25, 4 frames at 4 fps), in miniature
        [
            "demo.py",
            "--data",
            data,
            "--eval-clips",
            "10",
            "--runs",
            "runs/demo2000",
            "--results",
            "runs/demo2000",
            "--num-negatives",
            "15",
            *demo_small,
            "--width",
            "0.25",
            "--frames",
            "4",
            "--fps",
            "4",
        ],
        ["-m", "tools.prepare", data, "data/mini_prepared", "--workers", "1"],
        # README: the sota line under torchrun (OPERATIONS.md's, on one node); OPERATIONS.md's UCF101: prepare, folds,
        # fine-tune, the report, the features and the scikit-learn lines that read them
        [
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=1",
            "train.py",
            "--preset",
            "demo",
            "--data",
            "data/mini_prepared",
            "--warmup-epochs",
            "1",
            "--epochs",
            "0",
            "--num-negatives",
            "15",
            "--out",
            "runs/sota_mini",
            *SMALL,
        ],
        ["-m", "tools.prepare", ucf, "data/ucf_prepared", "--workers", "1"],
        ["evaluate.py", "retrieval", "runs/manual/weighted/ckpt.pt", *ucf_eval, "--fold", "1", "2", "3"],
        ["evaluate.py", "finetune", "runs/manual/weighted/ckpt.pt", *ucf_eval, "--finetune-epochs", "1"],
        ["-m", "tools.analyse", "report", "runs/manual/weighted/ckpt.pt"],
        ["-m", "tools.analyse", "features", "runs/manual/weighted/ckpt.pt", *ucf_eval, "--out", "runs/ucf1.npz"],
        ["-c", features_python().replace("ucf1.npz", "runs/ucf1.npz")],
        ["-m", "lab.gpu_check", "--out", "lab/results/gpu.md"],  # make gpu-check: on a CPU, one line and no file
        ["-m", "lab.claims", "report"],
    ]


def features_python() -> str:
    """OPERATIONS.md's Python lines (the features' scikit-learn example)."""
    return re.search(r"```python\n(.*?)```", (ROOT / "lab" / "OPERATIONS.md").read_text(), re.S).group(1)


def program(line: str) -> str:
    """What a documented command line runs: MODULE of `python -m MODULE`, a script's name, `-c`, `pip`,
    `torchrun SCRIPT` or `make TARGET`."""
    words = line.split()
    if words[0].endswith("torchrun"):
        return "torchrun " + next(w for w in words if w.endswith(".py"))
    if words[0] == "make":
        return f"make {words[1]}"
    if words[1:3] == ["-m", "pip"]:
        return "pip"
    return words[2] if words[1] == "-m" else words[1]


def documented_commands() -> list[str]:
    """Every command line of the docs' bash blocks, continuation lines joined, comments left out."""
    out = []
    for doc in DOCS:
        for block in re.findall(r"```bash\n(.*?)```", (ROOT / doc).read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                if line.split("#")[0].strip():
                    out.append(line.split("#")[0].strip())
    return out


def miniature_program(cmd: list[str]) -> str:
    if cmd[:2] == ["-m", "torch.distributed.run"]:
        return "torchrun " + next(w for w in cmd if w.endswith(".py"))
    return cmd[1] if cmd[0] == "-m" else cmd[0]


def test_every_documented_program_is_in_the_miniature():
    documented = {SAME_AS.get(p, p) for p in map(program, documented_commands())}
    assert {"torchrun train.py", "pip", "make test", "lab.gpu_check"} <= documented  # the parser sees them
    ran = {miniature_program(c) for c in commands(Path("/tmp"))}
    assert documented - ran - set(NOT_RUN) == set()


def test_every_torchrun_in_the_docs_is_the_venvs():
    """A bare `torchrun` is the machine's, without this project's packages: every documented one is
    .venv/bin/torchrun (README, OPERATIONS.md, TOUR, the modules' docstrings)."""
    files = subprocess.run(["git", "ls-files", "*.md", "*.py"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    # in a document, any use with options; in a module, a command line of its docstring
    used = {".md": r"(?<![/\w])torchrun --", ".py": r"\s*torchrun --"}
    bare = [
        f"{f}:{n}"
        for f in files
        if not f.startswith(("lab/results/", "tests/"))  # what gpu_check recorded; the tests' own runs
        for n, line in enumerate((ROOT / f).read_text().splitlines(), 1)
        if (re.search if f.endswith(".md") else re.match)(used[f[-3:]], line)
    ]
    assert bare == []
    assert [c for c in documented_commands() if c.startswith("torchrun")] == []


def test_make_clean_removes_only_what_the_project_generates_and_says_so(tmp_path):
    """The synthetic sets (synthetic.py's marker in them), runs/make_demo and caches go; a dataset of the
    user's under data/ and the training runs under runs/ (the README's runs/k400) stay."""
    from tools.synthetic import MARKER

    shutil.copy(ROOT / "Makefile", tmp_path)
    for folder in ("data/synth_src2p", "data/mine", "runs/make_demo", "runs/k400", "media/__pycache__"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "f").write_text("x")
    (tmp_path / "data/synth_src2p" / MARKER).write_text("made by synthetic.py")
    res = subprocess.run(["make", "clean"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("f"))
    assert left == ["data/mine/f", "runs/k400/f"] and not (tmp_path / "media" / "__pycache__").exists()
    assert "removed data/synth_src2p/ (a synthetic set)" in res.stdout and "kept: runs/" in res.stdout


@pytest.mark.slow
def test_the_documented_commands_run_and_leave_a_clone_clean(tmp_path):
    clone = clone_of_the_tree(tmp_path / "clone")
    (tmp_path / "tmp").mkdir()
    ucf_layout(tmp_path / "tmp" / "ucf101")
    for cmd in commands(tmp_path / "tmp"):
        res = subprocess.run([sys.executable, *cmd], cwd=clone, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, (cmd, res.stdout[-2000:], res.stderr[-3000:])
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
    assert status == "", status


def test_the_venv_is_rebuilt_when_requirements_change_not_when_a_checkout_makes_them_newer(tmp_path):
    """make venv compares requirements.txt's checksum with the stamp's: a newer file of the same content (a fresh
    clone's checkout) installs nothing, other content installs, and an empty stamp of the older rule is kept."""
    shutil.copy(ROOT / "Makefile", tmp_path)
    (tmp_path / "requirements.txt").write_text("torch\n")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    log = tmp_path / "pip.log"
    (bin_dir / "python").write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    (bin_dir / "python").chmod(0o755)

    def installs():
        res = subprocess.run(["make", "-s", "venv"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        return log.read_text().count("install --quiet -r requirements.txt") if log.exists() else 0

    assert installs() == 1  # no stamp: installed
    os.utime(tmp_path / "requirements.txt", (time.time() + 60, time.time() + 60))  # a checkout: newer, the same
    assert installs() == 1
    (tmp_path / "requirements.txt").write_text("torch\nnumpy\n")
    assert installs() == 2
    (tmp_path / ".venv" / ".installed").write_text("")  # the older rule's stamp
    assert installs() == 2 and (tmp_path / ".venv" / ".installed").read_text().strip()
