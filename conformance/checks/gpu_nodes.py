"""GPU nodes as the suites see them: labels, resources, taints and readiness of one node."""

from __future__ import annotations

from dataclasses import dataclass

from conformance.nvidia import labels as L


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


def from_api(node) -> GpuNode:
    """A GpuNode from a ``V1Node`` the API returned."""
    conditions = {c.type: c.status for c in (node.status.conditions or [])}
    return GpuNode(
        name=node.metadata.name, labels=dict(node.metadata.labels or {}),
        capacity=dict(node.status.capacity or {}),
        allocatable=dict(node.status.allocatable or {}),
        taints=tuple({"key": t.key, "value": t.value, "effect": t.effect}
                     for t in (node.spec.taints or [])),
        ready=conditions.get("Ready") == "True",
    )
