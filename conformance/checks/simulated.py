"""Nodes whose GPUs are simulated: the one rule, decided per node from what the node shows.

A simulated node advertises GPUs no pod can open: KWOK plays the node (no kubelet, so no
container runs and no log is served), or Run:ai's fake-gpu-operator adds GPUs to a CPU node.
The checks that need real GPUs are not run there, with the reason, instead of reading the
silence as a broken driver or toolkit. The markers:

- KWOK: the annotation ``kwok.x-k8s.io/node: fake`` its nodes carry (KWOK manages the nodes
  selected by it), or a kubelet version KWOK reports (``fake``, or one naming kwok);
- fake-gpu-operator: the label ``run.ai/simulated-gpu-node-pool`` (any value: the node pool
  its README tells users to put on the nodes to fake) or ``run.ai/fake.gpu=true``.
"""

from __future__ import annotations

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
FAKE_GPU_POOL_LABEL = "run.ai/simulated-gpu-node-pool"
FAKE_GPU_LABEL = "run.ai/fake.gpu"


def why_simulated(labels: dict[str, str], annotations: dict[str, str],
                  kubelet_version: str | None) -> str | None:
    """Why a node's GPUs are simulated (the marker it carries), or None for a real node."""
    if annotations.get(KWOK_ANNOTATION) == "fake":
        return f"a KWOK node (annotation {KWOK_ANNOTATION}=fake)"
    version = (kubelet_version or "").lower()
    if version == "fake" or "kwok" in version:
        return f"a KWOK node (kubelet version {kubelet_version!r})"
    if FAKE_GPU_POOL_LABEL in labels:
        return (f"fake-gpu-operator simulates its GPUs (label {FAKE_GPU_POOL_LABEL}="
                f"{labels[FAKE_GPU_POOL_LABEL]})")
    if labels.get(FAKE_GPU_LABEL) == "true":
        return f"fake-gpu-operator simulates its GPUs (label {FAKE_GPU_LABEL}=true)"
    return None


def simulated_nodes(nodes) -> dict[str, str]:
    """Node name -> why it is simulated, for the simulated ones among ``V1Node`` objects."""
    found = {}
    for node in nodes:
        info = node.status.node_info if node.status else None
        reason = why_simulated(dict(node.metadata.labels or {}),
                               dict(node.metadata.annotations or {}),
                               info.kubelet_version if info else None)
        if reason:
            found[node.metadata.name] = reason
    return found


def summary(simulated: dict[str, str], names: list[str], limit: int = 3) -> str:
    """``names`` (all simulated) and why, in a line."""
    shown = "; ".join(f"{n} is {simulated[n]}" for n in names[:limit])
    more = f" (and {len(names) - limit} more)" if len(names) > limit else ""
    return f"every GPU node is simulated (no pod can open its GPUs): {shown}{more}"
