"""GPU nodes as the suites see them, found the way the cluster shows them.

A cluster run by the GPU Operator labels its GPU nodes ``nvidia.com/gpu.present=true``; one
run by the device plugin chart, NVIDIA's kind demo or a managed node pool may not. So a node
is a GPU node when any of these says so, and each GpuNode keeps which did (its evidence):

- capacity: it advertises an NVIDIA GPU resource (nvidia.com/gpu, nvidia.com/gpu.shared,
  nvidia.com/mig-*), the device plugin's word;
- GFD: it carries GPU Feature Discovery's labels (gpu.product or gpu.count);
- NFD: Node Feature Discovery saw an NVIDIA PCI device (``pci-10de.present=true``);
- operator: the GPU Operator's ``nvidia.com/gpu.present=true``;
- thin evidence, where none of the above shows: any other ``nvidia.com/gpu.*`` label (one GFD
  or operator label left behind), or the cloud's word (``nvidia/cloud_gpus.py``: a GPU
  instance type such as ``g5.xlarge`` or ``p4d.24xlarge``, a managed pool's accelerator label).

A node with PCI or label evidence but no GPU resource stays a GPU node: that disagreement is
what STACK-DP-002 reports (naming the evidence, thin or not), instead of the node silently not
counting. Thin evidence is kept apart (:data:`THIN`) so a message can say the node was taken
for a GPU node on that alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.nvidia import cloud_gpus
from conformance.nvidia import labels as L

CAPACITY, GFD, NFD, OPERATOR = "capacity", "GFD labels", "NFD PCI 10de", "operator label"
NVIDIA_LABEL = "label"  # "label nvidia.com/gpu.family=ampere": one nvidia.com/gpu.* label
THIN = (NVIDIA_LABEL, "cloud ")  # how thin evidence begins
_GPU_LABEL_PREFIX = "nvidia.com/gpu."


@dataclass(frozen=True)
class GpuNode:
    name: str
    labels: dict[str, str]
    capacity: dict[str, str]
    allocatable: dict[str, str]
    taints: tuple[dict, ...]
    ready: bool
    evidence: tuple[str, ...] = ()

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

    @property
    def advertises_gpus(self) -> bool:
        return any(L.gpu_resources(self.capacity).values())

    def describe_evidence(self) -> str:
        return f"{self.name}: " + (", ".join(self.evidence) or "no GPU evidence")


def evidence_of(labels: dict[str, str], capacity: dict[str, str]) -> tuple[str, ...]:
    """What shows that a node has NVIDIA GPUs (empty: it is not a GPU node)."""
    found = []
    advertised = {k: v for k, v in L.gpu_resources(capacity).items() if v}
    if advertised:
        found.append(CAPACITY + " " + ", ".join(f"{k}={v}" for k, v in sorted(advertised.items())))
    if L.PRODUCT in labels or L.COUNT in labels:
        found.append(GFD)
    if labels.get(L.NFD_PCI_NVIDIA) == "true":
        found.append(NFD)
    if labels.get(L.GPU_PRESENT) == "true":
        found.append(OPERATOR)
    if found:
        return tuple(found)
    return _thin_evidence(labels)


def _thin_evidence(labels: dict[str, str]) -> tuple[str, ...]:
    """A node's GPU evidence where no resource, GFD, NFD or operator label shows one."""
    gpu_labels = sorted(k for k in labels if k.startswith(_GPU_LABEL_PREFIX)
                        and not (k == L.GPU_PRESENT and labels[k] != "true"))
    found = [f"{NVIDIA_LABEL} {k}={labels[k]}" for k in gpu_labels[:1]]
    cloud = cloud_gpus.cloud_gpu_evidence(labels)
    if cloud:
        found.append(cloud)
    return tuple(found)


def is_thin(evidence: tuple[str, ...]) -> bool:
    """Whether a GPU node was found by thin evidence alone (a label left behind, the cloud)."""
    return bool(evidence) and all(e.startswith(THIN) for e in evidence)


def from_api(node) -> GpuNode:
    """A GpuNode from a ``V1Node`` the API returned (with its GPU evidence)."""
    conditions = {c.type: c.status for c in (node.status.conditions or [])}
    labels = dict(node.metadata.labels or {})
    capacity = dict(node.status.capacity or {})
    return GpuNode(
        name=node.metadata.name, labels=labels, capacity=capacity,
        allocatable=dict(node.status.allocatable or {}),
        taints=tuple({"key": t.key, "value": t.value, "effect": t.effect}
                     for t in (node.spec.taints or [])),
        ready=conditions.get("Ready") == "True",
        evidence=evidence_of(labels, capacity),
    )


def gpu_nodes(nodes) -> list[GpuNode]:
    """The GPU nodes among ``V1Node`` objects, by name."""
    found = (from_api(n) for n in nodes)
    return sorted((n for n in found if n.evidence), key=lambda n: n.name)
