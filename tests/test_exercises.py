"""The exercises' checker (exercises/check.py): the reference solutions pass, an untouched student file
says what is left, and a wrong piece is caught with a message that says how it differs, whether it answers
in tensors, NumPy arrays or lists; in a handout, the library's pieces are graded against stored answers.

exercises/student.py itself is the student's: these tests never read it, so the suite passes whether it is
untouched, half done or finished (and ruff and tools/references.py leave it alone too). The untouched
file is made here, as it ships: each function of solutions.py with its signature, raising NotImplementedError."""

import inspect
import sys
import types

import pytest
import torch

from exercises import check, solutions


def untouched_module():
    """A module like the shipped exercises/student.py: every exercise's function, not done yet."""
    module = types.ModuleType("untouched_student")
    for fn_name in (ex.function for ex in check.EXERCISES.values()):
        params = list(inspect.signature(getattr(solutions, fn_name)).parameters)
        source = f"def {fn_name}({', '.join(params)}):\n    raise NotImplementedError('{fn_name}')\n"
        exec(source, module.__dict__)
    return module


def test_the_reference_solutions_match_the_library():
    report = check.run("exercises.solutions", list(check.EXERCISES))
    assert report == {name: [] for name in check.EXERCISES}
    assert check.main(["--solutions"]) == 0


def test_the_untouched_student_file_says_each_exercise_is_not_done(monkeypatch):
    monkeypatch.setitem(sys.modules, "untouched_student", untouched_module())
    report = check.run("untouched_student", list(check.EXERCISES))
    assert all(p == ["not done yet (it still raises NotImplementedError)"] for p in report.values())
    assert check.main([], student="untouched_student") == 1


def test_a_finished_student_file_passes(monkeypatch):
    """A student who wrote the reference's code: the checker says so, and exits 0."""
    monkeypatch.setitem(sys.modules, "finished_student", solutions)
    assert check.main([], student="finished_student") == 0


def test_a_wrong_piece_is_caught_and_the_message_says_how_it_differs(monkeypatch):
    wrong = types.ModuleType("wrong")
    wrong.sample_weights = lambda s, mu, sigma, delta, kappa, w_min: solutions.sample_weights(
        s, mu, sigma, delta, kappa, 0.25
    )
    wrong.ccp_similarity = lambda vbar, abar, tau_s, tau_t: solutions.ccp_similarity(vbar, abar, tau_t, tau_s)
    wrong.ema_rows = lambda rows, f, momentum: solutions.ema_rows(rows, f, 1 - momentum)
    wrong.xid_video_gradient = lambda v, abar, tau: solutions.xid_video_gradient(v, abar, tau)[:, :-1]
    monkeypatch.setitem(sys.modules, "wrong", wrong)
    report = check.run("wrong", list(check.EXERCISES))
    assert any("w_min=0.1" in p and "differs by up to" in p for p in report["weights"])  # the ignored w_min shows
    assert report["targets"] and all("tau_s=" in p for p in report["targets"])  # the temperatures swapped
    assert report["ema"] == ["the batch's rows after one update at momentum 0.9: " + report["ema"][0].split(": ", 1)[1]]
    assert report["gradient"][0].startswith("dL/dv at tau=0.07: shape (6, 15), expected (6, 16)")


def test_weights_that_divide_by_a_zero_sigma_are_caught_as_not_finite(monkeypatch):
    """The stated edge case: a bank whose scores are all equal (sigma = 0) must give finite weights."""
    naive = types.ModuleType("naive_student")
    naive.sample_weights = lambda s, mu, sigma, delta, kappa, w_min: (
        w_min + (1 - w_min) * torch.special.ndtr((torch.as_tensor(s) - mu - delta * sigma) / (sigma * kappa**0.5))
    )
    monkeypatch.setitem(sys.modules, "naive_student", naive)
    assert check.run("naive_student", ["weights"]) == {
        "weights": ["eq. (6) at sigma=0 (all scores equal): holds NaN or inf"]
    }


def test_each_exercise_has_the_contract_of_the_library_piece_a_handout_blanks():
    """One contract in both copies: the repository's student.py function has the name and arguments of the
    library function a handout's student writes (the gradient, which no library function holds, aside)."""
    import losses
    import memory_bank

    for name, module in (("weights", losses), ("targets", losses), ("ema", memory_bank)):
        fn = check.EXERCISES[name].function
        library = list(inspect.signature(getattr(module, fn)).parameters)
        assert list(inspect.signature(getattr(solutions, fn)).parameters) == library, name
        assert check.in_the_handout(name, "exercises.solutions") is getattr(module, fn)


def test_unknown_exercise_names_fail_loudly(capsys):
    with pytest.raises(SystemExit):
        check.main(["softmax"])
    assert "unknown exercise 'softmax'" in capsys.readouterr().err


def test_array_like_answers_are_compared_by_value(monkeypatch):
    """A student who works in NumPy or returns lists: a right answer matches, a wrong one says how far off."""
    as_numpy = types.ModuleType("numpy_student")
    as_numpy.sample_weights = lambda *args: solutions.sample_weights(*args).numpy()
    as_numpy.ccp_similarity = lambda *args: tuple(t.numpy() for t in solutions.ccp_similarity(*args))
    as_numpy.ema_rows = lambda *args: solutions.ema_rows(*args).tolist()
    as_numpy.xid_video_gradient = lambda *args: solutions.xid_video_gradient(*args).double().numpy()
    monkeypatch.setitem(sys.modules, "numpy_student", as_numpy)
    assert check.main([], student="numpy_student") == 0
    as_numpy.sample_weights = lambda *args: solutions.sample_weights(*args).numpy() + 0.01
    as_numpy.ema_rows = lambda *args: "the bank"
    report = check.run("numpy_student", ["weights", "ema"])
    assert all("differs by up to 0.01" in p for p in report["weights"])
    assert report["ema"][0].endswith("expected a tensor or an array of shape (6, 16), got str")


def test_in_a_handout_the_library_is_graded_against_the_stored_answers(monkeypatch, tmp_path):
    """A handout (exercises/handout.py) stores the full library's answers; the checker then grades the
    library's own pieces against them, and the gradient in the student's module. A wrong eq. (6) in
    losses.py is caught there, where it would pass against a reference computed from it."""
    import losses

    stored = tmp_path / "reference_values.pt"
    torch.save(check.reference_values(), stored)
    monkeypatch.setattr(check, "REFERENCE_VALUES", stored)
    monkeypatch.setitem(sys.modules, "finished_student", solutions)
    assert check.main([], student="finished_student") == 0
    right = losses.sample_weights
    monkeypatch.setattr(losses, "sample_weights", lambda s, mu, sigma, delta, kappa, w_min: right(s, mu, sigma, delta))
    report = check.run("finished_student", list(check.EXERCISES))
    assert any("w_min=0.1: differs by up to" in p for p in report["weights"])
    assert [n for n, problems in report.items() if problems] == ["weights"]
    with pytest.raises(SystemExit):
        check.main(["--solutions"])  # a handout holds none
