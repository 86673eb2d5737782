#!/usr/bin/env bash
# h200-node.sh without a GPU, before spending accelerator time: the mock NVML laid out as the
# H200 machine lays out its driver (libraries in a driver root without dev/, the device nodes
# in a separate dev root), a fresh binary cache filled from .stage/ (both stages, checked as
# the device calls check them), CuPy's CPU stand-in (tests/unit/fakes) in the workload image.
# Verdicts of real-GPU checks mean nothing here (the stand-in has no nvidia-smi); the plumbing
# is what is checked: staging, node up on a split driver/dev root, image build and import,
# the suites and the sharing suite's time-sliced pods running to their result files.
#   sudo bash ci/device/dry-run-node.sh [stage run sliced]
set -uo pipefail
cd "$(dirname "$0")/../.."
DRY=${DRY_DIR:-/tmp/gpuconf-dry}
PY=${PY:-$PWD/.venv/bin/python}
rm -rf "$DRY/drv" "$DRY/devroot" && mkdir -p "$DRY/out"
# what an earlier dry run's calls left as done (on the device machine /tmp starts empty)
rm -f /tmp/gpuconf-ts.replicas /tmp/gpuconf-workload-image.ref
"$PY" - "$DRY" <<'EOF'
import shutil, sys
from pathlib import Path
from conformance.binaries import binaries
from conformance.node import gpu
root = Path(sys.argv[1])
nb = binaries.locate_node()
gpu.mock_driver_root(nb, gpu.parse_profile("1xH100", gpu.mock_models(nb)), root / "drv")
(root / "devroot").mkdir()
shutil.move(str(root / "drv" / "dev"), str(root / "devroot" / "dev"))
EOF
export GPUCONF_CACHE="$DRY/cache" SITE="$DRY/site" PYTHON="$PY" BUDGET_S=${BUDGET_S:-1500}
export DRIVER_ROOT="$DRY/drv" DEV_ROOT="$DRY/devroot" NODE_NAME=dry
export WHEELS=/nonexistent  # the venv has the packages (the .whl/ wheels are for cp312)
export WORKLOAD_ARGS="--no-kernel-probe" SLICED_REQUIREMENTS=SHARE-INT-001
export EXTRA_PYTHONPATH="$PWD/tests/unit/fakes"  # CuPy's and NVML's CPU stand-ins
for mode in ${*:-stage run sliced}; do
  rm -rf "$DRY/out/$mode"
  OUT="$DRY/out/$mode" bash ci/device/h200-node.sh "$mode"
  echo "== $mode: exit $?; files: $(ls "$DRY/out/$mode" | tr '\n' ' ')"
done
