"""Pods that share one GPU, as rules over what was read: which sharing a node offers one-unit
pods (from its labels and resources), whether the pods' own view says they got one physical
GPU, and whether they started together. Pure: no API calls.

A node's sharing, first match wins:

- MIG: a resource ``nvidia.com/mig-<profile>`` with at least 2 units (the plugin's mixed
  strategy): each pod gets its own MIG instance, the instances of one GPU share its PCI bus id;
- MPS: ``nvidia.com/gpu.sharing-strategy=mps`` (the plugin's ``sharing.mps``) with replicas > 1;
- time-slicing: ``nvidia.com/gpu.replicas`` > 1 (``nvidia.com/gpu`` or, renamed,
  ``nvidia.com/gpu.shared``).

A node with whole GPUs only offers no way for two pods to share one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conformance.checks import taints
from conformance.checks.gpu_nodes import GpuNode
from conformance.nvidia import labels as L

TIME_SLICING, MPS, MIG = "time-slicing", "mps", "mig"
# Pods that started further apart than this did not share the measured window: it opens half a
# second (the ramp, gpu_kernels.interference.Window) after the go instant, so a copy later
# than that would measure some of the window with fewer sharers. 0.2 s leaves room for a
# sleeping process's wake-up on a loaded node and stays well inside the ramp.
MAX_START_SKEW_S = 0.2


@dataclass(frozen=True)
class Placement:
    """Where N one-unit pods can share one GPU: the node, the resource, how it is shared."""

    node: str
    resource: str
    sharing: str  # TIME_SLICING | MPS | MIG
    units_per_gpu: int  # replicas per GPU; for MIG the node's instances of that profile
    free: int

    @property
    def mode(self) -> str:
        """The words the findings use (gpu_kernels' "mode" of a point)."""
        return {TIME_SLICING: "time-sliced pods", MPS: "MPS pods",
                MIG: "pods on MIG instances"}[self.sharing]


def sharing_of(node: GpuNode) -> tuple[str, str, int] | None:
    """(sharing, resource, units per GPU) that the node offers one-unit pods, or None."""
    resources = node.gpu_resources
    mig = sorted(((n, r) for r, n in resources.items()
                  if r.startswith(L.MIG_RESOURCE_PREFIX) and n >= 2), reverse=True)
    if mig:
        return MIG, mig[0][1], mig[0][0]
    replicas = node.int_label(L.REPLICAS) or 1
    if replicas < 2:
        return None
    resource = next((r for r in (L.SHARED_RESOURCE, L.GPU_RESOURCE) if resources.get(r)), None)
    if resource is None:
        return None
    strategy = node.label(L.SHARING_STRATEGY)
    return (MPS if strategy == "mps" else TIME_SLICING), resource, replicas


def choose(nodes: Sequence[GpuNode], free: Mapping[str, Mapping[str, int]],
           ) -> Placement | None:
    """The node whose GPU lets the most one-unit pods share it (``free``: free units by node
    and resource); ready, schedulable for GPU pods, at least two units free."""
    best: Placement | None = None
    for node in nodes:
        if not node.ready or taints.untolerated_taints(node):
            continue
        found = sharing_of(node)
        if found is None:
            continue
        sharing, resource, per_gpu = found
        units = free.get(node.name, {}).get(resource, 0)
        if min(units, per_gpu) < 2:
            continue
        p = Placement(node.name, resource, sharing, per_gpu, units)
        if best is None or min(p.free, p.units_per_gpu) > min(best.free, best.units_per_gpu):
            best = p
    return best


def not_one_gpu(sharing: str, pods: Sequence[tuple[str, str | None, Mapping[str, Any]]],
                ) -> str | None:
    """Why pods (name, node, identity seen inside) did not share one physical GPU, or None.

    One physical GPU is one node and one PCI bus id. Time-slicing and MPS hand every pod the
    same GPU (one UUID); MIG hands each its own instance (distinct UUIDs) of that GPU.
    """
    if len(pods) < 2:
        return None
    missing = [name for name, _node, ident in pods if not ident.get("pci_bus_id")]
    if missing:
        return f"pod(s) {', '.join(missing)} reported no GPU (no PCI bus id): cannot tell " \
               "which GPU they got"
    gpus = {(node, ident["pci_bus_id"]) for _name, node, ident in pods}
    if len(gpus) > 1:
        seen = "; ".join(f"{name}: {node} {ident['pci_bus_id']} {ident.get('uuid')}"
                         for name, node, ident in pods)
        return f"the pods got different GPUs, not one shared GPU ({seen})"
    uuids = [ident.get("uuid") for _name, _node, ident in pods]
    if sharing == MIG and len(set(uuids)) < len(uuids):
        return (f"pods on MIG instances saw the same device UUID twice "
                f"({', '.join(map(str, uuids))}): not distinct instances")
    if sharing != MIG and len(set(uuids)) > 1:
        return f"pods on one GPU saw different UUIDs ({', '.join(map(str, uuids))})"
    return None


def _lateness(barrier: Mapping[str, Any]) -> float | None:
    """How long after its due instant a pod started (go instant + its first command's offset:
    a copy due later on purpose, a faulting copy, is not late)."""
    start = barrier.get("start_wall")
    if start is None:
        return None
    return start - barrier.get("due_wall", barrier.get("go_at", start))


def start_skew(barriers: Sequence[Mapping[str, Any]]) -> float | None:
    """How far apart the pods' measured starts were, each against its due instant (wall clock
    of their node), or None."""
    late = [_lateness(b) for b in barriers]
    if len(late) < 2 or any(x is None for x in late):
        return None
    return max(late) - min(late)  # type: ignore[type-var]


def skew_problem(names: Sequence[str], barriers: Sequence[Mapping[str, Any]],
                 bound: float = MAX_START_SKEW_S) -> str | None:
    """Why the pods' windows cannot count as one shared window, or None."""
    if len(barriers) < 2:
        return None
    if any(b.get("start_wall") is None for b in barriers):
        absent = [n for n, b in zip(names, barriers, strict=True) if b.get("start_wall") is None]
        return f"pod(s) {', '.join(absent)} never reached the go instant"
    skew = start_skew(barriers)
    assert skew is not None
    if skew <= bound:
        return None
    late = max(zip(names, barriers, strict=True), key=lambda nb: _lateness(nb[1]) or 0.0)
    why = (f"it was ready {late[1]['ready_wall'] - late[1]['go_at']:.1f} s after the go "
           "instant" if late[1].get("ready_wall", 0) > late[1].get("go_at", 0) else
           "it woke late")
    return (f"the pods started {skew:.3f} s apart, beyond the {bound} s bound: {late[0]} "
            f"was last ({why})")
