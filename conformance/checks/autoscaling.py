"""Cluster autoscaling (CNCF AI Conformance ``cluster_autoscaling``, KAR-0055): which node
autoscaler a cluster runs, which node pool the check may grow, and what it waits for.

Pure decisions over what discovery, the autoscaler's objects and the nodes say
(``cluster/autoscaling.py`` reads them, ``suites/scheduling/test_autoscaling.py`` runs the
check). The check adds a node: on a cloud that costs money, so it runs on an existing cluster
only when ``--autoscaling-pool`` names the pool (the sim's pool costs nothing: there it picks
the one NodePool by itself).

Autoscalers, by what betrays them:

- Karpenter (``karpenter.sh`` NodePool, v1 since Karpenter v1.0; sigs.k8s.io/karpenter v1.15.0
  here): a NodePool's nodes carry ``karpenter.sh/nodepool=<name>``; its ``spec.disruption``
  says when empty nodes go (``consolidateAfter``, ``Never``: never) and its
  ``spec.template.spec.taints`` what pods must tolerate there.
- Cluster Autoscaler (kubernetes/autoscaler): no API of its own; it writes its status to the
  ConfigMap ``kube-system/cluster-autoscaler-status`` (``--write-status-configmap``, on by
  default; managed offerings such as GKE keep it too). A node group is named by a node label
  the platform sets (GKE ``cloud.google.com/gke-nodepool``, EKS
  ``eks.amazonaws.com/nodegroup``, AKS ``kubernetes.azure.com/agentpool``): the option gives it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

# --- Karpenter facts (sigs.k8s.io/karpenter v1.15.0, pkg/apis/v1) -------------------------------
KARPENTER_GROUP = "karpenter.sh"
KARPENTER_VERSION = "v1"
NODEPOOL_LABEL = "karpenter.sh/nodepool"  # on every node a NodePool launched
NEVER = "Never"  # disruption.consolidateAfter: empty nodes are never removed
# On the check's pods: neither autoscaler may move them while the check watches where they
# run. Karpenter treats a bare pod as disruptable: its consolidation may drain the node the
# pool just added for the pending pod and evict it (the pod is gone: nothing recreates a
# bare pod), and the check would wait for a pod that no longer exists. The check deletes its
# pods itself before it waits for the scale-down.
KEEP_WHILE_CHECKED = {"karpenter.sh/do-not-disrupt": "true",
                      "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
# --- Cluster Autoscaler facts (kubernetes/autoscaler cluster-autoscaler) ------------------------
CA_STATUS_NAMESPACE = "kube-system"
CA_STATUS_CONFIGMAP = "cluster-autoscaler-status"

KARPENTER = "karpenter"
CLUSTER_AUTOSCALER = "cluster-autoscaler"
MECHANISMS = (KARPENTER, CLUSTER_AUTOSCALER)
OPTION = "--autoscaling-pool"
OPT_IN = (f"{OPTION} karpenter:NODEPOOL or {OPTION} cluster-autoscaler:LABEL=VALUE (a node "
          "label of the node group)")

# Karpenter empties and removes a node consolidateAfter after its last pod went, once its
# disruption controller (a 10 s poll) has validated the decision; 2 minutes covers that on a
# loaded cluster. Cluster Autoscaler waits --scale-down-unneeded-time (10 min by default) plus
# its scan interval: 15 minutes.
KARPENTER_SCALE_DOWN_SLACK_S = 120.0
CA_SCALE_DOWN_TIMEOUT_S = 900.0


def detect(served: Mapping[str, Collection[str]], ca_status: bool) -> list[str]:
    """The node autoscalers the cluster shows: Karpenter's API, Cluster Autoscaler's status."""
    found = [KARPENTER] if "nodepools" in served.get(KARPENTER_GROUP, ()) else []
    return found + ([CLUSTER_AUTOSCALER] if ca_status else [])


@dataclass(frozen=True)
class PoolChoice:
    """``--autoscaling-pool MECHANISM:POOL`` parsed: a Karpenter NodePool's name, or a node
    group's LABEL=VALUE."""

    mechanism: str
    pool: str

    @classmethod
    def parse(cls, text: str | None) -> PoolChoice | None:
        if not text:
            return None
        mechanism, _, pool = text.partition(":")
        if mechanism not in MECHANISMS or not pool:
            raise ValueError(f"{OPTION} {text!r}: give {OPT_IN}")
        if mechanism == CLUSTER_AUTOSCALER and not re.fullmatch(r"[^=\s]+=[^=\s]*", pool):
            raise ValueError(f"{OPTION} {text!r}: a Cluster Autoscaler node group is "
                             "LABEL=VALUE, a node label its nodes carry")
        return cls(mechanism, pool)

    @property
    def selector(self) -> dict[str, str]:
        """The node labels of the pool's nodes (the check's pods select them too)."""
        if self.mechanism == KARPENTER:
            return {NODEPOOL_LABEL: self.pool}
        label, _, value = self.pool.partition("=")
        return {label: value}

    def __str__(self) -> str:
        return (f"Karpenter NodePool {self.pool}" if self.mechanism == KARPENTER
                else f"Cluster Autoscaler node group {self.pool}")


@dataclass(frozen=True)
class Decision:
    """The pool to grow, or why none: ``applicable`` False when the cluster runs no node
    autoscaler (the check is not-applicable), True when it runs one the check may not or
    cannot use (not run, with the reason)."""

    pool: PoolChoice | None
    reason: str = ""
    applicable: bool = True


def choose(detected: list[str], choice: PoolChoice | None, nodepools: list[str], *,
           opted_in: bool) -> Decision:
    """The pool the check grows. ``opted_in``: adding a node costs nothing here (the sim), so
    the one Karpenter NodePool may be picked without the option."""
    if not detected:
        return Decision(None, "no cluster autoscaler: the cluster serves no Karpenter NodePool "
                              f"({KARPENTER_GROUP}) and has no Cluster Autoscaler status "
                              f"(ConfigMap {CA_STATUS_NAMESPACE}/{CA_STATUS_CONFIGMAP})",
                        applicable=False)
    if choice is not None:
        if choice.mechanism not in detected:
            return Decision(None, f"{OPTION} names {choice.mechanism}, but the cluster shows "
                                  f"only {', '.join(detected)}")
        if choice.mechanism == KARPENTER and choice.pool not in nodepools:
            return Decision(None, f"no Karpenter NodePool named {choice.pool!r} (found: "
                                  f"{', '.join(nodepools) or 'none'})")
        return Decision(choice)
    if opted_in and KARPENTER in detected and len(nodepools) == 1:
        return Decision(PoolChoice(KARPENTER, nodepools[0]))
    found = f"found {', '.join(detected)}" + (f" (NodePools: {', '.join(nodepools)})"
                                              if nodepools else "")
    return Decision(None, f"opt-in: the check adds a node to a pool, which costs money on a "
                          f"cloud; {found}: pass {OPT_IN}")


# --- Karpenter NodePools ----------------------------------------------------------------------
@dataclass(frozen=True)
class NodePool:
    """What the check needs of a Karpenter NodePool: its taints and when it drops empty nodes."""

    name: str
    taints: tuple[dict[str, Any], ...] = ()
    consolidate_after: str = "0s"
    budgets: tuple[str, ...] = field(default=())  # disruption.budgets[].nodes

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> NodePool:
        spec = obj.get("spec") or {}
        template = (spec.get("template") or {}).get("spec") or {}
        disruption = spec.get("disruption") or {}
        return cls(obj["metadata"]["name"], tuple(template.get("taints") or ()),
                   str(disruption.get("consolidateAfter", "0s")),
                   tuple(str(b.get("nodes", "")) for b in disruption.get("budgets") or ()
                         if not b.get("schedule")))

    @property
    def scale_down_blocked(self) -> str | None:
        """Why this NodePool never removes an empty node, or None."""
        if self.consolidate_after == NEVER:
            return f"scale-down disabled: NodePool {self.name} has disruption.consolidateAfter "\
                   f"{NEVER}: Karpenter never removes its empty nodes"
        if "0" in self.budgets:
            return f"scale-down disabled: NodePool {self.name} has a disruption budget of 0 "\
                   "nodes at all times"
        return None

    @property
    def scale_down_timeout_s(self) -> float:
        return duration_s(self.consolidate_after) + KARPENTER_SCALE_DOWN_SLACK_S


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration_s(text: str) -> float:
    """A Go duration (``30s``, ``1h30m``, ``0s``) in seconds."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def tolerations(taints: tuple[dict[str, Any], ...]) -> list[dict[str, str]]:
    """Tolerations for a pool's taints (a dedicated GPU pool is tainted; the check's pods are
    meant for it)."""
    out = []
    for taint in taints:
        toleration = {"key": taint["key"], "effect": taint["effect"]}
        if taint.get("value"):
            toleration.update(operator="Equal", value=taint["value"])
        else:
            toleration["operator"] = "Exists"
        out.append(toleration)
    return out


def pods_to_create(free_gpus_in_pool: int) -> int:
    """N+1 one-GPU pods for a pool of N free GPUs: the last one fits only on a new node."""
    return max(free_gpus_in_pool, 0) + 1
