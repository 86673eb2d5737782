"""Which node taints a GPU pod with the standard ``nvidia.com/gpu`` toleration tolerates."""

from __future__ import annotations

from conformance.checks.gpu_nodes import GpuNode
from conformance.nvidia import labels as L


def tolerated(taint: dict) -> bool:
    """Whether a GPU pod with the standard nvidia.com/gpu toleration tolerates the taint."""
    if taint.get("effect") not in ("NoSchedule", "NoExecute"):
        return True
    return taint.get("key") == L.GPU_TOLERATION["key"]


def untolerated_taints(node: GpuNode) -> list[dict]:
    return [t for t in node.taints if not tolerated(t)]


def describe(taints: list[dict]) -> str:
    return ", ".join(f"{t['key']}={t.get('value') or ''}:{t['effect']}" for t in taints)
