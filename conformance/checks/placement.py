"""Which GPU pods choose their GPU type, and which leave it to chance."""

from __future__ import annotations

from collections.abc import Iterable

from conformance.nvidia import labels as L

# GFD labels that pin a GPU type (model, generation or memory size), or one node outright.
TYPE_KEYS = frozenset({L.PRODUCT, L.FAMILY, L.COMPUTE_MAJOR, L.COMPUTE_MINOR, L.MEMORY,
                       "nvidia.com/gpu.machine", "kubernetes.io/hostname"})


def asks_for_gpu(pod) -> bool:
    return any(L.is_gpu_resource(name)
               for c in pod.spec.containers if c.resources
               for part in (c.resources.limits, c.resources.requests) if part
               for name in part)


def selects_gpu_type(pod) -> bool:
    if TYPE_KEYS & set(pod.spec.node_selector or {}):
        return True
    affinity = pod.spec.affinity.node_affinity if pod.spec.affinity else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
    terms = required.node_selector_terms if required else []
    return bool(terms) and all(
        any(e.key in TYPE_KEYS for e in (t.match_expressions or [])) for t in terms)


def unpinned_gpu_pods(pods: Iterable, *, skip_namespaces: set[str],
                      skip_label: tuple[str, str]) -> list[str]:
    """``namespace/name`` of GPU pods that select no GPU type.

    Pods in ``skip_namespaces`` (the operator's) and pods labelled ``skip_label`` (the suite's
    own) are left out: they run on every GPU type on purpose.
    """
    key, value = skip_label
    return sorted(
        f"{p.metadata.namespace}/{p.metadata.name}" for p in pods
        if p.metadata.namespace not in skip_namespaces
        and (p.metadata.labels or {}).get(key) != value
        and asks_for_gpu(p) and not selects_gpu_type(p))
