"""The screens' merged results files: the many small records of one screen kept as one file, with
nothing of the separate files lost.

- A keyed JSON, {"made_by": the command, "note": where its entries came from, "entries": {key: record}},
  holds a series of records: one demo.py's demo.json per run, one per-epoch series per seed.
- A log or a Markdown file holds sections, each under a line `==> NAME <==` (as `tail` heads several
  files) naming the file it was, then a blank line, the file's text and a blank line (so that Markdown
  ends a table before the next header); the text before the first section says what the file is.

No command: the screens' modules (lab/screens/) read and write through it.
"""

import json
import re
from pathlib import Path

HEADER = re.compile(r"^==> (.+) <==$", re.M)


def entries(path):
    """{key: record} of a keyed JSON; empty when there is none yet."""
    path = Path(path)
    return json.loads(path.read_text())["entries"] if path.exists() else {}


def put(path, key, record, made_by, note=""):
    """Adds or replaces one record of a keyed JSON (the others, and their order, kept)."""
    path = Path(path)
    whole = json.loads(path.read_text()) if path.exists() else {"made_by": made_by, "note": note, "entries": {}}
    whole["made_by"], whole["note"] = made_by, note or whole.get("note", "")
    whole["entries"][key] = record
    path.write_text(json.dumps(whole, indent=1, ensure_ascii=False) + "\n")


def sections(path):
    """(the text before the first section, {name: text}) of a log or Markdown file in sections."""
    path = Path(path)
    if not path.exists():
        return "", {}
    parts = HEADER.split(path.read_text())  # [preface, name, text, name, text, ...]
    return parts[0], {n: t.removeprefix("\n\n").removesuffix("\n") for n, t in zip(parts[1::2], parts[2::2])}


def put_section(path, name, text, preface=""):
    """Adds or replaces the section `name` (the others, and their order, kept); `preface` replaces the
    text before the first section when given."""
    before, found = sections(path)
    found[name] = text if text.endswith("\n") else text + "\n"
    body = "".join(f"==> {n} <==\n\n{t}\n" for n, t in found.items())
    head = (preface or before).rstrip("\n")
    Path(path).write_text((head + "\n\n" if head else "") + body)


def fold_demo(folder, key, into, made_by, note=""):
    """demo.py's demo.json and demo.md in `folder` (as it leaves them beside demo_settings/)
    moved into `into`/demos.json's entry and demos.md's section `key`; False when there is none."""
    folder, into = Path(folder), Path(into)
    if not (folder / "demo.json").exists():
        return False
    put(into / "demos.json", key, json.loads((folder / "demo.json").read_text()), made_by, note)
    (folder / "demo.json").unlink()
    if (folder / "demo.md").exists():
        put_section(into / "demos.md", f"{key}/demo.md", (folder / "demo.md").read_text())
        (folder / "demo.md").unlink()
    return True
