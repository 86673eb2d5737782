"""Operand rollout as the GPU Operator's own e2e checks it: every operand pod Ready on every GPU
node it belongs on, with at most N restarts (tests/scripts/checks.sh, verify-operand-restarts).

One list of DaemonSets and one list of pods in the operator namespace serve every operand and
every node, so the cost does not grow with the node count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubernetes.client.exceptions import ApiException

from conformance.checks.nodes import GpuNode
from conformance.cluster.client import Cluster

CLUSTER_POLICY = ("nvidia.com", "v1", "clusterpolicies")


@dataclass
class OperatorView:
    """The operator namespace at one moment: DaemonSets and pods by ``app`` label."""

    namespace: str
    daemonsets: dict[str, object]
    pods_by_app: dict[str, list] = field(default_factory=dict)

    @classmethod
    def read(cls, cluster: Cluster, namespace: str) -> OperatorView:
        dss = {d.metadata.name: d for d in cluster.apps.list_namespaced_daemon_set(namespace).items}
        pods: dict[str, list] = {}
        for pod in cluster.core.list_namespaced_pod(namespace).items:
            app = (pod.metadata.labels or {}).get("app")
            if app:
                pods.setdefault(app, []).append(pod)
        return cls(namespace, dss, pods)


def pod_ready(pod) -> bool:
    if pod.metadata.deletion_timestamp is not None:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))


@dataclass
class Rollout:
    expected: list[str]
    missing: list[str]      # expected nodes with no pod of the operand
    not_ready: list[str]    # expected nodes whose pod is not Ready
    daemonset_found: bool

    @property
    def ok(self) -> bool:
        return self.daemonset_found and not self.missing and not self.not_ready


def rollout(view: OperatorView, ds_name: str, app: str, nodes: list[GpuNode]) -> Rollout:
    expected = [n.name for n in nodes]
    if ds_name not in view.daemonsets:
        return Rollout(expected, expected, [], False)
    by_node: dict[str, list] = {}
    for pod in view.pods_by_app.get(app, []):
        by_node.setdefault(pod.spec.node_name, []).append(pod)
    missing = [n for n in expected if n not in by_node]
    not_ready = [n for n in expected if n in by_node and not any(map(pod_ready, by_node[n]))]
    return Rollout(expected, missing, not_ready, True)


def restarts(view: OperatorView, apps: set[str]) -> list[tuple[str, str, int]]:
    """(pod, container, restartCount) for every operand container."""
    out = []
    for app, pods in view.pods_by_app.items():
        if app not in apps:
            continue
        for pod in pods:
            for c in pod.status.container_statuses or []:
                out.append((pod.metadata.name, c.name, c.restart_count or 0))
    return out


def read_cluster_policy(cluster: Cluster) -> dict | None:
    """The (first) ClusterPolicy, or None when the CRD or the object is absent."""
    try:
        items = cluster.custom.list_cluster_custom_object(*CLUSTER_POLICY).get("items", [])
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return items[0] if items else None


def spec_enabled(policy: dict | None, path: str, default: bool = True) -> bool:
    """``driver.enabled``-style switch of the ClusterPolicy spec (CRD defaults when unset)."""
    node = (policy or {}).get("spec", {})
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return bool(node)
