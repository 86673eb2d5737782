"""Does a GPU node advertise the amount of GPU resource that its labels or its sharing config
promise? The one rule is ``nvidia.sharing.advertised_count`` (devices x replicas); this module
applies it to what GFD says (STACK-DP-003 owns that) and to what the config says (SHARE-CAP-001).

Ownership, so that one broken thing fails one requirement: on a node that shares its GPUs the
sharing suite owns the amount (the config is the source of truth there, and a label that
disagrees with the config is SHARE-LBL-001's), elsewhere the device plugin check owns it.
"""

from __future__ import annotations

from conformance.checks.gpu_nodes import GpuNode
from conformance.nvidia import labels as L
from conformance.nvidia.sharing import SharingConfig, advertised_count


def promised_by_labels(node: GpuNode) -> dict[str, int] | None:
    """What GFD's labels say the device plugin advertises, or None without count labels.

    Mixed MIG: one resource per profile (``mig-<p>.count`` x ``mig-<p>.replicas``); otherwise
    ``gpu.count`` x ``gpu.replicas`` under the node's whole-GPU or renamed shared resource.
    """
    if node.label(L.MIG_STRATEGY) == "mixed":
        expected = {}
        for key, value in node.labels.items():
            if key.startswith(L.MIG_RESOURCE_PREFIX) and key.endswith(".count"):
                resource = key.removesuffix(".count")
                expected[resource] = advertised_count(
                    int(value), node.int_label(f"{resource}.replicas"))
        return expected or None
    count = node.int_label(L.COUNT)
    if count is None:
        return None
    resource = L.SHARED_RESOURCE if L.SHARED_RESOURCE in node.allocatable else L.GPU_RESOURCE
    return {resource: advertised_count(count, node.int_label(L.REPLICAS))}


def promised_by_config(node: GpuNode, config: SharingConfig) -> dict[str, int] | None:
    """What a sharing config makes the plugin advertise for the node's whole GPUs (None
    without a ``gpu.count`` label to know how many physical GPUs it has)."""
    count = node.int_label(L.COUNT)
    if count is None:
        return None
    return config.advertised({L.GPU_RESOURCE: count})


def shortfall(node: GpuNode, promised: dict[str, int]) -> str | None:
    """A sentence when the node's allocatable differs from ``promised``, else None."""
    have = {name: node.gpu_resources.get(name, 0) for name in promised}
    if have == promised:
        return None
    return f"{node.name}: allocatable {have}, expected {promised}"


def is_shared(node: GpuNode) -> bool:
    """Whether GFD says the node shares its GPUs (gpu.replicas > 1)."""
    return (node.int_label(L.REPLICAS) or 1) > 1
