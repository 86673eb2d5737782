"""How the GPU Operator says it found no GPU node: its ClusterPolicy's Ready condition, as
v26.7.0 wrote it on a kind cluster without GPUs (README, kind on this machine), quoted in the
"no GPU node" failures."""

from __future__ import annotations

from conformance.nvidia.clusterpolicy import ClusterPolicy

# status of the ClusterPolicy the operator built from source reconciled on kind, no NFD, no GPU
ON_KIND = {"conditions": [
    {"lastTransitionTime": "2026-12-06T16:32:26Z", "message": "No NFD labels found",
     "reason": "NFDLabelsMissing", "status": "True", "type": "Ready"},
    {"lastTransitionTime": "2026-12-06T16:32:26Z", "message": "", "reason": "Ready",
     "status": "False", "type": "Error"}], "namespace": "gpu-operator", "state": "ready"}


def test_the_ready_condition_says_why_no_gpu_node_is_served() -> None:
    policy = ClusterPolicy({"metadata": {"name": "cluster-policy"}, "status": ON_KIND})
    assert policy.ready_condition() == "ready, NFDLabelsMissing: No NFD labels found"


def test_no_ready_condition_says_nothing() -> None:
    assert ClusterPolicy({"metadata": {"name": "p"}, "status": {"state": "notReady"}}
                         ).ready_condition() is None
