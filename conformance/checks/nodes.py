"""GPU nodes as the suites see them: one list call, however many nodes (the 500-node bar)."""

from __future__ import annotations

from dataclasses import dataclass

from conformance import labels as L
from conformance.cluster.client import Cluster


@dataclass(frozen=True)
class GpuNode:
    name: str
    labels: dict[str, str]
    capacity: dict[str, str]
    allocatable: dict[str, str]
    taints: tuple[dict, ...]
    ready: bool

    def label(self, key: str) -> str | None:
        return self.labels.get(key)

    def int_label(self, key: str) -> int | None:
        try:
            return int(self.labels[key])
        except (KeyError, ValueError):
            return None

    @property
    def gpu_resources(self) -> dict[str, int]:
        return L.gpu_resources(self.allocatable)

    @property
    def main_resource(self) -> tuple[str | None, int]:
        return L.gpu_resource_of(self.allocatable)

    def deploys(self, deploy_key: str) -> bool:
        """Whether the operator should run this operand here (its deploy label is not false)."""
        if self.labels.get(L.DEPLOY_OPERANDS) == "false":
            return False
        return self.labels.get(f"{L.DEPLOY_PREFIX}{deploy_key}", "true") != "false"


def _taint(t) -> dict:
    return {"key": t.key, "value": t.value, "effect": t.effect}


def list_gpu_nodes(cluster: Cluster) -> list[GpuNode]:
    """Nodes labelled ``nvidia.com/gpu.present=true`` (one list request)."""
    items = cluster.core.list_node(label_selector=f"{L.GPU_PRESENT}=true").items
    out = []
    for n in items:
        conditions = {c.type: c.status for c in (n.status.conditions or [])}
        out.append(GpuNode(
            name=n.metadata.name, labels=dict(n.metadata.labels or {}),
            capacity=dict(n.status.capacity or {}), allocatable=dict(n.status.allocatable or {}),
            taints=tuple(_taint(t) for t in (n.spec.taints or [])),
            ready=conditions.get("Ready") == "True",
        ))
    return sorted(out, key=lambda n: n.name)

