"""Faults made in the real node's components fail exactly their requirements.

As ``tests/integration/test_fault_matrix.py`` does for the sim: each fault names the
requirements that must fail when the suites run against the node (``--target node``) and a
word their diagnoses must name. The faults are real (``node_faults.py``): the device plugin's
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
from tests.integration.conftest import assert_fails_exactly, run_suites
from tests.node import node_faults
from tests.node.conftest import GPU_COUNT, NODE_NAME

SUITES = ("stack", "scheduling", "sharing")
SUITES_TIMEOUT_S = 600.0
# what needs a GPU the kubelet can hand out: every check that places or starts a GPU pod
_NO_ALLOCATABLE_GPUS = {"STACK-DP-002", "STACK-TK-002", "SCHED-ALLOC-001", "SCHED-ALLOC-002",
                        "SCHED-LAT-001", "SCHED-PLACE-001", "SCHED-PLACE-002"}
EXPECTED: dict[str, tuple[set[str], str]] = {
    "device-plugin-daemonset-deleted": ({"STACK-DP-001", *_NO_ALLOCATABLE_GPUS},
                                        "device plugin"),
    "device-plugin-crashloop": ({"STACK-DP-001", "STACK-OPD-002", *_NO_ALLOCATABLE_GPUS},
                                "device plugin"),
    # the kubelet keeps its connection to a running plugin: nothing breaks (the suites pass)
    "device-plugin-socket-removed": (set(), ""),
    # the plugin runs (its DaemonSet is rolled out) but cannot register its resource
    "kubelet-socket-removed": (_NO_ALLOCATABLE_GPUS, "device plugin"),
    "sharing-config-rejected": ({"SHARE-CFG-001", "SHARE-OVS-001", "STACK-DP-001",
                                 "STACK-GFD-001", "STACK-OPD-002", *_NO_ALLOCATABLE_GPUS},
                                "sharing config"),
    "gfd-stopped-labels-stale": ({"STACK-GFD-001", "SHARE-LBL-001"}, "Feature Discovery"),
    "cdi-spec-removed": ({"STACK-TK-002"}, "toolkit"),
    "mock-nvml-gpu-lost": ({"STACK-GFD-001", "STACK-OPD-002"}, "Feature Discovery"),
}


def test_every_fault_has_an_expectation():
    assert set(EXPECTED) == set(node_faults.FAULTS)


@pytest.fixture
def ctx(node, api):
    c = node_faults.Ctx(NODE_NAME, api)
    node_faults.restore(c)  # whatever an earlier test left (time-slicing, a failed fault)
    yield c
    node_faults.restore(c)
    allocatable = c.allocatable()
    assert allocatable.get("nvidia.com/gpu") == str(GPU_COUNT), allocatable
    assert node_faults.PLUGIN_SOCKET.exists() and node_faults.KUBELET_SOCKET.exists()


@pytest.mark.parametrize("fault", sorted(EXPECTED))
def test_node_fault_fails_the_right_requirements(fault, ctx, node, tmp_path):
    must_fail, layer_word = EXPECTED[fault]
    node_faults.FAULTS[fault](ctx)
    code, doc, out = run_suites(Path(node.kubeconfig), tmp_path, *SUITES, target="node",
                                timeout=SUITES_TIMEOUT_S)
    assert_fails_exactly(fault, code, doc, out, must_fail, layer_word,
                         connect(str(node.kubeconfig)))
