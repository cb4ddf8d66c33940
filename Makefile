# Two commands do all the set-up: `make demo` and `make test`.
# Both create .venv (Python 3.11) from pyproject.toml + constraints.txt when it is
# missing or older than those files.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= demo_run

.PHONY: demo test test-slow lint format lock clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
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
	@echo "checkpoints: $(DEMO_DIR)/checkpoints  predictions: $(DEMO_DIR)/predictions"
	@echo "CLUE AFQMC: $(DEMO_DIR)/clue_afqmc  CLUE CMRC 2018: $(DEMO_DIR)/clue_cmrc2018"
	@echo "LOT OutGen: $(DEMO_DIR)/lot_outgen"

# Two worker processes (pytest-xdist), one per core of the CI machine; a test file stays
# on one worker, so its module fixtures are built once.
test: $(STAMP) lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=25

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m slow

lint: $(STAMP)
	$(BIN)/ruff check cmrcx tasks tests tools
	$(BIN)/ruff format --check cmrcx tasks tests tools

format: $(STAMP)
	$(BIN)/ruff format cmrcx tasks tests tools

lock: $(STAMP)
	{ head -2 constraints.txt; $(BIN)/python -m pip freeze --exclude-editable | grep -v "^cmrcx"; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

clean:
	rm -rf $(VENV) $(DEMO_DIR) build *.egg-info
