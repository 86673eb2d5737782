"""Which running GPU pods choose their GPU type, and which leave it to chance."""

from __future__ import annotations

from conformance import labels as L
from conformance.checks.pods import UNFINISHED
from conformance.cluster.client import Cluster
from conformance.cluster.namespaces import MANAGED_BY, MANAGER

# GFD labels that pin a GPU type (model, generation or memory size), or one node outright.
TYPE_KEYS = frozenset({L.PRODUCT, L.FAMILY, L.COMPUTE_MAJOR, L.COMPUTE_MINOR, L.MEMORY,
                       "nvidia.com/gpu.machine", "kubernetes.io/hostname"})


def _asks_for_gpu(pod) -> bool:
    return any(L.is_gpu_resource(name)
               for c in pod.spec.containers if c.resources
               for part in (c.resources.limits, c.resources.requests) if part
               for name in part)


def _selects_gpu_type(pod) -> bool:
    if TYPE_KEYS & set(pod.spec.node_selector or {}):
        return True
    affinity = pod.spec.affinity.node_affinity if pod.spec.affinity else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
    terms = required.node_selector_terms if required else []
    return bool(terms) and all(
        any(e.key in TYPE_KEYS for e in (t.match_expressions or [])) for t in terms)


def unpinned_gpu_pods(cluster: Cluster, skip_namespaces: set[str]) -> list[str]:
    """``namespace/name`` of unfinished GPU pods that select no GPU type (one list request).

    The suite's own pods and the operator's are left out: they run on every GPU type on purpose.
    """
    pods = cluster.core.list_pod_for_all_namespaces(field_selector=UNFINISHED).items
    return sorted(
        f"{p.metadata.namespace}/{p.metadata.name}" for p in pods
        if p.metadata.namespace not in skip_namespaces
        and (p.metadata.labels or {}).get(MANAGED_BY) != MANAGER
        and _asks_for_gpu(p) and not _selects_gpu_type(p))
