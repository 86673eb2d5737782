# gpu-conformance: one command each to set up, run the main job, and test.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: setup run test test-fast collected-ids lint unit integration browser bench image kind-node clean

# The project's tests wait on clusters more than they compute: on the 2-core machine five
# xdist workers (each with its own sim) keep both cores busy. Measured: 924 tests, 4 workers
# 12.0 min (3.9x the summed test time of one worker), 6 workers 13.0 min (more workers only
# added contention); 1092 tests (2026-12-06, one machine): 4 workers 17.4 min with the cores
# idle 19 % of the time (fresh-clone CI), 5 workers 16.2 min, idle 8 %. loadgroup keeps the
# tests that share one host-wide thing on one worker (the real node; `gpuconf run`'s sims).
WORKERS ?= 5
# Python may cache its bytecode here (a host that sets PYTHONDONTWRITEBYTECODE makes every one of
# the tests' ~150 child interpreters compile the project's modules again: ~1 s of CPU each).
unexport PYTHONDONTWRITEBYTECODE
XDIST   := -n $(WORKERS) --dist loadgroup
# The fast lane: every unit test, one sim end to end, one fault caught, one least-privilege run.
FAST_LANE := tests/unit \
  tests/integration/test_run.py::test_run_defaults_to_the_sim_and_writes_results \
  "tests/integration/test_fault_matrix.py::test_fault_fails_the_right_requirements[toolkit-absent]" \
  tests/integration/test_least_privilege.py::test_whole_suite_runs_as_the_service_account_without_403

setup: $(BIN)/gpuconf  ## venv + package + control-plane and real-node binaries (Go, cached in ~/.cache)
	bash ci/build-controlplane.sh
	@# the real node (`--target node`) is optional: a host that cannot build it keeps the sim
	@# NVIDIA_SRC: the upstream NVIDIA sources (device plugin tag, mock NVML); see build-node.sh
	bash conformance/binaries/build-node.sh $(if $(NVIDIA_SRC),--nvidia-src $(NVIDIA_SRC)) all \
	  || echo "warning: the real node (--target node) is not (fully) built: see the errors above; the sim is unaffected"
	@# the GPU Operator from source (`gpuconf node operator`), opt-in: where NVIDIA_SRC has it
	$(if $(NVIDIA_SRC),bash conformance/binaries/build-node.sh --nvidia-src $(NVIDIA_SRC) gpu-operator \
	  || echo "warning: the GPU Operator (gpuconf node operator) is not built: see the errors above")
	@# the suite's image (`gpuconf job`, the Sonobuoy plugin; the node tests run it), optional:
	@# buildah and debootstrap; built again only when a file it copies changed
	bash ci/build-image.sh \
	  || echo "warning: the suite's image is not built (needs root, buildah, debootstrap): see above"

$(BIN)/gpuconf: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

run:  ## the main job: the suites against the local simulated cluster (or KUBECONFIG's)
	$(BIN)/gpuconf run

lint:  ## ruff, the import-layer contract (pyproject.toml [tool.importlinter]), hadolint
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/hadolint --no-color deploy/image/Dockerfile gpu_kernels/Dockerfile

unit:
	$(BIN)/pytest tests/unit -q $(XDIST)

integration:
	$(BIN)/pytest tests/integration -q $(XDIST)

browser:
	$(BIN)/pytest tests/browser -q

test: lint  ## lint, unit, browser, integration and node tests (needs `make setup`)
	@start=$$(date +%s); $(BIN)/pytest tests -q $(XDIST) --durations=15 \
	  --junitxml=.test-times.xml -o junit_family=xunit1; code=$$?; \
	  $(BIN)/python ci/test_times.py .test-times.xml --wall-seconds $$(( $$(date +%s) - start )) \
	  || true; exit $$code

test-fast: lint  ## while iterating: unit tests, one sim end to end, one fault, one least-privilege run
	$(BIN)/pytest -q $(XDIST) $(FAST_LANE)

collected-ids:  ## the list of test IDs tests/unit/test_collected_ids.py holds the suite to
	$(BIN)/pytest --collect-only -q -p no:xdist tests | grep '::' | sort > tests/collected-ids.txt

bench:  ## scale benchmark: the stack and scheduling suites against 500 GPU nodes
	$(BIN)/python ci/bench_scale.py

image:  ## the suite's image, built for real without Docker (buildah; also in `make setup`)
	bash ci/build-image.sh $(IMAGE_ARGS)

kind-node:  ## kind's node image built here, for --target kind where no registry answers (opt-in)
	bash conformance/binaries/build-kind-node.sh $(KIND_NODE_ARGS)

clean:
	rm -rf $(VENV) results *.egg-info
