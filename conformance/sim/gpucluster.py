"""The GPU Operator's GPUCluster stack (v26.7.0, tech preview) for ``gpu-cluster`` profiles.

What the operator's GPUCluster controller would write through the API server, with the chart
installed as its values.yaml says for it (``gpuCluster.deployCR=true``,
``clusterPolicy.deployCR=false``: the two exclude each other, templates/validations.yaml):

- the GPUCluster CRD (the chart's ``crds/nvidia.com_gpuclusters.yaml`` when the chart is at
  hand, else the project's minimal ``gpucluster-crd.yaml``) and the singleton GPUCluster
  ``gpu-cluster`` as templates/gpucluster.yaml renders it with the chart's defaults (compute
  domains off, DCGM off, the DCGM exporter on), the DRA driver pinned to the release the DRA
  stand-in plays;
- on each node it serves, the state labels of ``gpuClusterStateLabels`` (state_manager.go);
- its operands in the operator's namespace, owned by the GPUCluster: the DRA kubelet plugin
  (``dra.py`` writes it with the GPUCluster's layout, and its pools), the DCGM exporter and
  the DRA validator (manifests/state-dra-*), KWOK running their pods. The validator's
  adminAccess claim is left out: KWOK prepares nothing on a node;
- ``status.state`` from what it observes, as the controller does: ``ready`` once every
  enabled DaemonSet operand has a Ready pod on each node it selects, else ``notReady`` with a
  ``Ready=False`` condition naming the operands that are not.

Fault ``dra-gpucluster-operand-down``: the DCGM exporter's pods crash-loop on every node.
"""

from __future__ import annotations

import copy
from pathlib import Path

from conformance.checks import rollout
from conformance.cluster.client import (
    Cluster,
    Conflict,
    NotFound,
    already_done,
    read_or_none,
)
from conformance.cluster.waits import wait_for
from conformance.common.console import Progress
from conformance.nvidia import dra, operands
from conformance.nvidia import labels as L
from conformance.sim import dra_plan, objects

OWNER_LABEL = "sim.gpuconf.io/gpucluster"
OPERAND_DOWN = "dra-gpucluster-operand-down"
BUILTIN_CRD = Path(__file__).with_name("gpucluster-crd.yaml")
CRD_NAME = "gpuclusters.nvidia.com"
ROLLOUT_TIMEOUT_S = 120.0  # a few KWOK nodes: pods are Ready in seconds
# gpuClusterStateLabels (controllers/state_manager.go): what it writes on each node it serves
STATE_LABELS = {L.GPU_PRESENT: "true", f"{L.DEPLOY_PREFIX}driver": "true",
                **{op.deploy_label: "true" for op in dra.GPUCLUSTER_OPERANDS if op.deploy_label}}
# The stand-in's own operands: the kubelet plugin is dra.py's, the controller is off by default.
_IMAGES = {"dcgm": "dcgm", "dcgm-exporter": "dcgm-exporter", "dra-validator": "operator-validator"}
_POD_SELECTORS = {"dra-validator": {"app.kubernetes.io/name": "nvidia-dra-validator"}}
_BY_KEY = {op.key: op for op in operands.OPERANDS}


def wanted(profile) -> bool:
    return profile.stack == "gpu-cluster"


def cluster_object() -> dict:
    """The GPUCluster as the chart renders it with its default values."""
    repository, _, rest = dra_plan.IMAGE.rpartition("/")
    image, _, version = rest.partition(":")
    return {"apiVersion": "/".join(dra.GPUCLUSTER_API[:2]), "kind": "GPUCluster",
            "metadata": {"name": dra.GPUCLUSTER_NAME, "labels": {OWNER_LABEL: "true"}},
            "spec": {"draDriver": {"repository": repository, "image": image, "version": version,
                                   "computeDomains": {"enabled": False}},
                     "dcgm": {"enabled": False}, "dcgmExporter": {"enabled": True}}}


def operand_daemonset(op: dra.GpuClusterOperand, namespace: str, owner: dict,
                      faults: list[str]) -> dict:
    selector = _POD_SELECTORS.get(op.key, {"app": op.app})
    labels = {**selector, "app": op.app, OWNER_LABEL: "true"}
    crashing = op.key == "dcgm-exporter" and OPERAND_DOWN in faults
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": op.name, "namespace": namespace,
                     "labels": {**labels, "app.kubernetes.io/managed-by": "gpu-operator"},
                     "ownerReferences": [owner]},
        "spec": {
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels, "annotations": (
                    {objects.CRASHLOOP_ANNOTATION: "true"} if crashing else {})},
                "spec": {
                    "nodeSelector": {op.deploy_label: "true"},
                    "tolerations": [copy.deepcopy(t) for t in operands.DEFAULT_TOLERATIONS],
                    "priorityClassName": operands.PRIORITY_CLASS,
                    "containers": [{"name": op.name,
                                    "image": _BY_KEY[_IMAGES[op.key]].image()}]}}},
    }


# ---- apply ---------------------------------------------------------------------------------
def reconcile(cluster: Cluster, state, chart: str | None,
              progress: Progress = lambda _m: None) -> None:
    """Write the GPUCluster and its operands (the kubelet plugin is dra.reconcile's)."""
    progress("playing the GPU Operator's GPUCluster (CRD, GPUCluster, operands)")
    _ensure_crd(cluster, chart)
    obj = _ensure_object(cluster)
    owner = {"apiVersion": obj["apiVersion"], "kind": "GPUCluster",
             "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"]}
    faults = list(state.faults)
    for op in _own_daemonset_operands(obj):
        body = operand_daemonset(op, state.operator_namespace, owner, faults)
        objects.apply_daemonset(cluster, state.operator_namespace, body)
    # settled before the status is written: a crash-looping operand never gets Ready
    down = {op.name for op in dra.GPUCLUSTER_OPERANDS
            if op.key == "dcgm-exporter" and OPERAND_DOWN in faults}
    progress("waiting for the GPUCluster's operands")
    wait_for("the GPUCluster's operands to roll out",
             lambda: set(_not_rolled_out(cluster, state.operator_namespace, obj)) <= down,
             timeout=ROLLOUT_TIMEOUT_S, interval=0.5)
    control_once(cluster, state)


def control_once(cluster: Cluster, state) -> None:
    """The controller's status: ready when every enabled DaemonSet operand is rolled out."""
    obj = read_or_none(cluster.custom.get_cluster_custom_object, *dra.GPUCLUSTER_API,
                       dra.GPUCLUSTER_NAME)
    if obj is None:
        return
    ns = state.operator_namespace
    problems = _not_rolled_out(cluster, ns, obj)
    status = {"state": "notReady" if problems else dra.GPUCLUSTER_READY, "namespace": ns,
              "conditions": [{"type": "Ready", "status": "False" if problems else "True",
                              "reason": "OperandsNotReady" if problems else "Reconciled",
                              "message": "; ".join(problems.values())
                              or "all operands are ready",
                              "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    have = obj.get("status") or {}
    if {k: have.get(k) for k in status} == status:
        return
    cluster.custom.patch_cluster_custom_object_status(
        *dra.GPUCLUSTER_API, dra.GPUCLUSTER_NAME, {"status": status})


def remove(cluster: Cluster, state) -> None:
    """No GPUCluster in this profile: it goes with its operands (the CRD stays, as Helm
    leaves CRDs); KWOK's pods go only when forced."""
    with already_done(NotFound):
        cluster.custom.delete_cluster_custom_object(*dra.GPUCLUSTER_API, dra.GPUCLUSTER_NAME)
    ns = state.operator_namespace
    objects.delete_daemonsets(cluster, ns, f"{OWNER_LABEL}=true")
    plugin = dra_plan.gpucluster_plugin(ns)
    objects.delete_daemonsets(cluster, ns, ",".join(f"{k}={v}"
                                                    for k, v in plugin.selector.items()))


def _own_daemonset_operands(obj: dict) -> list[dra.GpuClusterOperand]:
    spec = obj.get("spec") or {}
    return [op for op in dra.GPUCLUSTER_OPERANDS
            if op.kind == "DaemonSet" and op.key in _IMAGES and op.enabled(spec)]


def _not_rolled_out(cluster: Cluster, ns: str, obj: dict) -> dict[str, str]:
    """{operand: what is wrong} for each enabled DaemonSet operand not Ready everywhere."""
    spec = obj.get("spec") or {}
    dss = {d.metadata.name for d in cluster.apps.list_namespaced_daemon_set(ns).items}
    pods = cluster.core.list_namespaced_pod(ns).items
    problems: dict[str, str] = {}
    for op in dra.GPUCLUSTER_OPERANDS:
        if op.kind != "DaemonSet" or not op.enabled(spec):
            continue
        nodes = [n.metadata.name for n in cluster.core.list_node(
            label_selector=f"{op.deploy_label}=true").items]
        mine = [p for p in pods if any(o.name == op.name
                                       for o in p.metadata.owner_references or [])]
        result = rollout.rollout(mine, nodes, found=op.name in dss)
        if not result.daemonset_found or result.missing or result.not_ready:
            problems[op.name] = (f"{op.name} is not ready on "
                                 f"{len(result.missing) + len(result.not_ready)} of "
                                 f"{len(nodes)} node(s)" if result.daemonset_found
                                 else f"{op.name} is missing")
    return problems


def _ensure_object(cluster: Cluster) -> dict:
    try:
        return cluster.custom.create_cluster_custom_object(*dra.GPUCLUSTER_API, cluster_object())
    except Conflict:
        pass
    current = cluster.custom.get_cluster_custom_object(*dra.GPUCLUSTER_API, dra.GPUCLUSTER_NAME)
    wanted_spec = cluster_object()["spec"]
    if current.get("spec") != wanted_spec:  # a reset: back to the chart's defaults
        current["spec"] = wanted_spec
        current = cluster.custom.replace_cluster_custom_object(
            *dra.GPUCLUSTER_API, dra.GPUCLUSTER_NAME, current)
    return current


def _ensure_crd(cluster: Cluster, chart: str | None) -> None:
    objects.ensure_crd(cluster, CRD_NAME, lambda: objects.crd_document(
        chart, "nvidia.com_gpuclusters.yaml", BUILTIN_CRD), "GPUCluster")
