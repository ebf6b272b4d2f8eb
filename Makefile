# robust-xid: `make test` runs the tests, `make demo` the end-to-end demo. Both create .venv first
# (torch, torchvision, torchaudio, PyAV, ... from requirements.txt, about 5 GB) when it is missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: test lint format test-all mutation demo gpu-check venv clean

# The stamp .venv/.installed holds requirements.txt's checksum: the venv is updated in place when the file's
# content changes, not when a checkout only makes it newer (a fresh clone's). An empty stamp, which the rule
# before this one wrote, is taken as made from the requirements of now.
REQUIREMENTS := $(shell cksum < requirements.txt)
STAMP := $(VENV)/.installed
# pytest-xdist workers of `make test`: one per core of a 2-core CI machine; each test file stays in one worker.
TEST_WORKERS ?= 2

venv:
	@if [ -f $(STAMP) ] && [ ! -s $(STAMP) ]; then echo "$(REQUIREMENTS)" > $(STAMP); fi
	@if [ "$$(cat $(STAMP) 2>/dev/null)" != "$(REQUIREMENTS)" ]; then \
		set -e; \
		test -x $(PY) || $(PYTHON) -m venv $(VENV); \
		$(PY) -m pip install --quiet --upgrade pip; \
		$(PY) -m pip install --quiet -r requirements.txt; \
		echo "$(REQUIREMENTS)" > $(STAMP); \
	fi

# The default suite (what .ci/run calls): lint and format checks (ruff, pyproject.toml), then the tests,
# CPU-only, in two pytest-xdist workers: about 7 minutes on 2 cores, 10.5 in one process (CI allows 15, set-up
# included: the 15 slowest tests are listed at the end, the candidates for `slow`). `make format` rewrites the
# files the way the check wants them.
test: venv lint
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=15 tests

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Also the tests marked slow.
test-all: venv
	$(PY) -m pytest -q -m "" tests

# Mutation testing of the method and its wiring (tests/README.md; not part of CI, minutes).
mutation: venv
	$(PY) -m pip install --quiet mutmut==3.8.1
	rm -rf mutants
	OMP_NUM_THREADS=1 $(VENV)/bin/mutmut run "losses.*" "memory_bank.*" "train.x_objective__*" "train.x_train_step__*"; \
	$(VENV)/bin/mutmut results

# The main job: synthetic data, an xID warm-up, then xID / Weighted / Soft / Robust / Oracle-xID from it,
# evaluation (demo.py; its regime: demo.py's DemoArgs). It writes only
# runs/make_demo/ (its table: runs/make_demo/demo.md) and prints it beside the committed lab/results/demo.json;
# tracked files and other experiments' runs are left as they are.
demo: venv
	$(PY) demo.py --fresh --runs runs/make_demo --results runs/make_demo --compare lab/results/demo.json

# The GPU path end to end (lab/gpu_check.py). It remakes the committed lab/results/gpu.md: with the claims'
# commands (lab/claims.py), the only ones that write tracked files. Uses .venv when there is one, else the
# machine's own python3 (a GPU box with torch but no internet: OPERATIONS.md, "On a GPU").
GPU_PYTHON ?= $(if $(wildcard $(PY)),$(PY),$(PYTHON))
gpu-check:
	$(GPU_PYTHON) -m lab.gpu_check --out lab/results/gpu.md

# Only what the project generates: the synthetic sets under data/ (each holds synthetic.py's marker),
# make demo's runs/make_demo, and caches. A folder of data/ without the marker (a dataset of yours) and
# runs/ otherwise (your training runs, e.g. the README's runs/k400) stay.
clean:
	@for d in data/*/; do \
		if [ -f "$$d.robust_xid_synthetic" ]; then rm -rf "$$d" && echo "removed $$d (a synthetic set)"; fi; \
	done
	rm -rf runs/make_demo .pytest_cache .ruff_cache mutants
	find . -path ./.venv -prune -o -name __pycache__ -type d -exec rm -rf {} +
	@echo "kept: runs/ other than runs/make_demo, and every folder of data/ that synthetic.py did not make"
