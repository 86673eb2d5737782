"""Node autoscaling as the cluster shows it: which autoscaler runs, a pool's nodes and free
GPUs, the node a pending pod made it add, and that node going again (the decisions are
``checks/autoscaling.py``'s).

The check's own node: a node of the pool that was not there when the check began. Its cleanup
deletes, for Karpenter, the NodeClaim of every such node still there (Karpenter then drains and
removes it, as it does for its own scale-down), so a failed scale-down leaves nothing to pay
for; a Cluster Autoscaler node group has no such handle, and its leftover node is named.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from conformance.checks import autoscaling as asc
from conformance.checks.gpu_nodes import GpuNode
from conformance.cluster import allocation, discovery, pods
from conformance.cluster.client import Cluster, NotFound, already_done, read_or_none
from conformance.cluster.evidence import to_yaml
from conformance.cluster.views import list_gpu_nodes
from conformance.cluster.waits import WaitTimeout, wait_for, wait_until_done
from conformance.nvidia.labels import GPU_RESOURCE

# A node autoscaler adds a node for a pending pod within a minute or two on a cloud (instance
# boot and kubelet registration), seconds on the sim: 10 minutes is ample for GPU instances.
SCALE_UP_TIMEOUT_S = 600.0
# Karpenter says at once when no instance type of the pool fits a pod ("Failed to schedule
# pod, ..." on the pod, within its batch window: 1-10 s); it says so again on every later
# batch, so it is believed once it has held this long with no node added.
KARPENTER_REFUSAL_S = 5.0
KARPENTER_REFUSED = "Failed to schedule pod"  # its FailedScheduling events (scheduling/events.go)
CLEANUP_TIMEOUT_S = 180.0  # a NodeClaim deleted by the check: drained and gone (Karpenter)


def detect(cluster: Cluster) -> list[str]:
    served = discovery.served(cluster, {asc.KARPENTER_GROUP})
    status = read_or_none(cluster.core.read_namespaced_config_map, asc.CA_STATUS_CONFIGMAP,
                          asc.CA_STATUS_NAMESPACE)
    return asc.detect(served, status is not None)


def nodepools(cluster: Cluster) -> list[asc.NodePool]:
    doc = cluster.custom.list_cluster_custom_object(asc.KARPENTER_GROUP, asc.KARPENTER_VERSION,
                                                    "nodepools")
    return [asc.NodePool.from_object(o) for o in doc.get("items") or []]


def _selector(pool: asc.PoolChoice) -> str:
    return ",".join(f"{k}={v}" for k, v in pool.selector.items())


def pool_nodes(cluster: Cluster, pool: asc.PoolChoice) -> set[str]:
    """The pool's nodes now (one being removed still counts until it is gone)."""
    return {n.metadata.name for n in cluster.core.list_node(label_selector=_selector(pool)).items}


def free_gpus(cluster: Cluster, pool: asc.PoolChoice) -> int:
    """Whole GPUs free on the pool's schedulable nodes now."""
    in_use = pods.gpus_in_use_by_node(cluster)
    nodes: list[GpuNode] = [n for n in list_gpu_nodes(cluster)
                            if all(n.labels.get(k) == v for k, v in pool.selector.items())]
    return sum(max(allocation.free_units(cluster, n, GPU_RESOURCE, in_use), 0)
               for n in nodes if n.ready)


@dataclass(frozen=True)
class Growth:
    """How the pool answered the pending pod: the node it added and the pod's node, or why
    not (Karpenter's own words where it gave them)."""

    added: frozenset[str]
    pod_node: str | None
    refused: str = ""
    gone: str = ""  # the pending pod was deleted meanwhile: its last events


# kube-controller-manager's taint-eviction controller (pkg/controller/tainteviction), the event
# it leaves on a pod it deletes for a NoExecute taint the pod does not tolerate
TAINT_EVICTION = "TaintManagerEviction: Marking for deletion"


def evicted_on_arrival(growth: Growth) -> bool:
    """The pending pod was deleted by the taint manager once bound to a node the pool had just
    added. Karpenter registers a node it launched by removing its karpenter.sh/unregistered
    NoExecute taint; the scheduler saw that and bound the pod, the taint manager still saw the
    taint and deleted the pod (their views of the node lag each other on a loaded control
    plane; seen in CI). The pool did grow: a new pending pod shows whether one runs there."""
    return bool(growth.gone and growth.added and TAINT_EVICTION in growth.gone)


def wait_grown(cluster: Cluster, pool: asc.PoolChoice, before: set[str], namespace: str,
               pod: str) -> Growth:
    """Until the pool has a node it had not and the pending pod is Running on it; stops early
    once Karpenter has said for KARPENTER_REFUSAL_S that no node of the pool fits the pod,
    once the pod runs on a node the pool had (a GPU there came free after the check counted
    them: the pool needs no new node for it), and once the pod is gone (deleted by someone
    else: an eviction, a cleanup)."""
    last = [Growth(frozenset(), None)]
    refused_since: list[float] = []

    def pending() -> str | None:
        added = frozenset(pool_nodes(cluster, pool) - before)
        current = read_or_none(cluster.core.read_namespaced_pod, pod, namespace)
        if current is None:  # nothing brings a bare pod back: waiting shows nothing more
            events = pods.scheduling_events(cluster, namespace, pod).replace("\n", "; ")
            last[0] = Growth(added, None, gone=events)
            return None
        node = current.spec.node_name
        if node and current.status.phase == "Running":
            last[0] = Growth(added, node)
            return None  # on an added node; or on one the pool had, where waiting shows nothing
        refusal = "" if added else _karpenter_refusal(cluster, namespace, pod)
        last[0] = Growth(added, None, refusal)
        if refusal:
            refused_since[:] = refused_since or [time.monotonic()]
            if time.monotonic() - refused_since[0] >= KARPENTER_REFUSAL_S:
                return None
            return f"Karpenter: {refusal}"
        if not added:
            return f"{len(before)} nodes in the pool, none added yet; pod {pod} Pending"
        return f"added {', '.join(sorted(added))}; pod {pod} {current.status.phase} on " \
               f"{node or 'no node yet'}"

    with contextlib.suppress(WaitTimeout):  # the caller judges from the last state
        wait_until_done(f"{pool} to add a node for pending pod {pod} and the pod to run there",
                        pending, timeout=SCALE_UP_TIMEOUT_S, interval=1.0)
    return last[0]


def _karpenter_refusal(cluster: Cluster, namespace: str, pod: str) -> str:
    events = cluster.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={pod},reason=FailedScheduling").items
    refusals = [e.message for e in events if (e.message or "").startswith(KARPENTER_REFUSED)]
    return refusals[-1] if refusals else ""


def wait_shrunk(cluster: Cluster, pool: asc.PoolChoice, added: frozenset[str],
                timeout: float) -> float:
    """Until every node the check added is gone; the seconds it took (WaitTimeout names the
    ones still there)."""
    def pending() -> str | None:
        left = sorted(added & pool_nodes(cluster, pool))
        return f"still there: {', '.join(left)}" if left else None

    return wait_until_done(f"{pool} to remove the node the check added, once its pods went",
                           pending, timeout=timeout, interval=1.0)


def remove_added(cluster: Cluster, pool: asc.PoolChoice, before: set[str]) -> list[str]:
    """Cleanup: the nodes the check added and that are still there; for Karpenter their
    NodeClaims are deleted and waited for. Returns what is left (to name in the report)."""
    added = pool_nodes(cluster, pool) - before
    if not added or pool.mechanism != asc.KARPENTER:
        return sorted(added)
    claims = cluster.custom.list_cluster_custom_object(
        asc.KARPENTER_GROUP, asc.KARPENTER_VERSION, "nodeclaims").get("items") or []
    for claim in claims:
        if (claim.get("status") or {}).get("nodeName") in added:
            with already_done(NotFound):
                cluster.custom.delete_cluster_custom_object(
                    asc.KARPENTER_GROUP, asc.KARPENTER_VERSION, "nodeclaims",
                    claim["metadata"]["name"])
    with contextlib.suppress(WaitTimeout):  # what is left is named by the caller
        wait_for("the nodes the check added to be gone",
                 lambda: not (added & pool_nodes(cluster, pool)), timeout=CLEANUP_TIMEOUT_S)
    return sorted(added & pool_nodes(cluster, pool))


def autoscaler_view(cluster: Cluster, pool: asc.PoolChoice) -> str:
    """The pool as the autoscaler sees it, as YAML: the Karpenter NodePool and its NodeClaims,
    or Cluster Autoscaler's status ConfigMap; and the pool's nodes."""
    view: dict = {"nodes": sorted(pool_nodes(cluster, pool))}
    if pool.mechanism == asc.KARPENTER:
        nodepool = read_or_none(cluster.custom.get_cluster_custom_object, asc.KARPENTER_GROUP,
                                asc.KARPENTER_VERSION, "nodepools", pool.pool)
        claims = cluster.custom.list_cluster_custom_object(
            asc.KARPENTER_GROUP, asc.KARPENTER_VERSION, "nodeclaims",
            label_selector=_selector(pool)).get("items") or []
        for obj in [nodepool or {}, *claims]:
            obj.get("metadata", {}).pop("managedFields", None)  # noise, not evidence
        view.update(nodePool=nodepool, nodeClaims=claims)
    else:
        status = read_or_none(cluster.core.read_namespaced_config_map, asc.CA_STATUS_CONFIGMAP,
                              asc.CA_STATUS_NAMESPACE)
        view["clusterAutoscalerStatus"] = (status.data or {}) if status else None
    return to_yaml(view)
