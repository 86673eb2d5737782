"""Faults made in the real node's components fail exactly their requirements.

As ``tests/integration/test_fault_matrix.py`` does for the sim: each fault names, on itself
(``node_faults.FAULTS``), the requirements that must fail when the suites run against the node
(``--target node``) and a word their diagnoses must name. The faults are real: the device plugin's
DaemonSet deleted or crash-looping, its socket or the kubelet's registration socket removed,
a sharing config the plugin rejects, GFD stopped while the plugin's config changes, the
plugin's CDI spec removed, a GPU lost in the mock NVML. Every fault is undone afterwards and
the node checked to be whole again.

Where a fault runs on both, the node and the sim agree: ``sharing-config-rejected`` here is
the sim's ``sharing-config-invalid`` (the same requirements, plus STACK-TK-002, which the sim
cannot run), ``device-plugin-daemonset-deleted`` the sim's ``device-plugin-absent``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.cluster.client import connect
from tests.helpers import assert_fails_exactly, run_suites
from tests.node import node_env, node_faults
from tests.node.node_env import GPU_COUNT, NODE_NAME

pytestmark = pytest.mark.xdist_group(node_env.XDIST_GROUP)

SUITES = ("stack", "scheduling", "sharing")
SUITES_TIMEOUT_S = 600.0


def test_every_fault_has_an_expectation():
    """Each node fault names what it fails and a word for the diagnoses (or fails nothing)."""
    assert all(bool(f.fails) == bool(f.word) for f in node_faults.FAULTS.values())


@pytest.fixture(scope="module")
def node_whole() -> dict[str, bool]:
    """Whether the last fault's teardown restored the node and found it whole (then the next
    fault starts without restoring it again: a restore replaces the plugin's and GFD's pods
    and upgrades the chart, 3-11 s on a quiet machine, twice that under `make test`)."""
    return {"whole": False}


@pytest.fixture
def ctx(node, api, node_whole):
    c = node_faults.Ctx(NODE_NAME, api)
    if not node_whole["whole"]:
        node_faults.restore(c)  # whatever an earlier test left (time-slicing, a failed fault)
    node_whole["whole"] = False
    yield c
    node_faults.restore(c)
    allocatable = c.allocatable()
    assert allocatable.get("nvidia.com/gpu") == str(GPU_COUNT), allocatable
    assert node_faults.PLUGIN_SOCKET.exists() and node_faults.KUBELET_SOCKET.exists()
    node_whole["whole"] = True


@pytest.mark.parametrize("fault", sorted(node_faults.FAULTS))
def test_node_fault_fails_the_right_requirements(fault, ctx, node, tmp_path):
    played = node_faults.FAULTS[fault]
    played.play(ctx)
    code, doc, out = run_suites(Path(node.kubeconfig), tmp_path, *SUITES, target="node",
                                timeout=SUITES_TIMEOUT_S)
    assert_fails_exactly(fault, code, doc, out, set(played.fails), played.word,
                         connect(str(node.kubeconfig)))
