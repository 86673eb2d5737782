"""Scheduling / integer limits: what the API server accepts for nvidia.com/gpu.

Kubernetes treats nvidia.com/gpu as an extended resource: it must be a whole number, it is
set in limits, requests (if given) must equal limits, and limits alone default the requests
(kubernetes.io "Schedule GPUs"; pkg/apis/core/validation). Pods are created with dryRun=All
(in the run's one dry-run namespace): the API server validates and defaults them for real but
stores nothing.

Checklist:
- SCHED-INT-001 a fractional request (0.5) is refused
- SCHED-INT-002 requests without limits are refused, requests != limits are refused, and
  limits alone are accepted with requests defaulted to the limits
"""

from __future__ import annotations

import pytest

from conformance.cluster import evidence as ev
from conformance.cluster.client import Invalid
from conformance.cluster.namespaces import run_labels
from conformance.cluster.pods import PodSpec
from conformance.nvidia import labels as L


def _dry_run(cluster, namespace: str, spec: PodSpec, run_id: str, attachments: list):
    """(the pod as the API server would store it, None) or (None, its refusal); what was sent
    and what came back are the check's evidence."""
    body = spec.manifest(run_labels(run_id))
    try:
        pod, refusal = cluster.core.create_namespaced_pod(namespace, body, dry_run="All"), None
    except Invalid as exc:
        pod, refusal = None, exc.body or exc.reason
    answer = ev.to_yaml(pod) if pod is not None else f"refused: {refusal}"
    attachments.append(ev.Evidence(f"dry-run-{spec.prefix}.yaml",
                                   f"# sent (dryRun=All)\n{ev.to_yaml(body)}\n# answer\n{answer}"))
    return pod, refusal


@pytest.mark.requirement("SCHED-INT-001")
def test_fractional_gpu_request_is_refused(cluster, gpu_env, dry_run_namespace, attachments):
    pod, refusal = _dry_run(cluster, dry_run_namespace, PodSpec("frac", gpus="0.5"),
                            gpu_env.run_id, attachments)
    assert pod is None, ("the API server accepted nvidia.com/gpu: 0.5; extended resources must "
                         "be integers (an admission webhook may be rewriting GPU requests)")
    assert "must be an integer" in refusal, f"refused, but not as non-integer: {refusal}"


@pytest.mark.requirement("SCHED-INT-002")
def test_requests_without_limits_are_refused(cluster, gpu_env, dry_run_namespace, attachments):
    pod, refusal = _dry_run(cluster, dry_run_namespace,
                            PodSpec("noLimit".lower(), gpus=None, requests=1), gpu_env.run_id,
                            attachments)
    assert pod is None, "a pod with nvidia.com/gpu in requests only was accepted"
    assert "Limit must be set" in refusal, f"refused for another reason: {refusal}"


@pytest.mark.requirement("SCHED-INT-002")
def test_requests_different_from_limits_are_refused(cluster, gpu_env, dry_run_namespace,
                                                    attachments):
    pod, refusal = _dry_run(cluster, dry_run_namespace, PodSpec("mismatch", gpus=2, requests=1),
                            gpu_env.run_id, attachments)
    assert pod is None, "a pod with nvidia.com/gpu requests 1 != limits 2 was accepted"
    assert "must be equal to" in refusal, f"refused for another reason: {refusal}"


@pytest.mark.requirement("SCHED-INT-002")
def test_limits_alone_default_the_requests(cluster, gpu_env, dry_run_namespace, attachments):
    pod, refusal = _dry_run(cluster, dry_run_namespace, PodSpec("limits", gpus=1),
                            gpu_env.run_id, attachments)
    assert pod is not None, f"a pod with limits nvidia.com/gpu: 1 was refused: {refusal}"
    requests = pod.spec.containers[0].resources.requests or {}
    assert requests.get(L.GPU_RESOURCE) == "1", (
        f"requests were not defaulted to the limits: {requests}")
