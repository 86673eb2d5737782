"""The GPU Operator stand-in: writes what the operator, device plugin and GFD would write.

What to write is worked out in ``operator_plan`` (from the profile and faults alone); this
module writes it through the real API server only: the operator namespace and Deployment, the
ClusterPolicy (upstream CRD when the chart is at hand), operand DaemonSets with upstream names,
``app`` labels and ``nvidia.com/gpu.deploy.*`` node selectors (rolled out onto KWOK nodes by
the real DaemonSet controller), GPU node labels, capacity/allocatable and the device plugin's
sharing ConfigMap. Faults from ``faults.py`` change what is written.

``reconcile`` is idempotent: it is run once by ``gpuconf sim up`` and again by the stand-in's
controller loop (``python -m conformance.sim.standin``), which also plays the operator's
reaction to ClusterPolicy and node-label changes and the device plugin's admission check.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import time
from pathlib import Path

from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import (
    Cluster,
    Conflict,
    NotFound,
    already_done,
    connect,
    create_or_replace,
    read_or_none,
)
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.common.console import Progress
from conformance.common.errors import NotConverged
from conformance.nvidia import clusterpolicy, driver, operands
from conformance.nvidia import labels as L
from conformance.nvidia.clusterpolicy import ClusterPolicy
from conformance.sim import dra, foreign_objects, gfd, gpucluster, objects, plugin_chart
from conformance.sim.faults import validate as validate_faults
from conformance.sim.objects import CRASHLOOP_ANNOTATION, STANDIN_LABEL
from conformance.sim.operator_plan import (
    NodePlan,
    Plan,
    SimState,
    cluster_policy_spec,
    daemonset_manifest,
    plan_nodes,
    seeded_source,
)
from conformance.sim.sharing_flow import ConfigSource, applied_for

log = logging.getLogger("gpuconf.standin")

CONFIG_NAMESPACE = "kube-system"
CONFIG_MAP = "gpuconf-sim-standin"
SYNC_REQUEST_KEY = "sync-request"  # see wait_for_a_full_pass
SYNC_DONE_KEY = "sync-done"
CLUSTER_POLICY = "cluster-policy"
OPERATOR_DEPLOYMENT = "gpu-operator"  # the chart's Deployment, its app label and container
BUILTIN_CRD = Path(__file__).with_name("clusterpolicy-crd.yaml")
LOOP_INTERVAL_S = 1.0


def observed_source(cluster: Cluster, state: SimState, policy: dict | None) -> ConfigSource | None:
    """The sharing configs the plugin is pointed at now, read from the cluster: the
    ClusterPolicy's spec.devicePlugin.config, or (no operator) the chart's mounted ConfigMap."""
    if not state.resolve_profile().runs_cluster_policy:
        return plugin_chart.observed_source(cluster)
    ref = ClusterPolicy(policy).device_plugin_config if policy else None
    if ref is None:
        return None
    return plugin_chart.read_source(cluster, state.operator_namespace, ref.name, ref.default)


# ---- apply ---------------------------------------------------------------------------------
def reconcile(cluster: Cluster, state: SimState, *, chart: str | None = None,
              progress: Progress = lambda _m: None, nodes: bool = True) -> None:
    validate_faults(state.faults)
    profile = state.resolve_profile()
    _save_state(cluster, state)
    seed = seeded_source(state)
    plan = plan_nodes(state, seed, _node_labels(cluster))
    operator = profile.runs_cluster_policy
    if nodes:
        progress(f"writing {state.profile} nodes")
        _apply_nodes(cluster, plan.nodes, operator=operator)
    dra.reconcile(cluster, state, progress)  # the NVIDIA DRA driver, whoever runs the stack
    if gpucluster.wanted(profile):  # the operator runs a GPUCluster, not a ClusterPolicy
        _remove_operator(cluster, state, keep_deployment=True)
        plugin_chart.remove(cluster)
        objects.ensure_namespace(cluster, state.operator_namespace, {STANDIN_LABEL: "true"})
        _ensure_operator(cluster, state)
        gpucluster.reconcile(cluster, state, chart, progress)
        return
    gpucluster.remove(cluster, state)
    if state.operator == "chart":
        # The chart brings the namespace, CRD, operator Deployment and ClusterPolicy; the
        # controller loop plays the operator once they exist.
        return
    if operator:
        plugin_chart.remove(cluster)  # a `sim set` from a profile without the operator
        objects.ensure_namespace(cluster, state.operator_namespace, {STANDIN_LABEL: "true"})
        _ensure_crd(cluster, chart, progress)
        spec = _ensure_cluster_policy(cluster, state)
        _ensure_operator(cluster, state)
        _ensure_sharing_config(cluster, state)
        _apply_daemonsets(cluster, state, spec, plugin_refuses=bool(plan.refused))
        _set_cluster_policy_status(cluster, state)
    else:
        _remove_operator(cluster, state)  # a `sim set` from a profile with the operator
        plugin_chart.apply(cluster, seed, crashloop=bool(plan.refused), write_config=True)
    foreign_objects.ensure_request_rewriter(cluster, state.has("gpu-request-rewriter"))
    foreign_objects.ensure_unpinned_workload(cluster, state.has("unpinned-gpu-workload"))


def _remove_operator(cluster: Cluster, state: SimState, *, keep_deployment: bool = False) -> None:
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


def _save_state(cluster: Cluster, state: SimState) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIG_MAP, "namespace": CONFIG_NAMESPACE,
                         "labels": {STANDIN_LABEL: "true"}},
            "data": {"state.json": json.dumps(state.__dict__)}}
    create_or_replace(lambda: cluster.core.create_namespaced_config_map(CONFIG_NAMESPACE, body),
                       lambda: cluster.core.replace_namespaced_config_map(
                           CONFIG_MAP, CONFIG_NAMESPACE, body))


def _state_map(cluster: Cluster):
    return read_or_none(cluster.core.read_namespaced_config_map, CONFIG_MAP, CONFIG_NAMESPACE)


def load_state(cluster: Cluster) -> SimState | None:
    cm = _state_map(cluster)
    return None if cm is None else SimState(**json.loads(cm.data["state.json"]))


def wait_for_a_full_pass(cluster: Cluster, progress: Progress, timeout: float = 60.0) -> None:
    """Until the controller loop has run one whole pass that began after this call.

    ``reconcile`` writes the state first and the objects after it, while the loop keeps
    running in its own process: a pass that read the new state with the old sharing ConfigMap
    (or the old state with the new nodes) writes what neither asked for. A pass that begins
    after ``reconcile`` returned reads only the final objects and writes them right, and the
    loop's passes never overlap, so once it is done nothing stale is left to land."""
    token = f"{time.time_ns():x}"
    cluster.core.patch_namespaced_config_map(CONFIG_MAP, CONFIG_NAMESPACE,
                                             {"data": {SYNC_REQUEST_KEY: token}})

    def pass_done() -> bool:
        cm = _state_map(cluster)
        return cm is not None and (cm.data or {}).get(SYNC_DONE_KEY) == token

    if pass_done():
        return
    progress("waiting for the stand-in's controller loop to apply the new state")
    try:
        wait_for("a whole pass of the stand-in's controller loop", pass_done,
                 timeout=timeout, interval=0.2)
    except WaitTimeout:
        raise NotConverged(f"the stand-in's controller loop did not complete a pass within "
                           f"{timeout:.0f}s: see logs/standin.log of the sim") from None


def _ensure_crd(cluster: Cluster, chart: str | None, progress: Progress) -> None:
    if objects.ensure_crd(cluster, "clusterpolicies.nvidia.com", lambda: objects.crd_document(
            chart, "nvidia.com_clusterpolicies.yaml", BUILTIN_CRD), "ClusterPolicy"):
        progress("installed the ClusterPolicy CRD")


def _apply_nodes(cluster: Cluster, plans: list[NodePlan], *, operator: bool = True) -> None:
    existing = {n.metadata.name: n for n in cluster.core.list_node().items}
    for plan in plans:
        node = existing.pop(plan.name, None)
        if node is None:
            cluster.core.create_node({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": plan.name, "labels": plan.labels,
                             "annotations": {"kwok.x-k8s.io/node": "fake"}},
                "spec": {"taints": plan.taints or None},
                "status": {"capacity": plan.resources,
                           "allocatable": plan.allocatable or plan.resources},
            })
            continue
        _update_node(cluster, node, plan, operator=operator)
    for name, node in existing.items():
        if (node.metadata.labels or {}).get(STANDIN_LABEL) == "true":
            cluster.core.delete_node(name)


def _update_node(cluster: Cluster, node, plan: NodePlan, *, operator: bool = True) -> None:
    current = node.metadata.labels or {}
    label_patch: dict[str, str | None] = {
        k: None for k in current
        if k.startswith("nvidia.com/") and k not in plan.labels
        # deploy.* also belongs to the controller loop, while there is an operator
        and not (operator and k.startswith(L.DEPLOY_PREFIX))
        and k != L.DEVICE_PLUGIN_CONFIG  # the user's choice of sharing config for the node
    }
    label_patch.update({k: v for k, v in plan.labels.items() if current.get(k) != v})
    taints = [t.to_dict() if hasattr(t, "to_dict") else t for t in (node.spec.taints or [])]
    taints = [{k: v for k, v in t.items() if v is not None and k != "time_added"}
              for t in taints]
    patch: dict = {}
    if label_patch:
        patch["metadata"] = {"labels": label_patch}
    if _taint_keys(taints) != _taint_keys(plan.taints):
        patch["spec"] = {"taints": plan.taints}
    if patch:
        cluster.core.patch_node(plan.name, patch)
    status = _status_change(plan, node)
    if status:
        cluster.core.patch_node_status(plan.name, {"status": status})


def _status_change(plan: NodePlan, node, keep=lambda _resource: True) -> dict:
    """The node status patch that makes its capacity and allocatable the plan's (only the
    resources ``keep`` selects; GPU resources the plan does not name are removed)."""
    status = {}
    for part, want, have in (
            ("capacity", plan.resources, node.status.capacity or {}),
            # a refusing plugin's GPUs stay in capacity, with nothing allocatable
            ("allocatable", plan.allocatable or plan.resources, node.status.allocatable or {})):
        changed: dict[str, str | None] = {k: v for k, v in want.items()
                                          if keep(k) and have.get(k) != v}
        changed.update({k: None for k in have if L.is_gpu_resource(k) and k not in want})
        if changed:
            status[part] = changed
    return status


def _taint_keys(taints: list[dict]) -> set[tuple]:
    return {(t.get("key"), t.get("value"), t.get("effect")) for t in taints}


def _ensure_cluster_policy(cluster: Cluster, state: SimState) -> dict:
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


def _set_cluster_policy_status(cluster: Cluster, state: SimState) -> None:
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


def _ensure_operator(cluster: Cluster, state: SimState) -> None:
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


def _ensure_sharing_config(cluster: Cluster, state: SimState) -> None:
    source = seeded_source(state)
    if source is None:
        return
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": source.name, "namespace": state.operator_namespace,
                         "labels": {STANDIN_LABEL: "true"}},
            "data": dict(source.docs)}
    ns = state.operator_namespace
    create_or_replace(lambda: cluster.core.create_namespaced_config_map(ns, body),
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


def _apply_daemonsets(cluster: Cluster, state: SimState, spec: dict, *,
                      plugin_refuses: bool = False) -> None:
    ns = state.operator_namespace
    owner = _owner(cluster)
    wanted = {}
    enabled = operands.enabled_operands(spec)
    _ensure_service_accounts(cluster, ns, {op.service_account for op in enabled})
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
                cluster.apps.replace_namespaced_daemon_set(name, ns, body)
                if name == "nvidia-driver-daemonset" and _image_changed(current, body):
                    _mark_upgrade_required(cluster)
                _restart_pods(cluster, ns, body)  # OnDelete operands need their pods replaced
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


def _restart_pods(cluster: Cluster, ns: str, body: dict) -> None:
    """Replace every pod of a changed operand at once: OnDelete needs it, and for RollingUpdate
    it makes a fault's new template reach every node now instead of one node at a time."""
    app = body["spec"]["selector"]["matchLabels"]["app"]
    for pod in cluster.core.list_namespaced_pod(ns, label_selector=f"app={app}").items:
        with already_done(NotFound):  # the DaemonSet controller may have been quicker
            cluster.core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)


# ---- controller loop -----------------------------------------------------------------------
def control_once(cluster: Cluster) -> None:
    """One pass of what the operator and the device plugin do continuously; then the pass
    acknowledges the sync request it read at its start (:func:`wait_for_a_full_pass`)."""
    cm = _state_map(cluster)
    if cm is None:
        return
    _control(cluster, SimState(**json.loads(cm.data["state.json"])))
    request = (cm.data or {}).get(SYNC_REQUEST_KEY)
    if request and cm.data.get(SYNC_DONE_KEY) != request:
        cluster.core.patch_namespaced_config_map(CONFIG_MAP, CONFIG_NAMESPACE,
                                                 {"data": {SYNC_DONE_KEY: request}})


def _control(cluster: Cluster, state: SimState) -> None:
    if state.has("standin-ignores-changes"):
        return
    dra.control_once(cluster, state)
    if gpucluster.wanted(state.resolve_profile()):
        gpucluster.control_once(cluster, state)
        return
    if not state.resolve_profile().runs_cluster_policy:
        plan = _follow_sharing(cluster, state, None)
        plugin_chart.apply(cluster, None if plan is None else plugin_chart.observed_source(
            cluster), crashloop=bool(plan and plan.refused), write_config=False)
        return
    policy = read_or_none(cluster.custom.get_cluster_custom_object, *clusterpolicy.API,
                          CLUSTER_POLICY)
    if policy is None:  # nothing to play yet (chart not installed, or uninstalled)
        return

    _react_to_operands_label(cluster, state)
    plan = _follow_sharing(cluster, state, policy)
    _apply_daemonsets(cluster, state, policy.get("spec", {}),
                      plugin_refuses=bool(plan and plan.refused))
    _relabel_upgraded_drivers(cluster, state, policy.get("spec", {}))
    if not (policy.get("status") or {}).get("state"):
        _set_cluster_policy_status(cluster, state)


def _follow_sharing(cluster: Cluster, state: SimState, policy: dict | None) -> Plan | None:
    """The device plugin and GFD following the user's sharing config: nodes' labels and
    capacity as the config they are pointed at says; the plugin's admission check."""
    nodes = {n.metadata.name: n for n in cluster.core.list_node().items}
    labels = {name: dict(n.metadata.labels or {}) for name, n in nodes.items()}
    source = observed_source(cluster, state, policy)
    plan = plan_nodes(state, source, labels)
    _sync_sharing(cluster, plan.nodes, nodes)
    _admit_shared_requests(cluster, state, source, labels)
    return plan


def _relabel_upgraded_drivers(cluster: Cluster, state: SimState, spec: dict) -> None:
    """GFD's part after a driver upgrade: a node whose new driver pod is Ready reports it."""
    version = (spec.get("driver") or {}).get("version")
    if not version or not (spec.get("driver") or {}).get("enabled", True):
        return
    pods = cluster.core.list_namespaced_pod(state.operator_namespace,
                                            label_selector="app=nvidia-driver-daemonset").items
    upgraded = {p.spec.node_name for p in pods if p.spec.containers[0].image.endswith(
        f":{version}") and any(c.type == "Ready" and c.status == "True"
                               for c in (p.status.conditions or []))}
    for node in cluster.core.list_node(label_selector=f"{L.GPU_PRESENT}=true").items:
        lab = node.metadata.labels or {}
        if node.metadata.name in upgraded and lab.get(L.DRIVER_UPGRADE_STATE) == "upgrade-required":
            cluster.core.patch_node(node.metadata.name, {"metadata": {"labels": {
                **driver.driver_labels(version),
                L.DRIVER_UPGRADE_STATE: "upgrade-done"}}})


def _react_to_operands_label(cluster: Cluster, state: SimState) -> None:
    """The operator's per-node state labels (state_manager.go, updateGPUStateLabels):
    ``nvidia.com/gpu.deploy.operands=false`` deletes every ``gpu.deploy.<operand>`` label;
    otherwise a missing one is added as ``true`` and one that is there is honoured, so a
    user's own ``gpu.deploy.<operand>=false`` survives the switch going off and on."""
    wanted = {group.node_name(i): gfd.operator_labels(group)
              for group in state.resolve_profile().node_groups if group.is_gpu
              for i in range(group.count)}
    for node in cluster.core.list_node(label_selector=f"{L.GPU_PRESENT}=true").items:
        lab = node.metadata.labels or {}
        operand_keys = {f"{L.DEPLOY_PREFIX}{op.deploy_key}" for op in operands.OPERANDS
                        if op.per_node_switch}
        patch: dict[str, str | None]
        if lab.get(L.DEPLOY_OPERANDS) == "false":
            patch = {k: None for k in lab if k in operand_keys}
        else:
            patch = {k: v for k, v in wanted.get(node.metadata.name, {}).items()
                     if k in operand_keys and k not in lab}
        if patch:
            cluster.core.patch_node(node.metadata.name, {"metadata": {"labels": patch}})


def _admit_shared_requests(cluster: Cluster, state: SimState, source: ConfigSource | None,
                           node_labels: dict[str, dict[str, str]]) -> None:
    """The device plugin refuses >1 shared GPU when its node's config says
    failRequestsGreaterThanOne (MPS always does)."""
    if source is None or state.has("frgo-ignored"):
        return
    limited: dict[str, set[str]] = {}  # node -> the shared resource names it limits to 1
    for node, labels in node_labels.items():
        config = applied_for(source, labels).config
        if config is not None and config.fails_requests_greater_than_one:
            limited[node] = {config.advertised_name(r.name) for r in config.resources}
    if not limited:
        return
    pods = cluster.core.list_pod_for_all_namespaces(field_selector="status.phase=Running").items
    for pod in pods:
        names = limited.get(pod.spec.node_name or "")
        if not names:
            continue
        for c in pod.spec.containers:
            limits = (c.resources.limits or {}) if c.resources else {}
            asked = {n: int(limits[n]) for n in names if int(limits.get(n, 0)) > 1}
            if asked:
                name, count = next(iter(asked.items()))
                msg = ("Allocate failed due to rpc error: code = Unknown desc = request for "
                       f"'{name}: {count}' too large: maximum request size for shared "
                       "resources is 1")
                cluster.core.patch_namespaced_pod_status(pod.metadata.name,
                                                         pod.metadata.namespace, {"status": {
                    "phase": "Failed", "reason": "UnexpectedAdmissionError", "message": msg}})
                break


_SHARING_LABEL = re.compile(r"^nvidia\.com/(gpu|mig-.+)\.(product|replicas|sharing-strategy)$"
                            r"|^nvidia\.com/mps\.capable$")


def _sync_sharing(cluster: Cluster, plans: list[NodePlan], nodes: dict) -> None:
    """Patch what sharing decides on each node (GFD's sharing labels, the plugin's GPU
    resources) where it differs from the plan; leave every other label alone (driver
    upgrades, the user's own labels)."""
    for plan in plans:
        node = nodes.get(plan.name)
        if node is None or not plan.gpu:
            continue
        current = node.metadata.labels or {}
        labels = {k: v for k, v in plan.labels.items()
                  if _SHARING_LABEL.match(k) and current.get(k) != v}
        labels.update({k: None for k in current if _SHARING_LABEL.match(k)
                       and k not in plan.labels})
        if labels:
            cluster.core.patch_node(plan.name, {"metadata": {"labels": labels}})
        status = _status_change(plan, node, keep=L.is_gpu_resource)
        if status:
            cluster.core.patch_node_status(plan.name, {"status": status})


def _node_labels(cluster: Cluster) -> dict[str, dict[str, str]]:
    return {n.metadata.name: dict(n.metadata.labels or {}) for n in cluster.core.list_node().items}


def _ensure_service_accounts(cluster: Cluster, namespace: str, names: set[str]) -> None:
    """The operands' ServiceAccounts, as the operator creates them (workloads reference
    them too: the operator's own plugin-test Deployment runs as nvidia-device-plugin)."""
    for name in sorted(n for n in names if n):
        with already_done(Conflict):
            cluster.core.create_namespaced_service_account(namespace, {
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": name, "labels": {STANDIN_LABEL: "true"}}})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.sim.standin",
                                     description="GPU Operator stand-in controller loop")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--interval", type=float, default=LOOP_INTERVAL_S)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    cluster = connect(args.kubeconfig)
    log.info("stand-in controller loop started against %s", cluster.server)
    while True:
        try:
            control_once(cluster)
        except ApiException as exc:
            log.warning("reconcile failed: %s %s", exc.status, exc.reason)
        except Exception as exc:
            log.warning("reconcile failed: %s", exc)
        time.sleep(args.interval)


if __name__ == "__main__":
    raise SystemExit(main())
