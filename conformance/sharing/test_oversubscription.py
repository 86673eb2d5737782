"""Sharing / oversubscription: replicas one-slice pods share the GPUs; one more stays Pending.

Checklist (gpu-operator update-clusterpolicy.sh: 5 replicas of nvidia.com/gpu: 1 on one GPU):
- SHARE-OVS-001 a time-sliced node takes GPUs x replicas one-slice pods; pod +1 stays Pending
  with Insufficient <resource>, and freeing one slice lets it schedule
- SHARE-FRGO-001 with failRequestsGreaterThanOne a request for 2 slices is refused at admission
  (UnexpectedAdmissionError); without it, such a request is admitted
"""

from __future__ import annotations

import pytest

from conformance import labels as L
from conformance.checks import pods, scheduling, sharing
from conformance.checks.pods import PodSpec
from conformance.plugin import not_applicable


def _shared_nodes(nodes):
    return [n for n in nodes if (n.int_label(L.REPLICAS) or 1) > 1
            and not scheduling.untolerated_taints(n)]


@pytest.mark.requirement("SHARE-OVS-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_replicas_pods_share_and_one_more_waits(cluster, namespace, gpu_env, require_gpu_nodes):
    shared = _shared_nodes(require_gpu_nodes)
    if not shared:
        not_applicable("no GPU node advertises time-sliced replicas")
    choice = scheduling.pick_node(cluster, shared, shared=True)
    assert choice is not None, "no shared GPU node has free slices"
    node, resource, free = choice
    result = scheduling.fill_node(cluster, namespace, gpu_env.run_id, node, resource, free,
                                  "slice")
    assert f"Insufficient {resource}" in result.overflow_reason, (
        f"slice {free + 1} on {node.name} is Pending for another reason: "
        f"{result.overflow_reason}")
    in_use = node.gpu_resources[resource] - free
    # The fill proves the scheduler admits exactly what a node advertises; so on every shared
    # node what fits is its allocatable, and it must be what its labels promise.
    fits = {n.name: n.main_resource[1] for n in shared}
    fits[node.name] = len(result.placed) + in_use
    broken = [f"{n.name} takes {fits[n.name]} one-slice pods, but its {n.label(L.COUNT)} GPUs x "
              f"{n.label(L.REPLICAS)} replicas promise {_promised(n)}"
              for n in shared if fits[n.name] != _promised(n)]
    assert not broken, "; ".join(broken[:5])


def _promised(node) -> int:
    return (node.int_label(L.COUNT) or 0) * (node.int_label(L.REPLICAS) or 1)


@pytest.mark.requirement("SHARE-FRGO-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_fail_requests_greater_than_one(cluster, cluster_policy, namespace, gpu_env,
                                        require_gpu_nodes):
    docs = sharing.read(cluster, cluster_policy, gpu_env.options.operator_namespace)
    shared = _shared_nodes(require_gpu_nodes)
    if docs is None or not shared:
        not_applicable("no time-sliced GPU node")
    key, cfg = sharing.section(docs.docs.get(docs.default_key) or {})
    fail_gt_one = cfg.get("failRequestsGreaterThanOne", key == "mps")
    node = shared[0]
    resource = node.main_resource[0]
    name = pods.create(cluster, namespace, PodSpec(
        "frgo", gpus=2, resource=resource,
        node_selector={"kubernetes.io/hostname": node.name}), gpu_env.run_id)
    # The device plugin answers at admission: the pod runs, or fails with the kubelet's refusal
    pod = pods.wait_admitted(cluster, namespace, name)
    refused = pod.status.reason == "UnexpectedAdmissionError"
    if fail_gt_one:
        assert refused, (f"failRequestsGreaterThanOne is set, but a request for 2 {resource} on "
                         f"{node.name} was admitted (phase {pod.status.phase})")
    else:
        assert not refused, (f"failRequestsGreaterThanOne is off, but a request for 2 {resource} "
                             f"was refused: {pod.status.message}")
