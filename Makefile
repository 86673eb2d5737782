# gpu-conformance: one command each to set up, run the main job, and test.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: setup run test lint unit integration browser bench clean

setup: $(BIN)/gpuconf  ## venv + package + control-plane binaries (Go, cached in ~/.cache)
	bash ci/build-controlplane.sh

$(BIN)/gpuconf: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

run:  ## the main job: the suites against the local simulated cluster (or KUBECONFIG's)
	$(BIN)/gpuconf run

lint:
	$(BIN)/ruff check .

unit:
	$(BIN)/pytest tests/unit -q

integration:
	$(BIN)/pytest tests/integration -q

browser:
	$(BIN)/pytest tests/browser -q

test: lint  ## lint, unit, browser and integration tests (needs `make setup`)
	$(BIN)/pytest tests -q --durations=15

bench:  ## scale benchmark: the stack and scheduling suites against 500 GPU nodes
	$(BIN)/python ci/bench_scale.py

clean:
	rm -rf $(VENV) results *.egg-info
