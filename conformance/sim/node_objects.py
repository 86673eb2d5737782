"""The simulated nodes as the stand-in writes them: created from the plan (KWOK plays them),
their labels, taints, capacity and allocatable kept to it; and, while the controller loop
follows a sharing config, only what sharing decides (GFD's sharing labels, the plugin's GPU
resources)."""

from __future__ import annotations

import re

from conformance.cluster.client import Cluster
from conformance.nvidia import labels as L
from conformance.sim.objects import STANDIN_LABEL
from conformance.sim.operator_plan import NodePlan


def apply_nodes(cluster: Cluster, plans: list[NodePlan], *, operator: bool = True) -> None:
    existing = {n.metadata.name: n for n in cluster.core.list_node().items}
    for plan in plans:
        node = existing.pop(plan.name, None)
        if node is None:
            cluster.core.create_node({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": plan.name, "labels": plan.labels,
                             "annotations": {"kwok.x-k8s.io/node": "fake"}},
                "spec": {"taints": plan.taints or None},
                "status": {"capacity": plan.resources,
                           "allocatable": plan.allocatable or plan.resources},
            })
            continue
        _update_node(cluster, node, plan, operator=operator)
    for name, node in existing.items():
        if (node.metadata.labels or {}).get(STANDIN_LABEL) == "true":
            cluster.core.delete_node(name)


def _update_node(cluster: Cluster, node, plan: NodePlan, *, operator: bool = True) -> None:
    current = node.metadata.labels or {}
    label_patch: dict[str, str | None] = {
        k: None for k in current
        if k.startswith("nvidia.com/") and k not in plan.labels
        # deploy.* also belongs to the controller loop, while there is an operator
        and not (operator and k.startswith(L.DEPLOY_PREFIX))
        and k != L.DEVICE_PLUGIN_CONFIG  # the user's choice of sharing config for the node
    }
    label_patch.update({k: v for k, v in plan.labels.items() if current.get(k) != v})
    taints = [t.to_dict() if hasattr(t, "to_dict") else t for t in (node.spec.taints or [])]
    taints = [{k: v for k, v in t.items() if v is not None and k != "time_added"}
              for t in taints]
    patch: dict = {}
    if label_patch:
        patch["metadata"] = {"labels": label_patch}
    if _taint_keys(taints) != _taint_keys(plan.taints):
        patch["spec"] = {"taints": plan.taints}
    if patch:
        cluster.core.patch_node(plan.name, patch)
    status = status_change(plan, node)
    if status:
        cluster.core.patch_node_status(plan.name, {"status": status})


def status_change(plan: NodePlan, node, keep=lambda _resource: True) -> dict:
    """The node status patch that makes its capacity and allocatable the plan's (only the
    resources ``keep`` selects; GPU resources the plan does not name are removed)."""
    status = {}
    for part, want, have in (
            ("capacity", plan.resources, node.status.capacity or {}),
            # a refusing plugin's GPUs stay in capacity, with nothing allocatable
            ("allocatable", plan.allocatable or plan.resources, node.status.allocatable or {})):
        changed: dict[str, str | None] = {k: v for k, v in want.items()
                                          if keep(k) and have.get(k) != v}
        changed.update({k: None for k in have if L.is_gpu_resource(k) and k not in want})
        if changed:
            status[part] = changed
    return status


def _taint_keys(taints: list[dict]) -> set[tuple]:
    return {(t.get("key"), t.get("value"), t.get("effect")) for t in taints}


_SHARING_LABEL = re.compile(r"^nvidia\.com/(gpu|mig-.+)\.(product|replicas|sharing-strategy)$"
                            r"|^nvidia\.com/mps\.capable$")


def sync_sharing(cluster: Cluster, plans: list[NodePlan], nodes: dict) -> None:
    """Patch what sharing decides on each node (GFD's sharing labels, the plugin's GPU
    resources) where it differs from the plan; leave every other label alone (driver
    upgrades, the user's own labels)."""
    for plan in plans:
        node = nodes.get(plan.name)
        if node is None or not plan.gpu:
            continue
        current = node.metadata.labels or {}
        labels = {k: v for k, v in plan.labels.items()
                  if _SHARING_LABEL.match(k) and current.get(k) != v}
        labels.update({k: None for k in current if _SHARING_LABEL.match(k)
                       and k not in plan.labels})
        if labels:
            cluster.core.patch_node(plan.name, {"metadata": {"labels": labels}})
        status = status_change(plan, node, keep=L.is_gpu_resource)
        if status:
            cluster.core.patch_node_status(plan.name, {"status": status})


def node_labels(cluster: Cluster) -> dict[str, dict[str, str]]:
    return {n.metadata.name: dict(n.metadata.labels or {}) for n in cluster.core.list_node().items}
