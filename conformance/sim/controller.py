"""One pass of the stand-in's controller loop: what the GPU Operator, the device plugin and GFD
do continuously, played against the cluster as it is now: the operator's reaction to
ClusterPolicy and node-label changes, the plugin and GFD following the sharing config a node is
pointed at, the plugin's admission check, GFD's labels after a driver upgrade. The loop itself
runs as its own process (``loop.py``)."""

from __future__ import annotations

from conformance.cluster.client import Cluster, read_or_none
from conformance.nvidia import clusterpolicy, driver, operands
from conformance.nvidia import labels as L
from conformance.nvidia.clusterpolicy import ClusterPolicy
from conformance.sim import (
    dra,
    gfd,
    gpucluster,
    karpenter,
    node_objects,
    operator_objects,
    plugin_chart,
    standin_state,
)
from conformance.sim.operator_plan import Plan, SimState, plan_nodes
from conformance.sim.sharing_flow import ConfigSource, applied_for


def observed_source(cluster: Cluster, state: SimState, policy: dict | None) -> ConfigSource | None:
    """The sharing configs the plugin is pointed at now, read from the cluster: the
    ClusterPolicy's spec.devicePlugin.config, or (no operator) the chart's mounted ConfigMap."""
    if not state.resolve_profile().runs_cluster_policy:
        return plugin_chart.observed_source(cluster)
    ref = ClusterPolicy(policy).device_plugin_config if policy else None
    if ref is None:
        return None
    return plugin_chart.read_source(cluster, state.operator_namespace, ref.name, ref.default)


def control_once(cluster: Cluster) -> None:
    """One pass of what the operator and the device plugin do continuously; then the pass
    acknowledges the sync request it read at its start (:func:`wait_for_a_full_pass`)."""
    cm = standin_state.state_map(cluster)
    if cm is None:
        return
    _control(cluster, standin_state.state_in(cm))
    standin_state.acknowledge_pass(cluster, cm)


def _control(cluster: Cluster, state: SimState) -> None:
    if state.has("standin-ignores-changes"):
        return
    dra.control_once(cluster, state)
    karpenter.control_once(cluster, state)  # the GPU nodes Karpenter launched
    if gpucluster.wanted(state.resolve_profile()):
        gpucluster.control_once(cluster, state)
        return
    if not state.resolve_profile().runs_cluster_policy:
        seen = plugin_chart.daemonset_versions(cluster)  # before the pass reads what they mount
        plan = _follow_sharing(cluster, state, None)
        plugin_chart.apply(cluster, None if plan is None else plugin_chart.observed_source(
            cluster), crashloop=bool(plan and plan.refused), write_config=False, seen=seen)
        return
    policy = read_or_none(cluster.custom.get_cluster_custom_object, *clusterpolicy.API,
                          operator_objects.CLUSTER_POLICY)
    if policy is None:  # nothing to play yet (chart not installed, or uninstalled)
        return
    _react_to_operands_label(cluster, state)
    plan = _follow_sharing(cluster, state, policy)
    operator_objects.apply_daemonsets(cluster, state, policy.get("spec", {}),
                                      plugin_refuses=bool(plan and plan.refused))
    _relabel_upgraded_drivers(cluster, state, policy.get("spec", {}))
    if not (policy.get("status") or {}).get("state"):
        operator_objects.set_cluster_policy_status(cluster, state)


def _follow_sharing(cluster: Cluster, state: SimState, policy: dict | None) -> Plan | None:
    """The device plugin and GFD following the user's sharing config: nodes' labels and
    capacity as the config they are pointed at says; the plugin's admission check."""
    nodes = {n.metadata.name: n for n in cluster.core.list_node().items}
    labels = {name: dict(n.metadata.labels or {}) for name, n in nodes.items()}
    source = observed_source(cluster, state, policy)
    plan = plan_nodes(state, source, labels)
    node_objects.sync_sharing(cluster, plan.nodes, nodes)
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
