"""One real node for these tests: the sim's control plane plus this machine's kubelet,
containerd, runc and CNI, with NVIDIA's device plugin, GFD and NFD from the upstream chart
and the mock NVML as the driver (8xH100). Started once, always removed.

Skips, with the reason, where a node cannot run: not root, node binaries not built
(`make setup NVIDIA_SRC=DIR`), NVIDIA_SRC not set (the upstream NVIDIA sources: the device
plugin chart), or a kubelet already running here.
"""

from __future__ import annotations

import os

import pytest

from conformance.binaries import binaries
from conformance.common.errors import UsageError
from conformance.node import chart as chartmod
from conformance.node import lifecycle
from tests.node import hostsnap
from tests.node.node_env import GPU_PROFILE, NODE_NAME

# run last, in this order: the GPU Operator takes the node's device plugin over; down takes
# the session's node away
LAST = ("test_the_gpu_operator_from_source_reconciles_the_node_as_far_as_nfd_shows_a_gpu",
        "test_down_leaves_nothing_behind")


def _is_node_test(item) -> bool:
    return "tests/node" in str(item.fspath).replace(os.sep, "/")


def pytest_collection_modifyitems(items):
    # The node tests come first: under xdist their group (one worker: node_env.XDIST_GROUP)
    # is the longest, and should not start last and end late.
    for item in items:
        if _is_node_test(item):
            item.add_marker(pytest.mark.integration)
    # stable: the rest keep their order; LAST in that order at the end of the node tests
    items.sort(key=lambda item: (not _is_node_test(item),
                                 LAST.index(item.name) + 1 if item.name in LAST else 0))


def node_preconditions() -> tuple[str, str | None]:
    """(reason to skip or "", NVIDIA source folder)."""
    if os.geteuid() != 0:
        return "the real node needs root (kubelet, containerd, runc)", None
    if binaries.locate().missing():
        return "control-plane binaries not built: run `make setup`", None
    missing = binaries.locate_node().missing()
    if missing:
        return (f"node binaries not built ({', '.join(missing)}): run "
                "`make setup NVIDIA_SRC=DIR` (needs Go, gcc, libseccomp-dev, busybox-static)"), None
    src = os.environ.get("NVIDIA_SRC")
    if not src:
        return ("NVIDIA_SRC not set (the upstream NVIDIA sources holding the device plugin "
                "chart)"), None
    try:
        chartmod.find_chart(src)
    except UsageError as exc:
        return f"no device plugin chart: {exc}", None
    return "", src


@pytest.fixture(scope="session")
def nvidia_src() -> str:
    reason, src = node_preconditions()
    if reason:
        pytest.skip(reason)
    return str(src)


@pytest.fixture(scope="session")
def host_before(nvidia_src) -> hostsnap.Snapshot:
    """This host before any node test touched it (down must bring it back to this)."""
    return hostsnap.take()


@pytest.fixture(scope="session")
def node(nvidia_src, host_before):
    lines: list[str] = []
    try:
        state = lifecycle.up(NODE_NAME, gpu_profile=GPU_PROFILE, nvidia_src=nvidia_src,
                             progress=lines.append)
    except UsageError as exc:
        if any(w in str(exc) for w in ("already", "up on this host", "is taken")):
            pytest.skip(f"this host cannot run the test node now: {exc}")
        raise
    try:
        yield state
    finally:
        lifecycle.down(NODE_NAME, progress=lines.append)


@pytest.fixture(scope="session")
def api(node):
    from conformance.cluster.client import connect

    return connect(str(node.kubeconfig)).api_client
