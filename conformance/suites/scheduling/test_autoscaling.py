"""Scheduling / cluster autoscaling: a GPU node pool grows for a pending GPU pod and shrinks
back once it is gone (CNCF Kubernetes AI Conformance ``cluster_autoscaling``, a MUST;
KAR-0055: scale accelerator node groups up and down on pending pods that request them).

Checklist (the pool: a Karpenter NodePool or a Cluster Autoscaler node group; ``N`` GPUs free
on its nodes now):
- SCHED-AUTOSCALE-001 N+1 one-GPU pods selecting the pool (tolerating its taints): N run on
  its nodes, the last stays Pending until the autoscaler adds a node; it runs there; once the
  pods are deleted the added node goes and the pool is back to its size

Not-applicable where the cluster runs no node autoscaler. Adding a node costs money on a cloud:
on an existing cluster the check runs only when ``--autoscaling-pool`` names the pool (not run,
with the reason, otherwise); on the sim it uses the one NodePool. Cleanup deletes what the
check added even when the autoscaler does not (``cluster/autoscaling.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from conformance.checks import autoscaling as asc
from conformance.cluster import autoscaling as scaling
from conformance.cluster import evidence as ev
from conformance.cluster import pods
from conformance.cluster.pods import PodSpec
from conformance.cluster.waits import WaitTimeout
from conformance.plugin.api import finding, not_applicable, not_run
from conformance.plugin.fixtures import failed


@dataclass(frozen=True)
class Pool:
    """The pool the check grows, and what its NodePool says (None: Cluster Autoscaler)."""

    choice: asc.PoolChoice
    nodepool: asc.NodePool | None

    @property
    def scale_down_timeout_s(self) -> float:
        return (self.nodepool.scale_down_timeout_s if self.nodepool
                else asc.CA_SCALE_DOWN_TIMEOUT_S)


@pytest.fixture
def autoscaled_pool(request, cluster, gpu_env, attachments) -> Pool:
    """The pool to grow (not-applicable without a node autoscaler, not run unless opted in);
    the autoscaler's view of it is attached to the report when the check fails."""
    try:
        choice = asc.PoolChoice.parse(gpu_env.options.autoscaling_pool)
    except ValueError as exc:
        not_run(str(exc))
    detected = scaling.detect(cluster)
    nodepools = scaling.nodepools(cluster) if asc.KARPENTER in detected else []
    decision = asc.choose(detected, choice, [p.name for p in nodepools],
                          opted_in=gpu_env.target == "sim")
    if decision.pool is None:
        (not_run if decision.applicable else not_applicable)(decision.reason)
    pool = decision.pool
    nodepool = next((p for p in nodepools if p.name == pool.pool), None)

    def attach_autoscaler_view() -> None:  # runs before the namespace (and its dump) goes
        if failed(request.node):
            attachments.append(ev.Evidence("autoscaler.yaml",
                                           scaling.autoscaler_view(cluster, pool)))

    request.addfinalizer(attach_autoscaler_view)
    return Pool(pool, nodepool if pool.mechanism == asc.KARPENTER else None)


@pytest.mark.requirement("SCHED-AUTOSCALE-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_gpu_pool_grows_for_a_pending_pod_and_shrinks_back(request, cluster, gpu_env,
                                                           autoscaled_pool, namespace):
    choice = autoscaled_pool.choice
    before = scaling.pool_nodes(cluster, choice)
    created: list[str] = []

    def remove_what_the_check_added() -> None:  # its pods first: a pending one would get a node
        for name in created:
            pods.delete(cluster, namespace, name)
        left = scaling.remove_added(cluster, choice, before)
        assert not left, f"cleanup: {choice} still has the node(s) the check added: {left}"

    request.addfinalizer(remove_what_the_check_added)
    spec = PodSpec("autoscale", gpus=1, node_selector=choice.selector,
                   tolerations=asc.tolerations(autoscaled_pool.nodepool.taints
                                               if autoscaled_pool.nodepool else ()),
                   annotations=asc.KEEP_WHILE_CHECKED)
    for _ in range(asc.pods_to_create(scaling.free_gpus(cluster, choice)) - 1):
        created.append(pods.create(cluster, namespace, spec, gpu_env.run_id))
        pods.wait_scheduled(cluster, namespace, created[-1])  # the pool's free GPUs, taken
    fillers = list(created)
    created.append(pods.create(cluster, namespace, spec, gpu_env.run_id))
    pending = created[-1]
    grown = scaling.wait_grown(cluster, choice, before, namespace, pending)
    if scaling.evicted_on_arrival(grown):  # once: the node is registered now
        created.append(pods.create(cluster, namespace, spec, gpu_env.run_id))
        pending = created[-1]
        grown = scaling.wait_grown(cluster, choice, before, namespace, pending)
    if grown.gone:
        not_run(f"pending pod {pending} was deleted while the check waited for {choice} to "
                f"grow, not by the check ({grown.gone}): whether the pool grows for it was "
                "not seen")
    if grown.pod_node and grown.pod_node not in grown.added:
        not_run(f"pending pod {pending} ran on {grown.pod_node}, a node {choice} already had: "
                "a GPU there came free after the check counted the pool's free GPUs (another "
                "workload's pod ended), so whether the pool grows was not seen")
    assert grown.pod_node, (
        f"{choice} did not add a node for pending one-GPU pod {pending} "
        f"({len(before)} nodes in the pool, their {len(fillers)} free GPUs taken by the "
        "check's other pods): "
        + (f"Karpenter: {grown.refused} (no GPU instance type in the NodePool?)"
           if grown.refused else f"added {sorted(grown.added) or 'none'} within "
           f"{scaling.SCALE_UP_TIMEOUT_S:.0f}s"))
    for name in created:
        pods.delete(cluster, namespace, name)
    blocked = autoscaled_pool.nodepool and autoscaled_pool.nodepool.scale_down_blocked
    assert not blocked, blocked
    try:
        took = scaling.wait_shrunk(cluster, choice, grown.added,
                                   autoscaled_pool.scale_down_timeout_s)
    except WaitTimeout as exc:
        raise AssertionError(f"scale-down: {choice} kept the node it added after its pods "
                             f"were deleted: {exc}") from None
    finding(request, f"{choice} grew from {len(before)} to {len(before) + len(grown.added)} "
                     f"nodes for a pending one-GPU pod (added {', '.join(sorted(grown.added))}, "
                     f"the pod ran there), and was back to {len(before)} {took:.0f}s after "
                     "its pods were deleted")
