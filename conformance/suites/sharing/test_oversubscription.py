"""Sharing / oversubscription: one GPU takes several one-slice pods; one more stays Pending.

Checklist (gpu-operator update-clusterpolicy.sh: 5 replicas of nvidia.com/gpu: 1 on one GPU):
- SHARE-OVS-001 a time-sliced node takes more one-slice pods than it has GPUs (all it
  advertises); the next stays Pending with Insufficient <resource>, and freeing a slice lets it
  schedule. (Whether the amount is what the config promises is SHARE-CAP-001's.)
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
from conformance.plugin.api import not_applicable


def _shared_nodes(nodes):
    return [n for n in nodes if capacity.is_shared(n) and not taints.untolerated_taints(n)]


@pytest.mark.requirement("SHARE-OVS-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_replicas_pods_share_and_one_more_waits(cluster, namespace, gpu_env, require_gpu_nodes):
    shared = _shared_nodes(require_gpu_nodes)
    if not shared:
        not_applicable("no GPU node advertises time-sliced replicas")
    result = allocation.fill_until_full(cluster, namespace, gpu_env.run_id, shared, "slice",
                                        shared=True, none_free="no shared GPU node has free "
                                                               "slices")
    node = next(n for n in shared if n.name == result.node)
    gpus = node.int_label(L.COUNT) or 0
    assert result.running > gpus, (
        f"no oversubscription: {node.name} takes only {result.running} one-slice pod(s) on "
        f"its {gpus} GPU(s), although GFD labels it gpu.replicas={node.label(L.REPLICAS)}: "
        "the device plugin did not apply its sharing config")


@pytest.mark.requirement("SHARE-FRGO-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_fail_requests_greater_than_one(cluster, sharing_docs, namespace, gpu_env,
                                        require_gpu_nodes):
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
