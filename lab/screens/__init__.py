"""The screens' scripts: the runs and the collectors of the smaller studies whose evidence sits under
lab/results/ (the branch-length screen, the faults screen, the weak-bank drift, F3b's longer warm-ups, the
faster epoch's equivalence and probes). Each module's docstring says what it made and the command that
runs it, from the repository root; the files it writes name that command.

| module | lab/results/ |
|---|---|
| ccp_drift | ccp_drift/: RESULTS.md, epochs.json, demos.json and demos.md |
| demo_screen | demo_screen/: demos.json and demos.md (run), RESULTS.md (verdict) |
| epoch_equivalence, epoch_branches | epoch_speed/: EQUIVALENCE.md, BRANCHES.md, from demos.json |
| overlap_probe | epoch_speed/timings.log's overlap_probe.log section |
| f3b_warmup | f3b_warmup/branches.json |
| faults_screen | faults_screen/a.json |
| merged | the format of the merged files above (keyed JSON, logs in sections) |
"""


def help_asked(doc: str) -> None:
    """`--help` or `-h` anywhere on the command line: the module's docstring, exit 0, nothing run or written
    (the screens take positional words, so argparse would not see the flag)."""
    import sys

    if {"-h", "--help"} & set(sys.argv[1:]):
        name = sys.argv[0].rsplit("/", 1)[-1].removesuffix(".py")
        print(f"usage: python -m lab.screens.{name} ... (the commands below)\n\n{doc}")
        raise SystemExit(0)
