"""Stack / device plugin: GPU nodes advertise their GPUs, in the amounts the labels promise.

Checklist (k8s-device-plugin tests/e2e/device-plugin_test.go; gpu-operator plugin-validation):
- STACK-DP-002 every GPU node advertises nvidia.com/gpu (or the MIG / shared names its strategy
  implies) in capacity and allocatable
- STACK-DP-003 allocatable equals nvidia.com/gpu.count x nvidia.com/gpu.replicas on nodes that
  advertise GPUs (none at all is STACK-DP-002's) and do not share them through a sharing config
  (SHARE-CAP-001 owns those)
"""

from __future__ import annotations

import pytest

from conformance.checks import capacity, gpu_nodes
from conformance.checks.gpu_nodes import GpuNode
from conformance.cluster import evidence as ev
from conformance.nvidia import labels as L
from conformance.nvidia.sharing import SharingConfig, validate_sharing_config
from conformance.plugin.api import not_applicable


def _node_table(nodes: list[GpuNode]) -> str:
    return "\n".join(f"{n.name}: capacity={L.gpu_resources(n.capacity)} "
                     f"allocatable={n.gpu_resources} count={n.label(L.COUNT)} "
                     f"replicas={n.label(L.REPLICAS)}" for n in nodes)


@pytest.mark.requirement("STACK-DP-002")
def test_gpu_resource_advertised(require_device_plugin_nodes, attachments):
    nodes = [n for n in require_device_plugin_nodes if n.deploys("device-plugin")]
    if not nodes:
        not_applicable("the device plugin is switched off on every GPU node")
    attachments.append(ev.Evidence("gpu-resources.txt", _node_table(nodes)))
    attachments.append(ev.Evidence("gpu-node-evidence.txt", "\n".join(
        n.describe_evidence() for n in nodes)))
    missing = [f"{n.name} (a GPU node by {', '.join(n.evidence)})" for n in nodes
               if not any(L.gpu_resources(n.capacity).values()) or not any(
                   n.gpu_resources.values())]
    thin = [n.name for n in nodes if gpu_nodes.is_thin(n.evidence)]
    assert not missing, (
        f"{len(missing)} of {len(nodes)} GPU node(s) advertise no GPU resource in capacity/"
        f"allocatable: {', '.join(missing[:10])}; GPU pods there stay Pending" + (
            f". {len(thin)} of them ({', '.join(thin[:10])}) look like GPU nodes only by their "
            "cloud instance type or label, or one nvidia.com/gpu.* label: no device plugin, "
            "GFD, NFD or operator label shows a GPU there (is the GPU stack installed on them?)"
            if thin else ""))


def _shared_by_config(docs, nodes) -> set[str]:
    """Nodes whose amount the sharing suite owns: a valid sharing config applies to them."""
    if docs is None:
        return set()
    owned = set()
    for node in nodes:
        _key, doc = docs.for_node(node)
        if isinstance(doc, dict) and not validate_sharing_config(doc) and (
                SharingConfig.from_document(doc) is not None):
            owned.add(node.name)
    return owned


@pytest.mark.requirement("STACK-DP-003")
def test_allocatable_matches_count_times_replicas(sharing_docs, require_gpu_nodes, attachments):
    owned = _shared_by_config(sharing_docs, require_gpu_nodes)
    checked, unlabelled, wrong = 0, [], []
    for node in require_gpu_nodes:
        if node.name in owned or not any(node.gpu_resources.values()):
            continue
        promised = capacity.promised_by_labels(node)
        if promised is None:
            unlabelled.append(node.name)
            continue
        checked += 1
        problem = capacity.shortfall(node, promised)
        if problem:
            wrong.append(problem + " (gpu.count x gpu.replicas)")
    attachments.append(ev.Evidence("gpu-resources.txt", _node_table(require_gpu_nodes)))
    if not checked:
        not_applicable(
            f"no GPU node to check: {len(owned)} share GPUs by a sharing config (SHARE-CAP-001 "
            f"checks them), {len(unlabelled)} carry no {L.COUNT} (GFD labels missing: "
            "STACK-GFD-002), the others advertise no GPU (STACK-DP-002)")
    assert not wrong, (f"{len(wrong)} GPU node(s) advertise another amount than their GFD "
                       f"labels promise: " + "; ".join(wrong[:10]))
