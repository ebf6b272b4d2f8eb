"""A teacher's handout: a copy of the project for a class, in which the exercises' pieces of the method are
blank and the solutions left out, so that what the tour sends students to read no longer holds the answers,
while the checker and the tests grade what they write. TOUR.md, "Exercises".

    python -m exercises.handout OUT_DIR        # OUT_DIR new (or empty), outside this repository

What OUT_DIR holds, against the repository (its tracked files, committed or not):
  - losses.sample_weights (exercise 1, eq. (6)), losses.ccp_similarity (exercise 2, eqs. (13)-(14)) and
    memory_bank.ema_rows (exercise 3, Sec. 3) raise NotImplementedError, with the exercise's
    instructions as their docstrings (exercises/student.py's, the same contract); their imports stay.
  - exercises/student.py holds exercise 4 alone (eqs. (3)-(4)): training leaves the gradient to
    autograd, so no library function holds it.
  - exercises/solutions.py is left out. exercises/reference_values.pt holds the checker's inputs and
    the full library's answers, against which `python -m exercises.check` grades the library.
  - tests/test_exercises.py asserts that every piece matches; TOUR.md's "Exercises" and the
    miniatures of tests/test_commands.py say the same. tests/test_paper_reference.py (the equations
    again in plain Python) is left out, and the tests of STRIPPED, whose expected values compute a piece
    in code, are dropped: no code in the copy computes a piece but the student's.
  - a fresh git repository with every file staged, as tools/references.py reads `git ls-files`.

Until the students have written exercises 1-3, training with weights or CCP targets fails, as do
the tests of those pieces: they are what grades them. Tests: tests/test_handout.py
"""

import argparse
import ast
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

from exercises import check

ROOT = Path(__file__).resolve().parents[1]
# tests/test_paper_reference.py writes eqs. (6), (13)-(14) and (15) out again in plain Python: an answer key
LEFT_OUT = {"exercises/solutions.py", "tests/test_paper_reference.py"}

# tests whose expected values compute a piece in code (the gradient's forces, CCP's softmax, the EMA):
# the copy drops them, and the checker grades those pieces instead
STRIPPED = {
    "tests/test_losses.py": [
        "test_soft_xid_gradient_matches_the_analytic_forces",
        "test_soft_strategies_are_the_paper_posteriors",
    ],
    "tests/test_memory_bank.py": [
        "test_update_is_the_normalised_ema_and_touches_only_the_batch",
    ],
    "tests/test_wiring.py": [
        "test_train_step_takes_the_loss_from_the_old_memory_then_updates_the_bank_once",
    ],
}

# (file, function, exercise name, the function's docstring in the handout: the exercise's instructions)
BLANKS = [
    (
        "losses.py",
        "sample_weights",
        "weights",
        """Exercise 1 (TOUR.md, "Exercises"), eq. (6): the weights of Weighted-xID,
        w_i = t_{w_min}(C_N(s_i; mu + delta sigma, kappa sigma^2)), where C_N is the CDF of a normal with
        that mean and variance and t_{w_min}(x) = w_min + (1 - w_min) x keeps low-score (likely faulty)
        positives at w_min > 0. `scores` (B,) are bank scores vbar_i . abar_i; mu, sigma (floats or 0-d
        tensors) their mean and standard deviation over the whole bank. -> weights (B,), float32, in
        [w_min, 1], rising with the score. A bank whose scores are all equal has sigma = 0: keep the
        result finite there. Hint: torch.special.ndtr. Check: python -m exercises.check weights""",
    ),
    (
        "losses.py",
        "ccp_similarity",
        "targets",
        """Exercise 2 (TOUR.md, "Exercises"), eqs. (13)-(14): CCP's softening scores, which soft_targets
        mixes with the one-hot target into T = (1 - lam) onehot(0) + lam S (eqs. (8)-(9)). vbar, abar
        (B, 1+K, D) are the bank targets of each sample's candidates, column 0 the sample itself.
        S_v(j|i) is a softmax over j of vbar_i.abar_i / tau_t + abar_i.vbar_j / tau_s + vbar_j.abar_j / tau_t,
        and S_a(j|i) the same with abar_i.vbar_j replaced by vbar_i.abar_j.
        -> (S_v, S_a), each (B, 1+K), rows summing to 1. Check: python -m exercises.check targets""",
    ),
    (
        "memory_bank.py",
        "ema_rows",
        "ema",
        """Exercise 3 (TOUR.md, "Exercises"), the memory bank's update (Sec. 3, AVID): the new memory
        of each row of the batch, m_i <- normalize(momentum m_i + (1 - momentum) f_i), of unit length.
        rows (the memories m_i of the batch's slots), features (the encoder outputs f_i): (B, D) -> (B, D);
        MemoryBank.update writes them back into the bank. Check: python -m exercises.check ema""",
    ),
]

STUDENT = '''"""Exercise 4 of the tour (TOUR.md, "Exercises"). Exercises 1-3 are blank in the library itself, where
training calls them: losses.sample_weights, losses.ccp_similarity and memory_bank.ema_rows. Training leaves
the gradient to autograd, so this one is written here. Replace each `raise` by your code, then check:

    python -m exercises.check            # all four; or: python -m exercises.check gradient
"""
'''

TOUR_EXERCISES = """Four pieces of the method, to write yourself from the paper. Three are blank in the library, where
training calls them, with what each receives and returns in its docstring; the fourth, which training
leaves to autograd, is in `exercises/student.py`. One command compares your versions with the answers
the full library gave when this copy was made, and says what differs (shape, or how far off and where):

```bash
python -m exercises.check                 # all four
python -m exercises.check weights         # one: weights | targets | ema | gradient
```

{table}

Until pieces 1-3 are written, training with weights or soft targets stops at them, and so do their
tests: `tests/test_exercises.py` passes once every piece matches.

"""

TOUR_TABLE = [  # TOUR.md's table of the exercises, as the handout's pieces are
    ("#", "name", "the piece", "equation", "checks you can make by hand"),
    (
        "1",
        "`weights`",
        "`losses.sample_weights`: the weights of Weighted-xID",
        "eq. (6)",
        "every weight lies in [w_min, 1] and rises with the score; at s = mu + delta sigma it is (1 + w_min) / 2",
    ),
    (
        "2",
        "`targets`",
        "`losses.ccp_similarity`: the softening scores of Robust-xID's targets",
        "eqs. (13)-(14)",
        "rows sum to 1; the term vbar_i.abar_i / tau_t is the same for every j and cancels",
    ),
    (
        "3",
        "`ema`",
        "`memory_bank.ema_rows`: the bank's update",
        "Sec. 3 (AVID)",
        "unit rows; momentum 1 changes nothing",
    ),
    (
        "4",
        "`gradient`",
        "`xid_video_gradient` in `exercises/student.py`: dL/dv of xID, by hand",
        "eqs. (3)-(4)",
        "zero when P puts all mass on the positive",
    ),
]


def tour_exercises():
    """TOUR.md's "Exercises" section in the handout."""
    rows = [TOUR_TABLE[0], ("---",) * 5, *TOUR_TABLE[1:]]
    return TOUR_EXERCISES.format(table="\n".join("| " + " | ".join(r) + " |" for r in rows))


def blank(source, function, instructions, exercise):
    """`source` with `function`'s body replaced by its instructions and a NotImplementedError. The imports
    its body used stay, for the student's answer (the copy's pyproject.toml lets them go unused until then)."""
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    lines = source.splitlines(keepends=True)
    pad = " " * (node.col_offset + 4)
    doc = textwrap.indent(textwrap.dedent("        " + instructions).strip() + '"""', pad).lstrip()
    todo = f"exercise {exercise[0]}: write it from its docstring, then python -m exercises.check {exercise[1]}"
    body = [f'{pad}"""{doc}\n', f'{pad}raise NotImplementedError("{todo}")\n']
    start, end = node.body[0].lineno - 1, node.end_lineno
    return "".join(lines[:start] + body + lines[end:])


def _names(tree):
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _drop_unused_imports(source, used_before):
    tree = ast.parse(source)
    used, lines = _names(tree), source.splitlines(keepends=True)
    for node in reversed(tree.body):
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound = {(a.asname or a.name).split(".")[0] for a in node.names}
            if bound <= used_before and not bound & used:
                del lines[node.lineno - 1 : node.end_lineno]
    return "".join(lines)


def strip(source, names):
    """`source` without the top-level functions `names` (their decorators and the blank lines after them
    included); the imports only they used go with them."""
    tree = ast.parse(source)
    nodes = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    if len(nodes) != len(names):
        raise SystemExit(f"exercises/handout.py: not every one of {names} is a test any more; update the handout")
    lines = source.splitlines(keepends=True)
    for node in sorted(nodes, key=lambda n: n.lineno, reverse=True):
        start, end = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1, node.end_lineno
        while end < len(lines) and not lines[end].strip():
            end += 1
        del lines[start:end]
    return _drop_unused_imports("".join(lines).rstrip() + "\n", used_before=_names(tree))


def student_file():
    """exercises/student.py with exercise 4 alone, its body blank whatever the repository's file holds."""
    source = (ROOT / "exercises/student.py").read_text()
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "xid_video_gradient")
    stub = f"def {node.name}({', '.join(a.arg for a in node.args.args)}):\n    pass\n"
    return (
        STUDENT
        + "\n\n"
        + blank(stub, node.name, ast.get_docstring(node), (check.EXERCISES["gradient"].number, "gradient"))
    )


def replace(text, old, new, where):
    """`text` with `old` replaced by `new`; an `old` that moved is an error, so that a handout never ships a
    file whose repository version it did not understand."""
    if old not in text or old.startswith("#"):
        raise SystemExit(f"exercises/handout.py: {where} no longer holds {old[:60]!r}; update the handout")
    return text.replace(old, new, 1)


def section(text, heading):
    """The body of the Markdown section `heading` (a line of its own), up to the next heading of its level;
    the heading itself where the section is missing or last (replace then says it moved)."""
    start = text.find(heading + "\n") + len(heading) + 1
    end = text.find(f"\n{heading.split()[0]} ", start)
    return text[start : end + 1] if start > len(heading) and end >= 0 else heading


def edits():
    """{path: its text in the handout} for every file the handout changes."""
    out = {f: (ROOT / f).read_text() for f in {b[0] for b in BLANKS}}
    for file, function, name, instructions in BLANKS:
        out[file] = blank(out[file], function, instructions, (check.EXERCISES[name].number, name))
    out["exercises/student.py"] = student_file()
    for file, names in STRIPPED.items():
        out[file] = strip((ROOT / file).read_text(), names)
    tour = (ROOT / "TOUR.md").read_text()
    tour = replace(tour, section(tour, "## Exercises"), "\n" + tour_exercises(), "TOUR.md")
    # the documents' references to what the copy drops go too; spelt in pieces, as tools/references.py
    # would read a whole one here as a reference of this file's own
    forces = "`tests/test_losses.py::" + STRIPPED["tests/test_losses.py"][0] + "`"
    out["TOUR.md"] = replace(tour, forces, 'exercise 4 (see "Exercises")', "TOUR.md")
    tests_readme = (ROOT / "tests/README.md").read_text()
    key = "| `{}` |".format(Path(next(f for f in LEFT_OUT if f.startswith("tests/"))).name)
    row = next((line for line in tests_readme.splitlines(True) if line.startswith(key)), key)
    out["tests/README.md"] = replace(tests_readme, row, "", "tests/README.md")
    commands = (ROOT / "tests/test_commands.py").read_text()
    for old, new in (  # the solutions' check becomes the students'; a handout is not made from a handout
        ('["-m", "exercises.check", "--solutions"],', '["-m", "exercises.check"],'),
        ('        ["-m", "exercises.handout", str(tmp / "handout")],\n', ""),
    ):
        commands = replace(commands, old, new, "tests/test_commands.py")
    out["tests/test_commands.py"] = commands
    out["tests/test_exercises.py"] = TEST_EXERCISES
    pyproject, ignores = (ROOT / "pyproject.toml").read_text(), "[tool.ruff.lint.per-file-ignores]\n"
    blanked = sorted({b[0] for b in BLANKS})
    unused = "".join(f'"{f}" = ["F401"]  # a blank keeps the imports its answer needs\n' for f in blanked)
    out["pyproject.toml"] = replace(pyproject, ignores, ignores + unused, "pyproject.toml")
    return out


TEST_EXERCISES = '''"""The students' pieces of the method (TOUR.md, "Exercises"), graded by exercises/check.py against
the answers the full library gave when this handout was made: each test fails until its piece is written.
`python -m exercises.check NAME` says how a piece differs."""

import pytest

from exercises import check


@pytest.mark.parametrize("name", list(check.EXERCISES))
def test_the_piece_matches_the_full_librarys_answers(name):
    assert check.run("exercises.student", [name]) == {name: []}
'''


def tracked():
    """The repository's tracked files (committed or not): what a clone holds."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise SystemExit(f"exercises/handout.py: the handout is copied from a git checkout's files ({err})") from err
    return [f for f in out.split("\0") if f and (ROOT / f).is_file()]


def make(out):
    """Write the handout into `out` (new or empty, outside the repository); returns the files changed."""
    out = Path(out).resolve()
    if check.REFERENCE_VALUES.exists():
        raise SystemExit("exercises/handout.py: this is a handout already; make one from the repository")
    if out == ROOT or ROOT in out.parents:
        raise SystemExit(f"exercises/handout.py: {out} is inside the repository; give a folder outside it")
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"exercises/handout.py: {out} is not empty; give a new folder")
    changed = edits()  # first, so that a moved anchor leaves nothing half written
    for rel in tracked():
        if rel not in LEFT_OUT:
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, out / rel)
    for rel, text in changed.items():
        (out / rel).write_text(text)
    torch.save(check.reference_values(), out / check.REFERENCE_VALUES.relative_to(ROOT))
    for git in (["git", "init", "-q"], ["git", "add", "-A"]):
        subprocess.run(git, cwd=out, check=True, capture_output=True)
    return sorted(changed) + [str(check.REFERENCE_VALUES.relative_to(ROOT))]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m exercises.handout", description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir", help="where the handout goes: a new (or empty) folder outside this repository")
    args = p.parse_args(argv)
    changed = make(args.out_dir)
    print(f"handout in {args.out_dir}: left out {', '.join(sorted(LEFT_OUT))}; changed {', '.join(changed)}")
    print(f"next: cd {args.out_dir} && git commit -m handout, then hand it out; its checker: python -m exercises.check")


if __name__ == "__main__":
    sys.exit(main())
