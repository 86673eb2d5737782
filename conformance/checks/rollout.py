"""Operand rollout as the GPU Operator's own e2e judges it: every operand pod Ready on every GPU
node it belongs on, with at most N restarts (tests/scripts/checks.sh, verify-operand-restarts).

One list of DaemonSets and one list of pods (read by ``conformance.cluster.views``) serve every
operand and every node, so the cost does not grow with the node count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from conformance.nvidia.labels import DEPLOY_PREFIX


@dataclass
class OperatorView:
    """The operator namespace at one moment: DaemonSets by name, pods by ``app`` label."""

    namespace: str
    daemonsets: dict[str, object]
    pods_by_app: dict[str, list] = field(default_factory=dict)

    def operand_pods_on(self, node: str) -> list[str]:
        """The live pods on ``node`` of the operand DaemonSets: those that pick their nodes by
        a ``nvidia.com/gpu.deploy.*`` label, the operator's per-node switch. Not the
        operator's own pod (a Deployment, on a GPU node in a one-node cluster: the H200
        node), nor an NFD worker sharing the namespace."""
        operand_sets = {name for name, ds in self.daemonsets.items()
                        if any(k.startswith(DEPLOY_PREFIX)
                               for k in ds.spec.template.spec.node_selector or {})}
        return sorted(
            p.metadata.name for pods in self.pods_by_app.values() for p in pods
            if p.spec.node_name == node and p.metadata.deletion_timestamp is None
            and any(o.kind == "DaemonSet" and o.name in operand_sets
                    for o in p.metadata.owner_references or []))


# A container that failed again within this long after restarting twice is crash-looping: it
# is Ready for the second or so each restart runs, and a check must not catch it then.
CRASH_LOOP_WINDOW = timedelta(seconds=60)


def crash_looping(pod, now: datetime | None = None) -> bool:
    """A container restarted at least twice whose last run failed within the window."""
    now = now or datetime.now(UTC)
    for status in pod.status.container_statuses or []:
        last = status.last_state.terminated if status.last_state else None
        if (status.restart_count >= 2 and last is not None and last.exit_code != 0
                and last.finished_at is not None
                and now - last.finished_at < CRASH_LOOP_WINDOW):
            return True
    return False


def pod_ready(pod) -> bool:
    if pod.metadata.deletion_timestamp is not None:
        return False
    return (any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
            and not crash_looping(pod))


@dataclass
class Rollout:
    expected: list[str]
    missing: list[str]      # expected nodes with no pod of the operand
    not_ready: list[str]    # expected nodes whose pod is not Ready
    daemonset_found: bool

    @property
    def ok(self) -> bool:
        return self.daemonset_found and not self.missing and not self.not_ready


def rollout(pods: list, nodes: list[str], *, found: bool = True) -> Rollout:
    """How far a DaemonSet whose pods are ``pods`` has rolled out onto ``nodes``
    (``found=False``: the DaemonSet itself is missing)."""
    if not found:
        return Rollout(nodes, nodes, [], False)
    by_node: dict[str, list] = {}
    for pod in pods:
        by_node.setdefault(pod.spec.node_name, []).append(pod)
    missing = [n for n in nodes if n not in by_node]
    not_ready = [n for n in nodes if n in by_node and not any(map(pod_ready, by_node[n]))]
    return Rollout(nodes, missing, not_ready, True)


def restarts(pods: list) -> list[tuple[str, str, int]]:
    """(pod, container, restartCount) for every container of ``pods``."""
    return [(pod.metadata.name, c.name, c.restart_count or 0)
            for pod in pods for c in pod.status.container_statuses or []]
