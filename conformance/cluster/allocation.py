"""Scheduling experiments shared by the scheduling and sharing suites: fill a node with
one-unit GPU pods, watch the next one stay Pending for the right reason, free one, watch it bind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from conformance.checks import taints
from conformance.checks.gpu_nodes import GpuNode
from conformance.cluster import pods
from conformance.cluster.client import Cluster
from conformance.cluster.views import SharingDocs
from conformance.nvidia import labels as L
from conformance.nvidia.sharing import SharingConfig, validate_sharing_config

MAX_FILL_PODS = 64  # beyond this a fill test measures the API server, not GPU allocation


class TooManyToFill(Exception):
    """The node that fills fastest has more free units than a check creates pods for, and
    multi-unit pods cannot fill the rest (``why``). It has free units: never report this as
    "none free"."""

    def __init__(self, node: GpuNode, resource: str, free: int, why: str) -> None:
        super().__init__(f"the GPU node with the fewest free units, {node.name}, has {free} "
                         f"free {resource}: filling it one unit a pod takes more than "
                         f"{MAX_FILL_PODS} pods and {why}")
        self.node, self.resource, self.free, self.why = node, resource, free, why


def free_whole_gpus(cluster: Cluster, nodes: list[GpuNode]) -> int:
    """Whole GPUs free on the schedulable, untainted-for-us nodes (one pod list)."""
    in_use = pods.gpus_in_use_by_node(cluster)
    return sum(max(free_units(cluster, n, L.GPU_RESOURCE, in_use), 0) for n in nodes
               if n.ready and not taints.untolerated_taints(n))


def free_units(cluster: Cluster, node: GpuNode, resource: str,
               in_use: dict[str, dict[str, int]] | None = None) -> int:
    used = (in_use if in_use is not None else pods.gpus_in_use_by_node(cluster))
    return node.gpu_resources.get(resource, 0) - used.get(node.name, {}).get(resource, 0)


def pick_node(cluster: Cluster, nodes: list[GpuNode], resource: str | None = None,
              *, shared: bool | None = None) -> tuple[GpuNode, str, int] | None:
    """A schedulable GPU node with free units of its GPU resource: (node, resource, free), the
    one with the fewest free units (it fills fastest); None only when no node has a free unit."""
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
        if free <= 0:
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
    placed: list[str]  # the one-unit pods
    in_use: int  # units other pods already held on the node
    overflow_reason: str
    rescheduled_onto: str
    fillers: list[str] = field(default_factory=list)  # multi-unit pods that took the rest

    @property
    def running(self) -> int:
        """How many one-unit pods the node held at once when it was full (other pods' units
        counted as one-unit pods where no filler was used)."""
        return len(self.placed) + (0 if self.fillers else self.in_use)


def place_pods(cluster: Cluster, namespace: str, run_id: str, node: GpuNode, resource: str,
               sizes: list[int], prefix: str) -> list[str]:
    """Pods pinned to ``node`` asking for ``sizes`` units each, once all are scheduled there."""
    pin = {"kubernetes.io/hostname": node.name}
    names = [pods.create(cluster, namespace, pods.PodSpec(f"{prefix}-{i}", gpus=n,
                                                          resource=resource, node_selector=pin),
                         run_id) for i, n in enumerate(sizes)]
    placed = [pods.wait_scheduled(cluster, namespace, n) for n in names]
    wrong = [p for p in placed if p != node.name]
    assert not wrong, f"pods pinned to {node.name} landed on {sorted(set(wrong))}"
    return names


def fill_node(cluster: Cluster, namespace: str, run_id: str, node: GpuNode, resource: str,
              free: int, prefix: str, *, singles: int | None = None,
              filler_units: int = 1) -> FillResult:
    """Fill ``node``'s ``free`` units, then schedule one more; free one; see it bind.

    ``singles`` one-unit pods (all ``free`` by default), the rest in filler pods of up to
    ``filler_units`` units each (only where the cluster admits multi-unit requests)."""
    singles = free if singles is None else min(singles, free)
    rest = free - singles
    if rest and filler_units < 2:
        raise ValueError(f"{rest} units left to fill and no multi-unit filler allowed")
    names = place_pods(cluster, namespace, run_id, node, resource, [1] * singles, prefix)
    chunks = [min(filler_units, rest - i) for i in range(0, rest, max(filler_units, 1))]
    fillers = place_pods(cluster, namespace, run_id, node, resource, chunks, f"{prefix}-fill")
    pin = {"kubernetes.io/hostname": node.name}
    extra = pods.create(cluster, namespace, pods.PodSpec(f"{prefix}-extra", gpus=1,
                                                         resource=resource, node_selector=pin),
                        run_id)
    reason = pods.wait_unschedulable(cluster, namespace, extra)
    pods.delete(cluster, namespace, names[0])
    rescheduled = pods.wait_scheduled(cluster, namespace, extra)
    in_use = node.gpu_resources.get(resource, 0) - free
    return FillResult(node.name, resource, names, in_use, reason, rescheduled, fillers)


def require_free_node(cluster: Cluster, nodes: list[GpuNode], none_free: str, *,
                      shared: bool | None = None) -> tuple[GpuNode, str, int]:
    """:func:`pick_node`, failing with ``none_free`` when no node has a free unit."""
    choice = pick_node(cluster, nodes, shared=shared)
    assert choice is not None, none_free
    return choice


def check_full(result: FillResult, prefix: str) -> FillResult:
    """The next pod waited for capacity and bound where a unit was freed."""
    assert f"Insufficient {result.resource}" in result.overflow_reason, (
        f"{prefix} pod beyond the free units of {result.node} stayed Pending for another "
        f"reason than capacity: {result.overflow_reason}")
    assert result.rescheduled_onto == result.node, (
        f"the waiting pod bound to {result.rescheduled_onto}, not to {result.node} where a unit "
        "was freed")
    return result


def filler_units(node: GpuNode, docs: SharingDocs | None) -> tuple[int, str | None]:
    """How many units one filler pod on ``node`` may ask for: (units, None), or (1, why
    multi-unit pods cannot fill the node).

    Whole GPUs: any multi-GPU request is admitted. Time-sliced slices: only where the node's
    sharing config leaves failRequestsGreaterThanOne off (the device plugin refuses a request
    for more than one slice otherwise); then up to one GPU's replicas a pod.
    """
    replicas = node.int_label(L.REPLICAS) or 1
    if replicas <= 1:
        return max(node.int_label(L.COUNT) or 0, 2), None
    if docs is None:
        return 1, "the device plugin's sharing config could not be read"
    _key, doc = docs.for_node(node)
    if not isinstance(doc, dict) or validate_sharing_config(doc):
        return 1, f"the sharing config of {node.name} is invalid (SHARE-CFG-001)"
    if SharingConfig.from_document(doc).fails_requests_greater_than_one:
        return 1, "failRequestsGreaterThanOne refuses the multi-slice pods that would fill it"
    return replicas, None


def fill_node_and_check(cluster: Cluster, namespace: str, run_id: str, node: GpuNode,
                        resource: str, free: int, prefix: str,
                        docs: SharingDocs | None) -> FillResult:
    """Fill ``node`` (one-unit pods; past :data:`MAX_FILL_PODS` free, GPUs + 1 one-unit pods
    and multi-unit fillers for the rest), check that the next pod waits for capacity and binds
    there once a unit is freed. :class:`TooManyToFill` where fillers are refused."""
    if free <= MAX_FILL_PODS:
        return check_full(fill_node(cluster, namespace, run_id, node, resource, free, prefix),
                          prefix)
    units, why = filler_units(node, docs)
    if why is not None:
        raise TooManyToFill(node, resource, free, why)
    singles = (node.int_label(L.COUNT) or 1) + 1  # more one-unit pods than GPUs
    return check_full(fill_node(cluster, namespace, run_id, node, resource, free, prefix,
                                singles=singles, filler_units=units), prefix)


def fill_until_full(cluster: Cluster, namespace: str, run_id: str, nodes: list[GpuNode],
                    prefix: str, *, none_free: str, shared: bool | None = None,
                    docs: SharingDocs | None = None) -> FillResult:
    """:func:`fill_node_and_check` on the GPU node that fills fastest.

    ``none_free`` is the failure when no node has a free unit to fill; ``docs`` the sharing
    configs (which say whether multi-slice fillers are admitted).
    """
    node, resource, free = require_free_node(cluster, nodes, none_free, shared=shared)
    return fill_node_and_check(cluster, namespace, run_id, node, resource, free, prefix, docs)
