"""Operand rollout as the GPU Operator's own e2e judges it: every operand pod Ready on every GPU
node it belongs on, with at most N restarts (tests/scripts/checks.sh, verify-operand-restarts).

One list of DaemonSets and one list of pods (read by ``conformance.cluster.views``) serve every
operand and every node, so the cost does not grow with the node count.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class OperatorView:
    """The operator namespace at one moment: DaemonSets by name, pods by ``app`` label."""

    namespace: str
    daemonsets: dict[str, object]
    pods_by_app: dict[str, list] = field(default_factory=dict)


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


def rollout(view: OperatorView, ds_name: str, app: str, nodes: list[str]) -> Rollout:
    """How far DaemonSet ``ds_name`` (pods labelled ``app``) has rolled out onto ``nodes``."""
    if ds_name not in view.daemonsets:
        return Rollout(nodes, nodes, [], False)
    by_node: dict[str, list] = {}
    for pod in view.pods_by_app.get(app, []):
        by_node.setdefault(pod.spec.node_name, []).append(pod)
    missing = [n for n in nodes if n not in by_node]
    not_ready = [n for n in nodes if n in by_node and not any(map(pod_ready, by_node[n]))]
    return Rollout(nodes, missing, not_ready, True)


def restarts(view: OperatorView, apps: set[str]) -> list[tuple[str, str, int]]:
    """(pod, container, restartCount) for every container of the pods labelled ``apps``."""
    return [(pod.metadata.name, c.name, c.restart_count or 0)
            for app, pods in view.pods_by_app.items() if app in apps
            for pod in pods for c in pod.status.container_statuses or []]
