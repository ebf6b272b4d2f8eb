"""The scan at dataset size: the same manifest with any number of processes, and a stopped scan that
resumes without probing a file twice (its journal, ROOT/manifest.csv.partial, written as it goes)."""

import io
import os
import subprocess
import sys

from test_data import make_bad_folder
from tools import scan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def many(tmp_path, files, n=12):
    """A folder of n good videos (copies) and the bad ones of test_data, in class folders."""
    root = make_bad_folder(tmp_path / "set", files)
    for k in range(n):
        (root / f"copy{k:02d}.mp4").write_bytes((root / "good.mp4").read_bytes())
    return root


def test_two_processes_give_the_manifest_and_the_reports_of_one(tmp_path, files):
    root = many(tmp_path, files)
    one, two = io.StringIO(), io.StringIO()
    rows1 = scan.scan(root, out=one, jobs=1, progress=False)
    rows2 = scan.scan(root, out=two, jobs=2, progress=False)
    assert rows1 == rows2 and len(rows1) == 13
    assert one.getvalue() == two.getvalue() and one.getvalue().count("unusable:") == 5


def test_a_stopped_scan_resumes_without_probing_a_file_twice(tmp_path, files, monkeypatch):
    root = many(tmp_path, files)
    journal = tmp_path / "m.csv.partial"
    everything = sorted(p for p in root.iterdir() if p.suffix == ".mp4")
    scan.scan(root, files=everything[:7], jobs=1, journal=journal, progress=False)  # stopped after 7
    with open(journal, "a") as f:
        f.write('["copy1')  # and killed in the middle of the next line
    probed = []
    real = scan.probe
    monkeypatch.setattr(scan, "probe", lambda path, *a: probed.append(os.path.basename(path)) or real(path, *a))
    rows = scan.scan(root, jobs=1, journal=journal, out=io.StringIO(), progress=False)
    assert sorted(probed) == sorted(p.name for p in everything[7:])  # the rest, each once
    assert rows == scan.scan(root, jobs=1, out=io.StringIO(), progress=False)  # as a scan in one go
    os.utime(everything[0], ns=(1, 1))  # a file changed since: probed again
    probed.clear()
    scan.scan(root, jobs=1, journal=journal, out=io.StringIO(), progress=False)
    assert probed == [everything[0].name]


def test_the_cli_writes_the_manifest_and_removes_its_journal(tmp_path, files):
    root = many(tmp_path, files, n=3)
    res = subprocess.run(
        [sys.executable, "-m", "tools.scan", str(root), "--jobs", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "4 usable videos" in res.stdout and "file/s" in res.stderr or "s/file" in res.stderr  # tqdm's rate
    assert (root / "manifest.csv").exists() and not (root / "manifest.csv.partial").exists()
    res = subprocess.run(
        [sys.executable, "-m", "tools.scan", str(tmp_path / "nowhere")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode != 0 and "dataset folder not found" in res.stderr and "Traceback" not in res.stderr
