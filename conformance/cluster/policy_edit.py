"""Changing one field of the ClusterPolicy and putting it back, as the operator's own e2e does
(``tests/e2e/helpers`` ``ClusterPolicyClient.modify``): read-modify-write under
retry-on-conflict, restore only the field that was changed, then wait for the operands.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from conformance.cluster import rollout
from conformance.cluster.client import Cluster, Conflict
from conformance.cluster.waits import wait_for
from conformance.nvidia import clusterpolicy

CONFLICT_RETRIES = 5  # another writer (the operator's status updates) won the race this often
_ABSENT = object()


def _get(spec: dict, path: Sequence[str]) -> Any:
    node: Any = spec
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return copy.deepcopy(node)


def _set(spec: dict, path: Sequence[str], value: Any) -> None:
    node = spec
    for part in path[:-1]:
        node = node.setdefault(part, {})
    if value is _ABSENT:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = copy.deepcopy(value)


def update_spec(cluster: Cluster, name: str, change: Callable[[dict], None]) -> None:
    """Apply ``change`` to the live spec and replace it, again on a 409 with a fresh read."""
    for attempt in range(1, CONFLICT_RETRIES + 1):
        live = cluster.custom.get_cluster_custom_object(*clusterpolicy.API, name)
        change(live.setdefault("spec", {}))
        try:
            cluster.custom.replace_cluster_custom_object(*clusterpolicy.API, name, live)
            return
        except Conflict:
            if attempt == CONFLICT_RETRIES:
                raise

            time.sleep(0.2 * attempt)


@dataclass
class FieldChange:
    """One changed field of ClusterPolicy ``name``; :meth:`restore` puts the old value back."""

    cluster: Cluster
    name: str
    path: tuple[str, ...]
    saved: Any
    restored: bool = False

    def restore(self) -> None:
        if not self.restored:
            update_spec(self.cluster, self.name, lambda spec: _set(spec, self.path, self.saved))
            self.restored = True


def change_field(cluster: Cluster, name: str, path: Sequence[str], value: Any) -> FieldChange:
    """Set ``spec.<path>`` to ``value``; the returned change restores only that field."""
    live = cluster.custom.get_cluster_custom_object(*clusterpolicy.API, name)
    change = FieldChange(cluster, name, tuple(path), _get(live.get("spec") or {}, path))
    update_spec(cluster, name, lambda spec: _set(spec, path, value))
    return change


def wait_operands_settled(cluster: Cluster, namespace: str, timeout: float) -> None:
    """Until every operand DaemonSet of ``namespace`` is rolled out and Ready."""
    wait_for(f"the operand DaemonSets in {namespace} to settle",
             lambda: not rollout.daemonsets_not_done(cluster, namespace), timeout=timeout,
             interval=1.0,
             describe_last=lambda: "; ".join(rollout.daemonsets_not_done(cluster, namespace)))
