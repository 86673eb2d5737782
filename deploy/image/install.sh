#!/bin/sh
# The image's install steps, run by deploy/image/Dockerfile and by CI
# (tests/unit/test_dockerfile.py), so what CI checks is what the image holds:
#   install.sh PREFIX SRC   a virtual environment at PREFIX with the package built from SRC
#                           (a checkout) and its runtime dependencies, then smoke checks.
set -eu
prefix=$1
src=$2
python3 -m venv "$prefix"
"$prefix/bin/pip" install "$src"
# Smoke checks: the CLI, the catalog, the pytest plugin entry point and the shipped data.
"$prefix/bin/gpuconf" --help >/dev/null
"$prefix/bin/gpuconf" requirements --json >/dev/null
"$prefix/bin/python" -m pytest --help | grep -q -- "--expected-driver-version"
"$prefix/bin/python" - <<'PY'
from conformance.cluster import rbac
from conformance.report import product
from conformance.run import plan

assert rbac.MANIFEST.is_file(), rbac.MANIFEST
assert all(product.checklist(v)["spec"] for v in product.VERSIONS)
assert (plan.SUITE_DIR / "stack" / "test_dcgm.py").is_file(), plan.SUITE_DIR
PY
echo "gpuconf installed in $prefix"
