"""Scheduling experiments shared by the scheduling and sharing suites: fill a node with
one-unit GPU pods, watch the next one stay Pending for the right reason, free one, watch it bind.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.checks import taints
from conformance.checks.gpu_nodes import GpuNode
from conformance.cluster import pods
from conformance.cluster.client import Cluster
from conformance.nvidia import labels as L

MAX_FILL_PODS = 64  # beyond this a fill test measures the API server, not GPU allocation


def free_units(cluster: Cluster, node: GpuNode, resource: str,
               in_use: dict[str, dict[str, int]] | None = None) -> int:
    used = (in_use if in_use is not None else pods.gpus_in_use_by_node(cluster))
    return node.gpu_resources.get(resource, 0) - used.get(node.name, {}).get(resource, 0)


def pick_node(cluster: Cluster, nodes: list[GpuNode], resource: str | None = None,
              *, shared: bool | None = None) -> tuple[GpuNode, str, int] | None:
    """A schedulable GPU node with free units of its GPU resource: (node, resource, free)."""
    best = None
    in_use = pods.gpus_in_use_by_node(cluster)  # one list for every node, not one per node
    for node in nodes:
        if taints.untolerated_taints(node) or not node.ready:
            continue
        if shared is not None and ((node.int_label(L.REPLICAS) or 1) > 1) != shared:
            continue
        res = resource or node.main_resource[0]
        if res is None or res.endswith("*"):
            continue
        free = free_units(cluster, node, res, in_use)
        if free <= 0 or free > MAX_FILL_PODS:
            continue
        if best is None or free < best[2]:  # the smallest node fills fastest
            best = (node, res, free)
    if best is None:
        return None
    node, res, _ = best
    free = node.gpu_resources.get(res, 0) - pods.settled_gpus_in_use(cluster, node.name).get(
        res, 0)
    return (node, res, free) if free > 0 else None


@dataclass
class FillResult:
    node: str
    resource: str
    placed: list[str]
    in_use: int  # units other pods already held on the node
    overflow_reason: str
    rescheduled_onto: str

    @property
    def running(self) -> int:
        """How many one-unit pods the node held at once when it was full."""
        return len(self.placed) + self.in_use


def fill_node(cluster: Cluster, namespace: str, run_id: str, node: GpuNode, resource: str,
              free: int, prefix: str) -> FillResult:
    """Schedule ``free`` one-unit pods onto ``node``, then one more; free one; see it bind."""
    pin = {"kubernetes.io/hostname": node.name}
    names = [pods.create(cluster, namespace, pods.PodSpec(f"{prefix}-{i}", gpus=1,
                                                          resource=resource, node_selector=pin),
                         run_id) for i in range(free)]
    placed = [pods.wait_scheduled(cluster, namespace, n) for n in names]
    wrong = [p for p in placed if p != node.name]
    assert not wrong, f"pods pinned to {node.name} landed on {sorted(set(wrong))}"
    extra = pods.create(cluster, namespace, pods.PodSpec(f"{prefix}-extra", gpus=1,
                                                         resource=resource, node_selector=pin),
                        run_id)
    reason = pods.wait_unschedulable(cluster, namespace, extra)
    pods.delete(cluster, namespace, names[0])
    rescheduled = pods.wait_scheduled(cluster, namespace, extra)
    in_use = node.gpu_resources.get(resource, 0) - free
    return FillResult(node.name, resource, names, in_use, reason, rescheduled)


def require_free_node(cluster: Cluster, nodes: list[GpuNode], none_free: str, *,
                      shared: bool | None = None) -> tuple[GpuNode, str, int]:
    """:func:`pick_node`, failing with ``none_free`` when no node has a free unit."""
    choice = pick_node(cluster, nodes, shared=shared)
    assert choice is not None, none_free
    return choice


def fill_until_full(cluster: Cluster, namespace: str, run_id: str, nodes: list[GpuNode],
                    prefix: str, *, none_free: str, shared: bool | None = None) -> FillResult:
    """Fill the GPU node that fills fastest, check that the next pod waits for capacity and
    binds there once a unit is freed.

    ``none_free`` is the failure when no node has a free unit to fill.
    """
    node, resource, free = require_free_node(cluster, nodes, none_free, shared=shared)
    result = fill_node(cluster, namespace, run_id, node, resource, free, prefix)
    assert f"Insufficient {resource}" in result.overflow_reason, (
        f"{prefix} pod {free + 1} on {node.name} stayed Pending for another reason than "
        f"capacity: {result.overflow_reason}")
    assert result.rescheduled_onto == node.name, (
        f"the waiting pod bound to {result.rescheduled_onto}, not to {node.name} where a unit "
        "was freed")
    return result
