# Two commands do all the set-up: `make demo` and `make test`.
# Both create .venv from pyproject.toml + constraints.txt when it is missing or older than
# those files, with nothing but the public package index: `make demo` installs the core
# package, `make test` adds the test extra (torch, transformers, pytest, ruff, rouge).
# PYTHON picks the interpreter (3.11 to 3.13: TensorFlow 2.21 and tensorflow-text publish
# no wheels for 3.14). PIP_ARGS goes to every pip install, e.g. an index of CPU-only
# torch wheels: PyPI's torch for Linux x86-64 is the CUDA build (several GB).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
PIP_ARGS ?=
VENV := .venv
BIN := $(VENV)/bin
CORE := $(VENV)/.installed-core
TESTS := $(VENV)/.installed-test
DEMO_DIR ?= demo_run

.PHONY: demo test test-slow lint format lock check-public-install clean

$(CORE): pyproject.toml constraints.txt setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -c 'import sys; v = sys.version_info[:2]; sys.exit(None if (3, 11) <= v <= (3, 13) else "cmrcx needs Python 3.11 to 3.13, not %d.%d: make clean, then make PYTHON=python3.12 ..." % v)'
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(PIP_ARGS) -c constraints.txt -e .
	touch $@

$(TESTS): $(CORE)
	$(BIN)/python -m pip install --quiet $(PIP_ARGS) -c constraints.txt -e '.[test]'
	touch $@

demo: $(CORE)
	rm -rf $(DEMO_DIR)
	$(BIN)/python -m cmrcx.train --gin_file=cmrc2019_tiny.gin --gin.MODEL_DIR="'$(DEMO_DIR)'"
	$(BIN)/python -m cmrcx.score cmrc2019 cmrcx/data/cmrc2019_sample/cmrc2019_dev.json \
		$(DEMO_DIR)/predictions/cmrc2019_tiny_validation.json
	$(BIN)/python -m cmrcx.train --gin_file=clue_afqmc_tiny.gin --gin.MODEL_DIR="'$(DEMO_DIR)/clue_afqmc'"
	$(BIN)/python -m cmrcx.score clue_afqmc cmrcx/data/clue_sample/afqmc_public/dev.json \
		$(DEMO_DIR)/clue_afqmc/predictions/clue_afqmc_tiny_validation.json
	$(BIN)/python -m cmrcx.train --gin_file=clue_cmrc2018_tiny.gin --gin.MODEL_DIR="'$(DEMO_DIR)/clue_cmrc2018'"
	$(BIN)/python -m cmrcx.score cmrc2018 cmrcx/data/clue_mrc_sample/cmrc2018_public/dev.json \
		$(DEMO_DIR)/clue_cmrc2018/predictions/clue_cmrc2018_tiny_validation.json
	$(BIN)/python -m cmrcx.train --gin_file=lot_clozet_tiny.gin --gin.MODEL_DIR="'$(DEMO_DIR)/lot_clozet'"
	$(BIN)/python -m cmrcx.score lot_clozet cmrcx/data/lot_sample/clozet/val.jsonl \
		$(DEMO_DIR)/lot_clozet/predictions/lot_clozet_validation.jsonl
	$(BIN)/python -m cmrcx.train --gin_file=lot_outgen_tiny.gin --gin.MODEL_DIR="'$(DEMO_DIR)/lot_outgen'"
	$(BIN)/python -m cmrcx.score lot_outgen cmrcx/data/lot_sample/outgen/val.jsonl \
		$(DEMO_DIR)/lot_outgen/predictions/lot_outgen_validation.jsonl
	@$(BIN)/python tools/demo_summary.py $(DEMO_DIR)

# Two worker processes (pytest-xdist), one per core of the CI machine; a test file stays
# on one worker, so its module fixtures are built once.
test: $(TESTS) lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=25

test-slow: $(TESTS)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m slow

lint: $(TESTS)
	$(BIN)/ruff check cmrcx tasks tests tools
	$(BIN)/ruff format --check cmrcx tasks tests tools

format: $(TESTS)
	$(BIN)/ruff format cmrcx tasks tests tools

# A local version label (torch's "+cpu" from a wheel folder) is dropped: the public index
# has no such build, and "==2.13.0" still takes a local 2.13.0+cpu wheel where one is found.
lock: $(TESTS)
	{ head -2 constraints.txt; $(BIN)/python -m pip freeze --exclude-editable | grep -v "^cmrcx" \
		| sed -E 's/^([^=]+==[^+]+)\+.*$$/\1/'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

# The install, dry-run, with only the public package index (no pip.conf, no PIP_* variables,
# no local wheel folders), on every supported Python found on PATH.
check-public-install:
	bash tools/check_public_install.sh

clean:
	rm -rf $(VENV) $(DEMO_DIR) build *.egg-info
