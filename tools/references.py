"""Dead references in the tracked tree: links, repository paths and named sections that no longer exist.

Three kinds are checked, in every tracked Markdown file and in the docstrings and comments of every
tracked Python file (and the Makefile and the settings files):

  links     [text](path#anchor) in Markdown: the path exists (relative to the file), and the anchor
            is a heading of the target, by GitHub's rule for heading anchors
  paths     in backticks: `media/decode.py`, `lab/results/claims/` and tests/test_tour.py::NAME
            exist when their first part is a tracked top-level entry (and the test NAME with them);
            a bare `decode.py` or `HISTORY.md` is the name of some tracked file; `losses.xid_loss`
            and `media.decode.SWSCALE_THREADS` are defined where they say. Paths under folders the
            tree does not track (runs/, data/, /tmp, OUT/, ROOT/...) are what a run writes, not
            checked; a path that left the tree may be named in a file that names a commit holding
            it (lab/results/HISTORY.md: "at commit 2ae1052")
  sections  README, "Two commands" / BENCHMARKS.md's "Data loading": the document has a heading
            that starts with the quoted words

    python -m tools.references          # prints each dead reference as FILE:LINE: what; exit 1 if any
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = (".md", ".py", ".cfg", ".ini", ".toml", ".txt")
CHECKED_EXTENSIONS = (".py", ".md", ".png", ".json", ".jsonl", ".log", ".csv", ".cfg", ".ini", ".toml", ".txt")
PLANTED = {"tests/test_documents.py"}  # plants dead references on purpose, to show they are found
BARE_EXTENSIONS = (".py", ".md", ".cfg", ".ini", ".toml")  # a bare name of these must be some tracked file
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
BACKTICKED = re.compile(r"`([^`\n]+)`")
SECTION = re.compile(r"\b(README|[\w/.-]+\.md)(?:'s)?,?[ \t]*\n?[ \t]*#?[ \t]*\"([A-Za-z`][^\"\n]*)\"")
COMMIT = re.compile(r"\b[0-9a-f]{7,40}\b")


STUDENT = "exercises/student.py"  # the student's own text, in whatever state they left it


def tracked(root: Path = ROOT) -> list[str]:
    """The repository's tracked files, as paths relative to the root."""
    out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if (root / p).is_file()]


def headings(text: str) -> list[str]:
    """Markdown headings outside code fences."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            out.append(line.lstrip("#").strip())
    return out


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for h in headings(text):
        a = anchor(h)
        out.add(a if a not in seen else f"{a}-{seen[a]}")
        seen[a] = seen.get(a, 0) + 1
    return out


def prose(path: str, text: str) -> str:
    """What a reader reads as words: all of a document; a Python file's comments and strings (its
    docstrings among them), code blanked out, line numbers kept."""
    if not path.endswith(".py"):
        return text
    import io
    import tokenize

    lines = [""] * (text.count("\n") + 2)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING):
            (r0, c0) = tok.start
            for k, part in enumerate(tok.string.split("\n")):
                row = r0 + k
                lines[row - 1] = lines[row - 1] + " " * max(0, (c0 if k == 0 else 0) - len(lines[row - 1])) + part
    return "\n".join(lines)


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def check_links(path: str, text: str, root: Path) -> list[str]:
    problems = []
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file, _, frag = target.partition("#")
        dest = (root / path).parent / file if file else root / path
        where = f"{path}:{_line(text, m.start())}"
        if not dest.exists():
            problems.append(f"{where}: link to a missing file: {target}")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest.read_text()):
            problems.append(f"{where}: link to a missing heading: {target}")
    return problems


def check_paths(path: str, text: str, root: Path, files: list[str]) -> list[str]:
    top = {p.split("/")[0] for p in files}
    commits = set(COMMIT.findall(text))  # where a path that has left the tree can still be found
    names = {Path(p).name for p in files}
    problems = []
    for m in BACKTICKED.finditer(text):
        for token in m.group(1).split():
            token = token.strip("(),;:'\"").rstrip(".")
            ref, _, test = token.partition("::")
            if re.fullmatch(r"[a-z_]\w*(\.[A-Za-z_]\w*)+(\(\))?", ref) and not ref.endswith(
                CHECKED_EXTENSIONS + (".pt",)
            ):  # module.name, room.module.name
                problem = check_name(ref.removesuffix("()"), root, files)
                if problem:
                    problems.append(f"{path}:{_line(text, m.start())}: {problem}")
                continue
            if not re.fullmatch(r"[\w.-]+(/[\w.-]*)*", ref) or not any(c.isalpha() for c in ref):
                continue
            where = f"{path}:{_line(text, m.start())}"
            if "/" in ref:
                if ref.split("/")[0] not in top or not (ref.endswith("/") or ref.endswith(CHECKED_EXTENSIONS)):
                    continue
                if not (root / ref).exists() and not in_history(root, ref, commits):
                    problems.append(f"{where}: missing path `{token}`")
                elif test and not re.search(rf"^def {re.escape(test)}\(", (root / ref).read_text(), re.M):
                    problems.append(f"{where}: `{ref}` has no function {test}")
            elif ref.endswith(BARE_EXTENSIONS) and ref not in names:
                problems.append(f"{where}: no tracked file is named `{ref}`")
    return problems


def check_name(dotted: str, root: Path, files: list[str]) -> str | None:
    """`losses.xid_loss`, `media.decode.SWSCALE_THREADS`, `demo.paper_delta`, `MemoryBank.scores`: when
    the first part names a module of the tree, each later part must be defined in it (a def, a class,
    or an assignment). Other dotted words (torch.nn, cfg.delta) are not the tree's and pass."""
    parts = dotted.split(".")
    module = None
    for k in range(len(parts) - 1, 0, -1):  # the longest prefix that is a tracked module
        rel = "/".join(parts[:k]) + ".py"
        if rel in files:
            module, rest = rel, parts[k:]
            break
    if module is None:
        by_name = [p for p in files if Path(p).name == parts[0] + ".py" and not p.startswith("tests/")]
        if len(by_name) != 1:
            return None
        module, rest = by_name[0], parts[1:]
    text = (root / module).read_text()
    for name in rest:
        if not re.search(
            rf"^\s*(def|class)\s+{name}\b|^\s*{name}\s*[:=]|^\s*self\.{name}\b|\bself\.{name}\s*[:=]", text, re.M
        ):
            return f"`{dotted}`: {module} defines no {name}"
    return None


def in_history(root: Path, ref: str, commits: set[str]) -> bool:
    """Whether one of `commits` holds the path `ref` (git cat-file -e COMMIT:PATH). A named commit this
    clone does not have (a shallow clone, as CI's may be, or a class's handout, which starts a repository
    of its own) cannot be checked, and is taken on trust."""
    for commit in sorted(commits):
        res = subprocess.run(["git", "cat-file", "-e", f"{commit}:{ref.rstrip('/')}"], cwd=root, capture_output=True)
        if res.returncode == 0:
            return True
        known = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=root, capture_output=True)
        if known.returncode != 0 and re.fullmatch(r"[0-9a-f]{7,40}", commit) and _without_history(root):
            return True
    return False


def _without_history(root: Path) -> bool:
    """A shallow clone, or a handout (exercises/handout.py, which stores the checker's answers there)."""
    if (root / "exercises" / "reference_values.pt").exists():
        return True
    out = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=root, capture_output=True, text=True)
    return out.stdout.strip() == "true"


def check_sections(path: str, text: str, root: Path, files: list[str]) -> list[str]:
    problems = []
    docs = {Path(p).name: p for p in files if p.endswith(".md")}
    for m in SECTION.finditer(text):
        doc, section = m.group(1), m.group(2)
        doc = "README.md" if doc == "README" else doc
        target = doc if "/" in doc or (root / doc).is_file() else docs.get(doc)  # a bare name: the root's first
        where = f"{path}:{_line(text, m.start())}"
        if target is None or not (root / target).is_file():
            problems.append(f'{where}: section "{section}" of a missing document {doc}')
            continue
        if not any(h.lower().startswith(section.lower()) for h in headings((root / target).read_text())):
            problems.append(f'{where}: {target} has no section "{section}"')
    return problems


def dead_references(root: Path = ROOT, files: list[str] | None = None) -> list[str]:
    """Every dead link, path and section reference in the tracked text files, as 'FILE:LINE: what'."""
    files = tracked(root) if files is None else files
    problems = []
    for path in files:
        if path in PLANTED or path == STUDENT or path.startswith("lab/results/claims/settings"):
            continue
        if not (path.endswith(TEXT_SUFFIXES) or path == "Makefile"):
            continue
        text = prose(path, (root / path).read_text())
        if path.endswith(".md"):
            problems += check_links(path, text, root)
        problems += check_paths(path, text, root, files)
        problems += check_sections(path, text, root, files)
    return problems


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tools.references", description=__doc__.split("\n\n")[0])
    p.parse_args(argv)  # no options: --help says what it checks
    problems = dead_references()
    print("\n".join(problems) or "no dead references")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
