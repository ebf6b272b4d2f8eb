"""A teacher's handout (exercises/handout.py): the copy leaves out the solutions and blanks each exercise's
piece where the library holds it, the rest unchanged; its checker and its tests say "not done" for the
blanks and pass once the solutions are filled back in; its docs hold no dead reference and it lints clean.
A few tests of the copy, not its whole suite: seconds. In a handout itself these are skipped (nothing to
make one from)."""

import ast
import io
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from exercises import check, handout
from tools import references

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(check.REFERENCE_VALUES.exists(), reason="a handout: no solutions to make one from")

# the handout's tests of the pieces: its test_exercises.py (the checker), and library tests that use them
GRADED = [
    "tests/test_exercises.py",
    "tests/test_losses.py::test_weights_lie_in_range_and_rise_with_the_score",
    "tests/test_losses.py::test_ccp_prefers_negatives_that_correspond_well",
]

# each piece computed in code (comments and strings aside): the pieces' own arithmetic, as the solutions,
# the library and the full repository's tests write it (found there by the last test)
ANSWERS = {
    "weights": r"\bndtr\b|\berf\b|\bnormal_cdf\b",  # eq. (6)'s normal CDF
    "targets": r"/ tau_t\b",  # CCP's correspondence terms, eqs. (13)-(14)
    "ema": r"1 - momentum|momentum \*|0\.5 \* \w+ (\[ \w+ \] )?\+ 0\.5 \*",  # the EMA's mix
    "gradient": r"- P_[vaVA]\b|\( expected - abar",  # eqs. (3)-(4), as the solution or the forces write it
}

# exercise 4's answer written out in words or symbols, as a docstring, comment or document might state it
GRADIENT_IN_TEXT = (
    r"sum_j[ ]P_j|P_j[ ](abar|ā)_j|T_[va]\(j\|i\) ?- ?P|1 - P\((abar|ā)_i|(abar|ā)_i - sum_j|- (abar|ā)_i\) ?/ ?tau"
)


def gradient_stated_in(root):
    """The .py and .md files under `root` whose text (docstrings, comments and documents included) writes
    out the gradient of eqs. (3)-(4)."""
    paths = [p for p in sorted(root.rglob("*")) if p.suffix in (".py", ".md") and not {".git", ".venv"} & set(p.parts)]
    return [str(p.relative_to(root)) for p in paths if re.search(GRADIENT_IN_TEXT, p.read_text())]


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    out = tmp_path_factory.mktemp("handout") / "class"
    handout.main([str(out)])
    return out


def grade(copy):
    """The copy's checker, then its tests of the pieces, in one process (one start-up of torch): exit status
    10 x the checker's + the tests'."""
    script = (
        "import sys, pytest; from exercises import check; "
        "sys.exit(10 * check.main([]) + pytest.main(['-q', '-p', 'no:cacheprovider', *sys.argv[1:]]))"
    )
    return subprocess.run(
        [sys.executable, "-c", script, *GRADED], cwd=copy, capture_output=True, text=True, timeout=600
    )


def functions(path):
    return {n.name: n for n in ast.parse(Path(path).read_text()).body if isinstance(n, ast.FunctionDef | ast.ClassDef)}


def body_statements(path, name):
    """The source of each statement of `name`'s body in `path`, its docstring left out."""
    text = Path(path).read_text()
    node = functions(path)[name]
    return [ast.get_source_segment(text, s) for s in node.body if not isinstance(s, ast.Expr)]


def code(path):
    """A Python file's code alone, tokens joined by spaces: its comments and strings (docstrings, which
    state the equations, as the paper does) left out."""
    tokens = tokenize.generate_tokens(io.StringIO(Path(path).read_text()).readline)
    return " ".join(t.string for t in tokens if t.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER))


def answers_in(root):
    """{file: the exercises whose piece it computes in code} over the Python files under `root`."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        if not {".git", ".venv"} & set(path.relative_to(root).parts):
            text = code(path)
            hits = [name for name, pattern in ANSWERS.items() if re.search(pattern, text)]
            if hits:
                found[str(path.relative_to(root))] = hits
    return found


def test_the_copy_leaves_out_the_solutions_and_blanks_only_the_exercised_pieces(copy):
    assert not (copy / "exercises/solutions.py").exists() and (copy / "exercises/handout.py").exists()
    blanked = {}
    for file, name, _, _ in handout.BLANKS:
        blanked.setdefault(file, set()).add(name)
    for file, names in blanked.items():
        mine, theirs = functions(ROOT / file), functions(copy / file)
        assert set(mine) == set(theirs)
        for name in mine:
            if name in names:  # the same signature; a body that only raises
                assert ast.dump(mine[name].args) == ast.dump(theirs[name].args)
                assert [type(s) for s in theirs[name].body] == [ast.Expr, ast.Raise]
            else:
                assert ast.dump(mine[name]) == ast.dump(theirs[name]), name
    assert set(functions(copy / "exercises/student.py")) == {"xid_video_gradient"}
    # no solution's code anywhere a student reads (the tests keep their own checks of the pieces); a line
    # the rest of its file shares, as the soft targets' `vbar_i, abar_i = ...`, gives nothing away
    answers = [
        s
        for file, name, _, _ in handout.BLANKS
        for s in body_statements(ROOT / file, name)
        if (ROOT / file).read_text().count(s) == 1
    ]
    answers += body_statements(ROOT / "exercises/solutions.py", "xid_video_gradient")
    assert len(answers) >= 8
    read = [
        p for p in copy.rglob("*") if p.suffix in (".py", ".md") and "tests" not in p.parts and ".git" not in p.parts
    ]
    assert [(str(p), a) for p in read for a in answers if a in p.read_text()] == []
    # nor any code, the tests' included, that computes a piece: the answer key and the tests whose expected
    # values do are out of the copy
    assert answers_in(copy) == {}
    for file, names in handout.STRIPPED.items():
        assert set(names) <= set(functions(ROOT / file)) and not set(names) & set(functions(copy / file))
    # the worked example of testing a gradient stays whole: gradcheck of eq. (17) for every method
    gradients = (ROOT / "tests/test_gradients.py").read_text()
    assert (copy / "tests/test_gradients.py").read_text() == gradients and "torch.autograd.gradcheck" in gradients


def test_no_docstring_comment_or_document_of_the_copy_states_exercise_4s_gradient(copy):
    assert gradient_stated_in(copy) == []
    # the pattern can fail: the repository's solution and the analytic test the copy strips write it out
    assert {"exercises/solutions.py", "tests/test_losses.py"} <= set(gradient_stated_in(ROOT))


def test_the_answer_patterns_find_every_piece_where_the_repository_computes_it():
    """The patterns of the test above can fail: in the full repository they find each piece in its
    solution, in the library, and in the tests the handout leaves out or strips."""
    found = answers_in(ROOT)
    assert set(found["exercises/solutions.py"]) == set(ANSWERS)
    assert {"weights", "targets", "gradient"} <= set(found["tests/test_paper_reference.py"])
    assert {"targets", "gradient"} <= set(found["tests/test_losses.py"])
    assert "ema" in found["tests/test_memory_bank.py"] and "ema" in found["tests/test_wiring.py"]
    assert {"weights", "targets"} <= set(found["losses.py"]) and "ema" in found["memory_bank.py"]


def test_the_copys_documents_hold_no_dead_reference_and_it_lints_clean(copy):
    files = subprocess.run(["git", "ls-files"], cwd=copy, capture_output=True, text=True, check=True).stdout.split()
    assert "exercises/solutions.py" not in files and "exercises/reference_values.pt" in files
    assert references.dead_references(copy, files) == []
    ruff = Path(sys.executable).with_name("ruff")
    if ruff.exists():
        for args in (["check", "."], ["format", "--check", "."]):
            res = subprocess.run([ruff, *args], cwd=copy, capture_output=True, text=True)
            assert res.returncode == 0, res.stdout


def test_the_copy_grades_the_blanks_as_not_done_and_the_solutions_filled_in_as_matching(copy, tmp_path):
    res = grade(copy)
    assert res.returncode == 11, res.stdout[-3000:]  # the checker fails (1), and so do the tests (1)
    for name, ex in check.EXERCISES.items():
        assert f"exercise {ex.number} ({name}): DIFFERS\n    not done yet (it still raises" in res.stdout
    assert "6 failed" in res.stdout

    filled = tmp_path / "filled"  # the copy with the library's pieces and the solution of exercise 4 written in
    shutil.copytree(copy, filled)
    for file in {b[0] for b in handout.BLANKS}:
        shutil.copy(ROOT / file, filled / file)
    solutions = ROOT / "exercises/solutions.py"
    solution = ast.get_source_segment(solutions.read_text(), functions(solutions)["xid_video_gradient"])
    student = (filled / "exercises/student.py").read_text()
    student = student[: student.index("def xid_video_gradient")] + "import torch\n\n\n" + solution + "\n"
    (filled / "exercises/student.py").write_text(student)
    res = grade(filled)
    assert res.returncode == 0, res.stdout[-3000:]
    assert all(
        f"exercise {ex.number} ({name}): matches the reference" in res.stdout for name, ex in check.EXERCISES.items()
    )
    assert "6 passed" in res.stdout


def test_a_handout_is_made_only_into_a_new_folder_outside_the_repository(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    for out, said in ((tmp_path / "full", "is not empty"), (ROOT / "runs" / "handout", "inside the repository")):
        with pytest.raises(SystemExit, match=said):
            handout.make(out)
    assert not (ROOT / "runs" / "handout").exists()
