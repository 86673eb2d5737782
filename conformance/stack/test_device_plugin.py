"""Stack / device plugin: GPU nodes advertise their GPUs, in the amounts the labels promise.

Checklist (k8s-device-plugin tests/e2e/device-plugin_test.go; gpu-operator plugin-validation):
- STACK-DP-002 every GPU node advertises nvidia.com/gpu (or the MIG / shared names its strategy
  implies) in capacity and allocatable
- STACK-DP-003 allocatable equals nvidia.com/gpu.count x nvidia.com/gpu.replicas
"""

from __future__ import annotations

import pytest

from conformance import labels as L
from conformance.checks.nodes import GpuNode
from conformance.cluster import evidence as ev
from conformance.plugin import not_applicable


def _node_table(nodes: list[GpuNode]) -> str:
    return "\n".join(f"{n.name}: capacity={L.gpu_resources(n.capacity)} "
                     f"allocatable={n.gpu_resources} count={n.label(L.COUNT)} "
                     f"replicas={n.label(L.REPLICAS)}" for n in nodes)


@pytest.mark.requirement("STACK-DP-002")
def test_gpu_resource_advertised(require_gpu_nodes, evidence):
    nodes = [n for n in require_gpu_nodes if n.deploys("device-plugin")]
    if not nodes:
        not_applicable("the device plugin is switched off on every GPU node")
    evidence.append(ev.Evidence("gpu-resources.txt", _node_table(nodes)))
    missing = [n.name for n in nodes
               if not any(L.gpu_resources(n.capacity).values()) or not any(
                   n.gpu_resources.values())]
    assert not missing, (
        f"{len(missing)} of {len(nodes)} GPU node(s) advertise no GPU resource in capacity/"
        f"allocatable: {', '.join(missing[:10])}; GPU pods there stay Pending")


def expected_allocatable(node: GpuNode) -> dict[str, int] | None:
    """What GFD's labels say the device plugin should advertise, or None without labels."""
    if node.label(L.MIG_STRATEGY) == "mixed":
        expected = {}
        for key, value in node.labels.items():
            if key.startswith(L.MIG_RESOURCE_PREFIX) and key.endswith(".count"):
                profile = key[len(L.MIG_RESOURCE_PREFIX):-len(".count")]
                replicas = node.int_label(f"{L.MIG_RESOURCE_PREFIX}{profile}.replicas") or 1
                expected[f"{L.MIG_RESOURCE_PREFIX}{profile}"] = int(value) * replicas
        return expected or None
    count, replicas = node.int_label(L.COUNT), node.int_label(L.REPLICAS)
    if count is None:
        return None
    replicas = replicas or 1
    resource = L.SHARED_RESOURCE if L.SHARED_RESOURCE in node.allocatable else L.GPU_RESOURCE
    return {resource: count * replicas}


@pytest.mark.requirement("STACK-DP-003")
def test_allocatable_matches_count_times_replicas(require_gpu_nodes, evidence):
    checked, unlabelled, wrong = 0, [], []
    for node in require_gpu_nodes:
        expected = expected_allocatable(node)
        if expected is None:
            unlabelled.append(node.name)
            continue
        checked += 1
        have = {k: node.gpu_resources.get(k, 0) for k in expected}
        if have != expected:
            wrong.append(f"{node.name}: allocatable {have}, labels imply {expected}")
    evidence.append(ev.Evidence("gpu-resources.txt", _node_table(require_gpu_nodes)))
    if not checked:
        not_applicable(f"no GPU node carries nvidia.com/gpu.count (GFD labels missing on "
                       f"{len(unlabelled)} node(s): see STACK-GFD-002)")
    assert not wrong, (f"{len(wrong)} GPU node(s) advertise another amount than "
                       f"gpu.count x gpu.replicas: " + "; ".join(wrong[:10]))
