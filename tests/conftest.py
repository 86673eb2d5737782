"""What every test process shares.

The tests run up to seven sims, a real node (kubelet, containerd and a shim per pod), Helm and
kind on the 2-core machine at once, nearly all of them Go programs. Each Go program the tests
start runs on one P (GOMAXPROCS=1, as the control plane's components do by default:
``conformance/controlplane/components.py``): with a P per core, their idle runtimes spun
looking for work to steal. Measured, three node faults and the node's bring-up
(tests/node/test_node_fault_matrix.py -k "gfd-stopped or crashloop or cdi"): 81 CPU-s on the
machine in 106 s, against 91 CPU-s in 116 s. A GOMAXPROCS in the environment wins.

It also sets the order xdist hands the tests out in: ``--dist loadgroup`` sends them in
collection order.
"""

from __future__ import annotations

import os

os.environ.setdefault("GOMAXPROCS", "1")

# The unit test files that mostly wait (fake pods on timed windows, a pip install): ~300 s
# summed of the unit tests' ~7 min. Alphabetical, they came last and the run ended on one or
# two of them while the other workers had nothing left (a fresh-clone CI: the last 15 s with
# 2-3 of 5 workers idle). First among the unit tests, the run ends on short ones that share
# out evenly across the workers.
UNIT_FILES_FIRST = frozenset({
    "tests/unit/test_sharing_pods.py", "tests/unit/test_dockerfile.py",
    "tests/unit/test_gpu_kernels_fake_device.py", "tests/unit/test_gpu_kernels_burn.py",
    "tests/unit/test_gpu_kernels_latency.py", "tests/unit/test_sharing_suite_pods.py"})


def pytest_collection_modifyitems(items) -> None:
    """The other unit tests last (a stable sort: every other order stays, the node tests'
    first among them: tests/node/conftest.py)."""
    def unit_test_to_end(item) -> bool:
        path = item.nodeid.split("::", 1)[0]
        return path.startswith("tests/unit/") and path not in UNIT_FILES_FIRST

    items.sort(key=unit_test_to_end)
