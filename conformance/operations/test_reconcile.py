"""Operations / reconcile: a ClusterPolicy change reaches the operands, the operands switch off
and on per node, and a killed operator comes back. These checks change the cluster, so they
run only with --disruptive, save what they change first and restore it in cleanup.

Checklist (gpu-operator tests/scripts/update-clusterpolicy.sh, end-to-end.sh steps 5-7):
- OPS-REC-001 devicePlugin.env reaches the device plugin DaemonSet; mig.strategy=mixed reaches
  MIG_STRATEGY in the plugin and GFD; a devicePlugin.config switch reaches the plugin (its
  ConfigMap mounted, DEFAULT_CONFIG set); dcgmExporter.enabled=false
  removes the DCGM exporter pods and true brings them back
- OPS-REC-002 nvidia.com/gpu.deploy.operands=false empties a node of operands; restoring it
  brings them back
- OPS-REC-003 the operator pod, deleted, is replaced and Running again
"""

from __future__ import annotations

import copy
import secrets

import pytest

from conformance import labels as L
from conformance.checks.operands import CLUSTER_POLICY, OperatorView, pod_ready
from conformance.cluster.waits import wait_for

pytestmark = pytest.mark.disruptive

PLUGIN_DS = "nvidia-device-plugin-daemonset"
GFD_DS = "gpu-feature-discovery"
DCGM_APP = "nvidia-dcgm-exporter"


@pytest.fixture
def policy(cluster, cluster_policy, request):
    """The ClusterPolicy, restored to its current spec after the test."""
    if cluster_policy is None:
        pytest.skip("not-applicable: no ClusterPolicy to change")
    name = cluster_policy["metadata"]["name"]
    live = cluster.custom.get_cluster_custom_object(*CLUSTER_POLICY, name)
    saved = copy.deepcopy(live["spec"])

    def restore() -> None:
        current = cluster.custom.get_cluster_custom_object(*CLUSTER_POLICY, name)
        current["spec"] = saved
        cluster.custom.replace_cluster_custom_object(*CLUSTER_POLICY, name, current)

    request.addfinalizer(restore)
    return name


def _patch_spec(cluster, name: str, spec_patch: dict) -> None:
    cluster.custom.patch_cluster_custom_object(*CLUSTER_POLICY, name, {"spec": spec_patch})


def _ds_env(cluster, ns: str, ds: str) -> dict[str, str]:
    d = cluster.apps.read_namespaced_daemon_set(ds, ns)
    return {e.name: e.value for c in d.spec.template.spec.containers for e in (c.env or [])}


def _pods(cluster, ns: str, app: str) -> list:
    return cluster.core.list_namespaced_pod(ns, label_selector=f"app={app}").items


@pytest.mark.requirement("OPS-REC-001")
def test_cluster_policy_change_reaches_operands(cluster, policy, gpu_env):
    ns = gpu_env.options.operator_namespace
    marker = f"gpuconf-{secrets.token_hex(3)}"
    _patch_spec(cluster, policy, {"devicePlugin": {"env": [
        {"name": "GPUCONF_RECONCILE_PROBE", "value": marker}]}})
    wait_for(f"env GPUCONF_RECONCILE_PROBE={marker} in DaemonSet {ns}/{PLUGIN_DS}",
             lambda: _ds_env(cluster, ns, PLUGIN_DS).get("GPUCONF_RECONCILE_PROBE") == marker,
             timeout=gpu_env.options.reconcile_timeout, interval=1.0,
             describe_last=lambda: str(_ds_env(cluster, ns, PLUGIN_DS)))
    _patch_spec(cluster, policy, {"mig": {"strategy": "mixed"}})
    for ds in (PLUGIN_DS, GFD_DS):
        wait_for(f"MIG_STRATEGY=mixed in DaemonSet {ns}/{ds} (spec.mig.strategy=mixed)",
                 lambda d=ds: _ds_env(cluster, ns, d).get("MIG_STRATEGY") == "mixed",
                 timeout=gpu_env.options.reconcile_timeout, interval=1.0,
                 describe_last=lambda d=ds: str(_ds_env(cluster, ns, d)))
    _patch_spec(cluster, policy, {"devicePlugin": {"config": {"name": marker,
                                                              "default": "any"}}})
    wait_for(f"the device plugin to switch to sharing config {marker}",
             lambda: _ds_env(cluster, ns, PLUGIN_DS).get("DEFAULT_CONFIG") == "any"
             and marker in str(cluster.apps.read_namespaced_daemon_set(
                 PLUGIN_DS, ns).spec.template.spec.volumes),
             timeout=gpu_env.options.reconcile_timeout, interval=1.0)
    _patch_spec(cluster, policy, {"dcgmExporter": {"enabled": False}})
    wait_for(f"DCGM exporter pods in {ns} to disappear (dcgmExporter.enabled=false)",
             lambda: not _pods(cluster, ns, DCGM_APP), timeout=gpu_env.options.reconcile_timeout,
             interval=1.0, describe_last=lambda: f"{len(_pods(cluster, ns, DCGM_APP))} left")
    _patch_spec(cluster, policy, {"dcgmExporter": {"enabled": True}})
    wait_for(f"DCGM exporter pods in {ns} to come back Ready (dcgmExporter.enabled=true)",
             lambda: any(pod_ready(p) for p in _pods(cluster, ns, DCGM_APP)),
             timeout=gpu_env.options.reconcile_timeout, interval=1.0)


@pytest.mark.requirement("OPS-REC-002")
def test_deploy_operands_label_switches_a_node(cluster, gpu_env, require_gpu_nodes, request):
    ns = gpu_env.options.operator_namespace
    node = require_gpu_nodes[0].name
    before = require_gpu_nodes[0].label(L.DEPLOY_OPERANDS)

    def on_node() -> list:
        view = OperatorView.read(cluster, ns)
        return [p.metadata.name for pods in view.pods_by_app.values() for p in pods
                if p.spec.node_name == node and p.metadata.deletion_timestamp is None]

    running = on_node()
    assert running, f"no operand pods on {node} to switch off"

    def restore() -> None:
        cluster.core.patch_node(node, {"metadata": {"labels": {L.DEPLOY_OPERANDS: before}}})

    request.addfinalizer(restore)
    cluster.core.patch_node(node, {"metadata": {"labels": {L.DEPLOY_OPERANDS: "false"}}})
    wait_for(f"every operand pod to leave {node} ({L.DEPLOY_OPERANDS}=false)",
             lambda: not on_node(), timeout=gpu_env.options.reconcile_timeout, interval=1.0,
             describe_last=lambda: ", ".join(on_node()))
    restore()
    wait_for(f"operand pods to return to {node}", lambda: len(on_node()) >= len(running),
             timeout=gpu_env.options.reconcile_timeout, interval=1.0,
             describe_last=lambda: f"{len(on_node())} of {len(running)} back")


@pytest.mark.requirement("OPS-REC-003")
def test_killed_operator_comes_back(cluster, gpu_env):
    ns = gpu_env.options.operator_namespace
    pods = cluster.core.list_namespaced_pod(ns, label_selector=L.OPERATOR_SELECTOR).items
    assert pods, f"no operator pod ({L.OPERATOR_SELECTOR}) in {ns}"
    old = {p.metadata.name for p in pods}
    for p in pods:
        cluster.core.delete_namespaced_pod(p.metadata.name, ns, grace_period_seconds=0)

    def replacement_running() -> bool:
        now = cluster.core.list_namespaced_pod(ns, label_selector=L.OPERATOR_SELECTOR).items
        return any(p.metadata.name not in old and p.status.phase == "Running" and pod_ready(p)
                   for p in now)

    wait_for(f"a new operator pod Running in {ns}", replacement_running,
             timeout=gpu_env.options.reconcile_timeout, interval=1.0)
