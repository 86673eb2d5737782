"""What the GPU Operator writes, as the stand-in writes it: the operator's namespace and
Deployment, the ClusterPolicy (upstream CRD when the chart is at hand) and its status, the
sharing ConfigMap, and the operand DaemonSets with upstream names, ``app`` labels and
``nvidia.com/gpu.deploy.*`` node selectors (rolled out onto KWOK nodes by the real DaemonSet
controller). Faults from ``faults.py`` change what is written (see ``operator_plan``)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import (
    Cluster,
    Conflict,
    NotFound,
    already_done,
    create_or_replace,
)
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.common.console import Progress
from conformance.nvidia import clusterpolicy, operands
from conformance.nvidia import labels as L
from conformance.sim import objects
from conformance.sim.objects import CRASHLOOP_ANNOTATION, STANDIN_LABEL
from conformance.sim.operator_plan import (
    SimState,
    cluster_policy_spec,
    daemonset_manifest,
    seeded_source,
)

CLUSTER_POLICY = "cluster-policy"

OPERATOR_DEPLOYMENT = "gpu-operator"  # the chart's Deployment, its app label and container

BUILTIN_CRD = Path(__file__).with_name("clusterpolicy-crd.yaml")

# The DaemonSet controller sees a new template within a second; on a loaded 2-core sim, more.
OBSERVED_S = 20.0


def remove_operator(cluster: Cluster, state: SimState, *, keep_deployment: bool = False) -> None:
    """What ``helm uninstall gpu-operator`` removes (the CRD stays, as Helm leaves CRDs);
    ``keep_deployment``: only the ClusterPolicy and its operands (a GPUCluster replaces it)."""
    with already_done(NotFound):
        cluster.custom.delete_cluster_custom_object(*clusterpolicy.API, CLUSTER_POLICY)
    ns = state.operator_namespace
    for dep in [] if keep_deployment else cluster.apps.list_namespaced_deployment(
            ns, label_selector=f"{STANDIN_LABEL}=true").items:
        with already_done(NotFound):
            cluster.apps.delete_namespaced_deployment(dep.metadata.name, ns)
    objects.delete_daemonsets(cluster, ns, f"{STANDIN_LABEL}=true", keep_pod=lambda pod: (
        keep_deployment and (pod.metadata.labels or {}).get("app") == OPERATOR_DEPLOYMENT))


def ensure_crd(cluster: Cluster, chart: str | None, progress: Progress) -> None:
    if objects.ensure_crd(cluster, "clusterpolicies.nvidia.com", lambda: objects.crd_document(
            chart, "nvidia.com_clusterpolicies.yaml", BUILTIN_CRD), "ClusterPolicy"):
        progress("installed the ClusterPolicy CRD")


def ensure_cluster_policy(cluster: Cluster, state: SimState) -> dict:
    """Write the profile's ClusterPolicy spec (``sim up``/``sim set`` reset it to the profile;
    between resets the controller loop follows whatever the spec says)."""
    body = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
            "metadata": {"name": CLUSTER_POLICY, "labels": {STANDIN_LABEL: "true"}},
            "spec": cluster_policy_spec(state)}
    try:
        cluster.custom.create_cluster_custom_object(*clusterpolicy.API, body)
        return body["spec"]
    except Conflict:
        pass
    current = cluster.custom.get_cluster_custom_object(*clusterpolicy.API,
                                                       CLUSTER_POLICY)
    if current.get("spec") != body["spec"]:
        current["spec"] = body["spec"]
        cluster.custom.replace_cluster_custom_object(*clusterpolicy.API,
                                                     CLUSTER_POLICY, current)
    return body["spec"]


def set_cluster_policy_status(cluster: Cluster, state: SimState) -> None:
    not_ready = state.has("clusterpolicy-notready")
    status = {"state": "notReady" if not_ready else "ready",
              "namespace": state.operator_namespace,
              "conditions": [{
                  "type": "Ready", "status": "False" if not_ready else "True",
                  "reason": "OperandNotReady" if not_ready else "Reconciled",
                  "message": ("ClusterPolicy is not ready, states not ready: "
                              "[state-dcgm-exporter]" if not_ready
                              else "ClusterPolicy is ready as all resources have been "
                                   "successfully reconciled"),
                  "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              }]}
    cluster.custom.patch_cluster_custom_object_status(
        *clusterpolicy.API, CLUSTER_POLICY, {"status": status})


def ensure_operator(cluster: Cluster, state: SimState) -> None:
    labels = {"app": OPERATOR_DEPLOYMENT, "app.kubernetes.io/component": "gpu-operator",
              "app.kubernetes.io/version": operands.OPERATOR_VERSION,
              "helm.sh/chart": f"gpu-operator-{operands.OPERATOR_VERSION}", STANDIN_LABEL: "true"}
    annotations = ({CRASHLOOP_ANNOTATION: "true"} if state.has("operator-unavailable")
                   else {})
    body = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": OPERATOR_DEPLOYMENT, "namespace": state.operator_namespace,
                     "labels": labels},
        "spec": {
            "replicas": 1,
            # Recreate: a fault's crash-looping pod replaces the healthy one instead of
            # waiting behind it (a rolling update would keep the old pod serving).
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app": OPERATOR_DEPLOYMENT}},
            "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": {
                "containers": [{"name": OPERATOR_DEPLOYMENT,
                                "image": f"{operands.OPERATOR_IMAGE}:{operands.OPERATOR_VERSION}"}],
                # The operator runs on a CPU node, as it does in real clusters.
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": L.GPU_PRESENT, "operator": "DoesNotExist"}]}]}}},
            }},
        },
    }
    ns = state.operator_namespace
    try:
        cluster.apps.create_namespaced_deployment(ns, body)
        return
    except Conflict:
        pass
    current = cluster.apps.read_namespaced_deployment(OPERATOR_DEPLOYMENT, ns)
    if ((current.spec.template.metadata.annotations or {}) != annotations
            or (current.spec.strategy and current.spec.strategy.type) != "Recreate"):
        cluster.apps.patch_namespaced_deployment(OPERATOR_DEPLOYMENT, ns, {"spec": {
            "strategy": {"type": "Recreate", "rollingUpdate": None},
            "template": {"metadata": {"annotations": {
                CRASHLOOP_ANNOTATION: annotations.get(CRASHLOOP_ANNOTATION)}}}}})


def ensure_sharing_config(cluster: Cluster, state: SimState) -> None:
    source = seeded_source(state)
    if source is None:
        return
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": source.name, "namespace": state.operator_namespace,
                         "labels": {STANDIN_LABEL: "true"}},
            "data": dict(source.docs)}
    ns = state.operator_namespace
    create_or_replace(
        lambda: cluster.core.create_namespaced_config_map(ns, body),
        lambda: cluster.core.replace_namespaced_config_map(source.name, ns, body))


def _owner(cluster: Cluster) -> dict | None:
    try:
        cp = cluster.custom.get_cluster_custom_object(*clusterpolicy.API,
                                                      CLUSTER_POLICY)
    except ApiException:
        return None
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
            "name": cp["metadata"]["name"], "uid": cp["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": False}


def apply_daemonsets(cluster: Cluster, state: SimState, spec: dict, *,
                     plugin_refuses: bool = False) -> None:
    ns = state.operator_namespace
    owner = _owner(cluster)
    wanted = {}
    enabled = operands.enabled_operands(spec)
    # the operands' ServiceAccounts, as the operator creates them (workloads reference them
    # too: the operator's own plugin-test Deployment runs as nvidia-device-plugin)
    objects.ensure_service_accounts(cluster, ns, {op.service_account for op in enabled},
                                    {STANDIN_LABEL: "true"})
    for op in enabled:
        if state.has("device-plugin-absent") and op.name == "nvidia-device-plugin-daemonset":
            continue
        if state.has("toolkit-absent") and op.name == "nvidia-container-toolkit-daemonset":
            continue
        if state.has("gfd-absent") and op.name == "gpu-feature-discovery":
            continue
        wanted[op.name] = daemonset_manifest(op, state, spec, owner,
                                             plugin_refuses=plugin_refuses)
    existing = {d.metadata.name: d for d in cluster.apps.list_namespaced_daemon_set(
        ns, label_selector=f"{STANDIN_LABEL}=true").items}
    # `sim set` and the controller loop may both act on one change: whoever is second finds
    # the object already created (409) or already gone (404), which is the state wanted.
    for name, body in wanted.items():
        current = existing.pop(name, None)
        with already_done(Conflict, NotFound):
            if current is None:
                cluster.apps.create_namespaced_daemon_set(ns, body)
            elif _template_changed(current, body):
                replaced = cluster.apps.replace_namespaced_daemon_set(name, ns, body)
                if name == "nvidia-driver-daemonset" and _image_changed(current, body):
                    _mark_upgrade_required(cluster)
                # OnDelete operands need their pods replaced
                _restart_pods(cluster, ns, body, replaced.metadata.generation)
    for name in existing:
        with already_done(NotFound):
            cluster.apps.delete_namespaced_daemon_set(name, ns, propagation_policy="Background")


def _image_changed(current, body: dict) -> bool:
    return (current.spec.template.spec.containers[0].image
            != body["spec"]["template"]["spec"]["containers"][0]["image"])


def _mark_upgrade_required(cluster: Cluster) -> None:
    """The operator's upgrade controller: a new driver image puts every GPU node in
    upgrade-required until its new driver pod runs (then GFD reports the new version)."""
    for node in cluster.core.list_node(label_selector=f"{L.GPU_PRESENT}=true").items:
        cluster.core.patch_node(node.metadata.name, {"metadata": {"labels": {
            L.DRIVER_UPGRADE_STATE: "upgrade-required"}}})


def _template_changed(current, body: dict) -> bool:
    tpl = current.spec.template
    want = body["spec"]["template"]
    have_env = {e.name: e.value for e in (tpl.spec.containers[0].env or [])}
    want_env = {e["name"]: e["value"] for e in want["spec"]["containers"][0]["env"]}
    return (have_env != want_env
            or tpl.spec.containers[0].image != want["spec"]["containers"][0]["image"]
            or (tpl.metadata.annotations or {}) != want["metadata"]["annotations"]
            or (tpl.spec.node_selector or {}) != want["spec"]["nodeSelector"])


def _restart_pods(cluster: Cluster, ns: str, body: dict, generation: int) -> None:
    """Replace every pod of a changed operand at once: OnDelete needs it, and for RollingUpdate
    it makes a fault's new template reach every node now instead of one node at a time.

    Only once the DaemonSet controller has seen ``generation``: before that it recreates the
    deleted pods from the old template, and a rolling update then replaces them one node at a
    time, never past a first new pod that is not Ready (a crash-looping fault's)."""
    name = body["metadata"]["name"]
    with contextlib.suppress(WaitTimeout):  # the pods' own rollout wait names what is stuck
        wait_for(f"the DaemonSet controller to see {name}'s new template",
                 lambda: (cluster.apps.read_namespaced_daemon_set(name, ns).status
                          .observed_generation or 0) >= generation, timeout=OBSERVED_S)
    app = body["spec"]["selector"]["matchLabels"]["app"]
    for pod in cluster.core.list_namespaced_pod(ns, label_selector=f"app={app}").items:
        with already_done(NotFound):  # the DaemonSet controller may have been quicker
            cluster.core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)


