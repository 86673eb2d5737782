# gpu-conformance: one command each to set up, run the main job, and test.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: setup run test lint unit integration browser bench clean

setup: $(BIN)/gpuconf  ## venv + package + control-plane and real-node binaries (Go, cached in ~/.cache)
	bash ci/build-controlplane.sh
	@# the real node (`--target node`) is optional: a host that cannot build it keeps the sim
	@# NVIDIA_SRC: the upstream NVIDIA sources (device plugin tag, mock NVML); see build-node.sh
	bash conformance/binaries/build-node.sh $(if $(NVIDIA_SRC),--nvidia-src $(NVIDIA_SRC)) all \
	  || echo "warning: the real node (--target node) is not (fully) built: see the errors above; the sim is unaffected"
	@# the GPU Operator from source (`gpuconf node operator`), opt-in: where NVIDIA_SRC has it
	$(if $(NVIDIA_SRC),bash conformance/binaries/build-node.sh --nvidia-src $(NVIDIA_SRC) gpu-operator \
	  || echo "warning: the GPU Operator (gpuconf node operator) is not built: see the errors above")

$(BIN)/gpuconf: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

run:  ## the main job: the suites against the local simulated cluster (or KUBECONFIG's)
	$(BIN)/gpuconf run

lint:  ## ruff and the import-layer contract (pyproject.toml [tool.importlinter])
	$(BIN)/ruff check .
	$(BIN)/lint-imports

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
