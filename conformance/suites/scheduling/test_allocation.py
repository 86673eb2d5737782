"""Scheduling / whole allocation: GPUs are handed out whole, and over capacity means Pending.

Checklist (kubernetes test/e2e/scheduling/nvidia-gpus.go; e2e_node device_plugin_test.go):
- SCHED-ALLOC-001 N one-GPU pods fill a node with N free GPUs; pod N+1 stays Pending with a
  FailedScheduling event naming Insufficient nvidia.com/gpu; deleting one lets it schedule
- SCHED-ALLOC-002 a multi-GPU request lands on one node that has that many free, and a request
  larger than any node stays Pending with the reason
"""

from __future__ import annotations

import pytest

from conformance.cluster import allocation, pods
from conformance.cluster.pods import PodSpec


@pytest.mark.requirement("SCHED-ALLOC-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_full_node_leaves_next_gpu_pod_pending(cluster, gpu_env, sharing_docs,
                                               require_device_plugin_nodes, namespace):
    try:
        allocation.fill_until_full(
            cluster, namespace, gpu_env.run_id, require_device_plugin_nodes, "whole",
            none_free=("no schedulable GPU node has free GPUs to allocate: nodes advertise no "
                       "GPU resource (device plugin) or every GPU node carries a taint GPU "
                       "pods do not tolerate"), docs=sharing_docs)
    except allocation.TooManyToFill as exc:  # many slices a node, no multi-slice fillers
        pytest.skip(str(exc))


@pytest.mark.requirement("SCHED-ALLOC-002")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_multi_gpu_request_lands_on_one_node(cluster, gpu_env, gpu_nodes,
                                             require_device_plugin_nodes, namespace):
    _node, resource, free = allocation.require_free_node(
        cluster, require_device_plugin_nodes, "no schedulable GPU node has free GPUs")
    fits = pods.create(cluster, namespace, PodSpec("multi", gpus=free, resource=resource),
                       gpu_env.run_id)
    landed = pods.wait_scheduled(cluster, namespace, fits)
    # any GPU node: the DRA driver may serve nvidia.com/gpu too (DRAExtendedResource)
    assert landed in {n.name for n in gpu_nodes}, f"landed on non-GPU node {landed}"
    largest = max(n.gpu_resources.get(resource, 0) for n in require_device_plugin_nodes)
    too_big = pods.create(cluster, namespace, PodSpec("toobig", gpus=largest + 1,
                                                      resource=resource), gpu_env.run_id)
    reason = pods.wait_unschedulable(cluster, namespace, too_big)
    assert f"Insufficient {resource}" in reason, (
        f"a request for {largest + 1} (more than any node has) is Pending for another reason: "
        f"{reason}")
