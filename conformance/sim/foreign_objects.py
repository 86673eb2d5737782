"""What a GPU cluster gets from others than the NVIDIA stack, played by two faults.

- ``gpu-request-rewriter``: what fractional-GPU add-ons do to pods, as a MutatingAdmissionPolicy:
  a fractional or request-only ``nvidia.com/gpu`` becomes one whole GPU, so a pod asking for
  0.5 GPU is admitted and silently holds a whole one;
- ``unpinned-gpu-workload``: a team's training Deployment that asks for a GPU but for no GPU
  type, on a cluster with several: its pods land on whichever type is free;
- ``hpa-gpus-held``: a team's inference Deployment that holds every GPU but one, so a
  Deployment the HPA scales up finds no GPU for its new pods.
"""

from __future__ import annotations

import copy

from conformance.cluster import namespaces
from conformance.cluster.client import (
    Cluster,
    Conflict,
    NotFound,
    already_done,
)
from conformance.nvidia import labels as L
from conformance.nvidia import operands
from conformance.sim import objects
from conformance.sim.objects import STANDIN_LABEL

REWRITER_POLICY = "gpuconf-sim-gpu-request-rewriter"
UNPINNED_NAMESPACE = "ml-team"
UNPINNED_DEPLOYMENT = "trainer"
HOLDER_NAMESPACE = "serving-team"  # not dra_plan.SHARING_NAMESPACE: the DRA faults own that one
HOLDER_DEPLOYMENT = "server"

_GPU_ASK = "'nvidia.com/gpu' in c.resources.{0}"
_REWRITABLE = (
    "has(c.resources) && ((has(c.resources.limits) && " + _GPU_ASK.format("limits")
    + " && !quantity(string(c.resources.limits['nvidia.com/gpu'])).isInteger()) || "
    "(has(c.resources.requests) && " + _GPU_ASK.format("requests")
    + " && !(has(c.resources.limits) && " + _GPU_ASK.format("limits") + ")))")


def request_rewriter_policy() -> tuple[dict, dict]:
    """A MutatingAdmissionPolicy (and its binding) that does what fractional-GPU add-ons do
    to pods: a fractional or request-only nvidia.com/gpu becomes one whole GPU."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": REWRITER_POLICY, "labels": {STANDIN_LABEL: "true"}},
        "spec": {
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["pods"]}]},
            "matchConditions": [{"name": "rewritable-gpu-request",
                                 "expression": f"object.spec.containers.exists(c, {_REWRITABLE})"}],
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                "expression": (
                    "Object{spec: Object.spec{containers: object.spec.containers.filter(c, "
                    f"{_REWRITABLE}).map(c, Object.spec.containers{{name: c.name, resources: "
                    "Object.spec.containers.resources{limits: {'nvidia.com/gpu': '1'}, "
                    "requests: {'nvidia.com/gpu': '1'}}})}}")}}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": REWRITER_POLICY, "labels": {STANDIN_LABEL: "true"}},
        "spec": {"policyName": REWRITER_POLICY},
    }
    return policy, binding


def ensure_request_rewriter(cluster: Cluster, wanted: bool) -> None:
    group, version = "admissionregistration.k8s.io", "v1"
    plurals = {"MutatingAdmissionPolicy": "mutatingadmissionpolicies",
               "MutatingAdmissionPolicyBinding": "mutatingadmissionpolicybindings"}
    for body in request_rewriter_policy():
        plural = plurals[body["kind"]]
        if wanted:
            with already_done(Conflict):
                cluster.custom.create_cluster_custom_object(group, version, plural, body)
        else:
            with already_done(NotFound):
                cluster.custom.delete_cluster_custom_object(group, version, plural,
                                                            REWRITER_POLICY)


def unpinned_workload() -> dict:
    """A team's training Deployment that asks for a GPU but for no GPU type."""
    return _gpu_deployment(UNPINNED_NAMESPACE, UNPINNED_DEPLOYMENT, 2)


def _gpu_deployment(namespace: str, name: str, replicas: int) -> dict:
    """A team's Deployment of one-GPU pods that names no GPU type."""
    labels = {"app": name, STANDIN_LABEL: "true"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "tolerations": [copy.deepcopy(t) for t in operands.DEFAULT_TOLERATIONS],
                     "containers": [{"name": "train", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                     "resources": {"limits": {L.GPU_RESOURCE: "1"}}}]}}},
    }


def ensure_unpinned_workload(cluster: Cluster, wanted: bool) -> None:
    if not wanted:
        # Gone before the next check lists GPU pods: KWOK pods only go when forced.
        namespaces.delete_namespace(cluster, UNPINNED_NAMESPACE, wait=True)
        return
    objects.ensure_namespace(cluster, UNPINNED_NAMESPACE, {STANDIN_LABEL: "true"})
    with already_done(Conflict):
        cluster.apps.create_namespaced_deployment(UNPINNED_NAMESPACE, unpinned_workload())


def ensure_gpu_holder(cluster: Cluster, gpus: int) -> None:
    """A team's inference Deployment holding ``gpus`` GPUs (none: gone, with its pods)."""
    if gpus <= 0:
        namespaces.delete_namespace(cluster, HOLDER_NAMESPACE, wait=True)
        return
    objects.ensure_namespace(cluster, HOLDER_NAMESPACE, {STANDIN_LABEL: "true"})
    with already_done(Conflict):
        cluster.apps.create_namespaced_deployment(
            HOLDER_NAMESPACE, _gpu_deployment(HOLDER_NAMESPACE, HOLDER_DEPLOYMENT, gpus))
