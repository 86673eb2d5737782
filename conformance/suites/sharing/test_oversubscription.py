"""Sharing / oversubscription: one GPU takes several one-slice pods; one more stays Pending.

Checklist (gpu-operator update-clusterpolicy.sh: 5 replicas of nvidia.com/gpu: 1 on one GPU):
- SHARE-OVS-001 a time-sliced node takes more one-slice pods than it has GPUs (all it
  advertises); the next stays Pending with Insufficient <resource>, and freeing a slice lets it
  schedule. (Whether the amount is what the config promises is SHARE-CAP-001's.) A node with
  more free slices than a check creates pods (NVIDIA's e2e config: 10 replicas on 8 GPUs) takes
  GPUs + 1 one-slice pods, the rest in multi-slice pods where failRequestsGreaterThanOne is off;
  where it is on, the waiting half is not run and the finding says why.
- SHARE-FRGO-001 with failRequestsGreaterThanOne a request for 2 slices is refused at admission
  (UnexpectedAdmissionError); without it, such a request is admitted
"""

from __future__ import annotations

import pytest

from conformance.checks import capacity, taints
from conformance.cluster import allocation, pods
from conformance.cluster.pods import PodSpec
from conformance.nvidia import labels as L
from conformance.nvidia.sharing import SharingConfig, validate_sharing_config
from conformance.plugin.api import finding, not_applicable, own_namespace


def _shared_nodes(nodes):
    return [n for n in nodes if capacity.is_shared(n) and not taints.untolerated_taints(n)]


@pytest.mark.requirement("SHARE-OVS-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_replicas_pods_share_and_one_more_waits(request, cluster, gpu_env, sharing_docs,
                                                require_gpu_nodes):
    shared = _shared_nodes(require_gpu_nodes)
    if not shared:
        not_applicable("no GPU node advertises time-sliced replicas")
    namespace = own_namespace(request)
    node, resource, free = allocation.require_free_node(
        cluster, shared, ("no shared GPU node has a free slice: none allocatable, or pods hold "
                         "every one"),
        shared=True)
    gpus = node.int_label(L.COUNT) or 0
    not_run = None
    try:
        result = allocation.fill_node_and_check(cluster, namespace, gpu_env.run_id, node,
                                                resource, free, "slice", sharing_docs)
        running = result.running
    except allocation.TooManyToFill as exc:  # the proof alone: more one-slice pods than GPUs
        running = len(allocation.place_pods(cluster, namespace, gpu_env.run_id, node,
                                            resource, [1] * (gpus + 1), "slice"))
        not_run = str(exc)
    assert running > gpus, (
        f"no oversubscription: {node.name} takes only {running} one-slice pod(s) on "
        f"its {gpus} GPU(s), although GFD labels it gpu.replicas={node.label(L.REPLICAS)}: "
        "the device plugin did not apply its sharing config")
    if free > allocation.MAX_FILL_PODS:
        finding(request, f"{running} one-slice pods scheduled on {node.name} ({gpus} GPU(s), "
                f"{free} free {resource}): oversubscribed; " + (
                    "the rest filled by multi-slice pods, the next one waited for a slice"
                    if not_run is None else f"the next-pod-waits half was not run: {not_run}"))


@pytest.mark.requirement("SHARE-FRGO-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_fail_requests_greater_than_one(request, cluster, sharing_docs, gpu_env, require_gpu_nodes):
    docs = sharing_docs
    shared = _shared_nodes(require_gpu_nodes)
    if docs is None or not shared:
        not_applicable("no time-sliced GPU node")
    node = shared[0]
    _key, doc = docs.for_node(node)
    if not isinstance(doc, dict) or validate_sharing_config(doc):
        not_applicable(f"the sharing config of {node.name} is invalid (SHARE-CFG-001)")
    config = SharingConfig.from_document(doc)
    resource = node.main_resource[0]
    namespace = own_namespace(request)
    name = pods.create(cluster, namespace, PodSpec(
        "frgo", gpus=2, resource=resource,
        node_selector={"kubernetes.io/hostname": node.name}), gpu_env.run_id)
    # The device plugin answers at admission: the pod runs, or fails with the kubelet's refusal
    pod = pods.wait_admitted(cluster, namespace, name)
    refused = pod.status.reason == "UnexpectedAdmissionError"
    if config.fails_requests_greater_than_one:
        assert refused, (f"failRequestsGreaterThanOne is set, but a request for 2 {resource} on "
                         f"{node.name} was admitted (phase {pod.status.phase})")
    else:
        assert not refused, (f"failRequestsGreaterThanOne is off, but a request for 2 {resource} "
                             f"was refused: {pod.status.message}")
