"""Scheduling / taints: tainted GPU nodes take GPU pods that tolerate nvidia.com/gpu only.

Checklist:
- SCHED-TAINT-001 on every tainted GPU node (up to a sample), a GPU pod with the standard
  nvidia.com/gpu toleration schedules, and a pod without it stays Pending with the taint named
"""

from __future__ import annotations

import pytest

from conformance.checks import taints
from conformance.cluster import pods
from conformance.cluster.pods import PodSpec
from conformance.plugin.api import not_applicable, own_namespace

NODES_SAMPLED = 3


@pytest.mark.requirement("SCHED-TAINT-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_tainted_gpu_nodes_take_only_tolerating_pods(request, cluster, gpu_env, require_gpu_nodes):
    tainted = [n for n in require_gpu_nodes
               if any(t["effect"] in ("NoSchedule", "NoExecute") for t in n.taints)]
    if not tainted:
        not_applicable("no GPU node is tainted: GPU nodes also take pods that need no GPU")
    problems = []
    # Nodes with a taint GPU pods do not tolerate come first: that is the misconfiguration.
    tainted.sort(key=lambda n: not taints.untolerated_taints(n))
    namespace = own_namespace(request)
    for node in tainted[:NODES_SAMPLED]:
        pin = {"kubernetes.io/hostname": node.name}
        resource = node.main_resource[0]
        gpu_pod = pods.create(cluster, namespace, PodSpec("tolerating", gpus=1 if resource else
                                                          None, resource=resource or "",
                                                          node_selector=pin), gpu_env.run_id)
        _landed, refusal = pods.wait_placement(cluster, namespace, gpu_pod)
        if refusal is not None:
            bad = taints.untolerated_taints(node)
            problems.append(
                f"{node.name}: a GPU pod tolerating nvidia.com/gpu cannot schedule"
                + (f"; taint(s) it does not tolerate: {taints.describe(bad)}"
                   if bad else f": {refusal}"))
        plain = pods.create(cluster, namespace, PodSpec("intolerant", gpus=None,
                                                        tolerate_gpu_taint=False,
                                                        node_selector=pin), gpu_env.run_id)
        landed, reason = pods.wait_placement(cluster, namespace, plain)
        if landed:
            problems.append(f"{node.name}: a pod without the toleration was scheduled there "
                            "(the taint does not keep non-GPU pods off)")
        elif "taint" not in reason:
            problems.append(f"{node.name}: a pod without toleration is Pending, but not for "
                            f"the taint: {reason}")
    assert not problems, "; ".join(problems)
