"""lab/handout_size.py counts what an entry point imports at any depth (tests aside), what make demo adds beyond
train.py's and evaluate.py's closures, the imports a reader cannot follow and the top-level entries (the
flat-handout plan's targets, lab/RESTRUCTURE.md)."""

import subprocess

from lab import handout_size


def tree(root, files):
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "."], cwd=root, check=True)


def test_a_closure_follows_imports_at_any_depth_and_in_functions_but_never_into_tests(tmp_path):
    tree(
        tmp_path,
        {
            "train.py": "import model\nfrom pkg import deep\n\ndef f():\n    from . import late\n",
            "model.py": "x = 1\n",
            "pkg/__init__.py": "",
            "pkg/deep.py": "from .inner import y\nimport tests.helper\n",
            "pkg/inner.py": "y = 2\nz = 3\n",
            "late.py": "import importlib\n",
            "tests/helper.py": "import model\n" * 50,
            "evaluate.py": "import model\n",
            "demo.py": "import train\nimport evaluate\nimport extra\n",
            "extra.py": "a = 1\nb = 2\n",
            "Makefile": "demo: venv\n\t$(PY) demo.py --fresh\n",
            ".ci/run": "make test\n",
        },
    )
    c = handout_size.counts(tmp_path)
    t = c["train.py"]
    assert t["files"] == 6 and t["in_folders"] == ["pkg/__init__.py", "pkg/deep.py", "pkg/inner.py"]
    assert t["lines"] == 5 + 1 + 0 + 2 + 2 + 1  # train, model, pkg/__init__, deep, inner, late
    demo = c["make demo"]
    assert demo["entry"] == "demo.py" and demo["adds_files"] == 2 and demo["adds_lines"] == 3 + 2
    assert c["dynamic imports"] == ["late.py:1"]
    assert c["top-level entries"] == [
        "Makefile",
        "demo.py",
        "evaluate.py",
        "extra.py",
        "late.py",
        "model.py",
        "pkg",
        "tests",
        "train.py",
    ]  # .ci aside
    assert "NOT MET" in handout_size.report(c)  # pkg/ is a folder in train.py's closure


def test_the_make_demo_entry_is_the_module_the_makefiles_rule_runs():
    assert handout_size.demo_entry(handout_size.ROOT) == "demo.py"
