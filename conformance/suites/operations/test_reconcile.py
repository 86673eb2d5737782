"""Operations / reconcile: a ClusterPolicy change reaches the operands, the operands switch off
and on per node, and a killed operator comes back. These checks change the cluster, so they
run only with --disruptive; each changes one thing, and its cleanup restores only that thing
(retrying on conflict) and waits until the operands have settled again.

Checklist (gpu-operator tests/scripts/update-clusterpolicy.sh, end-to-end.sh steps 5-7):
- OPS-REC-001 devicePlugin.env reaches the device plugin DaemonSet
- OPS-REC-001 mig.strategy=mixed reaches MIG_STRATEGY in the plugin and GFD
- OPS-REC-001 a devicePlugin.config switch reaches the plugin (its ConfigMap mounted,
  DEFAULT_CONFIG set)
- OPS-REC-001 dcgmExporter.enabled=false removes the DCGM exporter pods; true brings them back
  (not applicable where the ClusterPolicy has the exporter off: no DCGM on the host)
- OPS-REC-002 nvidia.com/gpu.deploy.operands=false empties a node of operands; restoring it
  brings them back
- OPS-REC-003 the operator pod, deleted, is replaced and Running again
"""

from __future__ import annotations

import secrets

import pytest

from conformance.checks.rollout import pod_ready
from conformance.cluster import policy_edit, views
from conformance.cluster.waits import wait_for
from conformance.nvidia import labels as L
from conformance.nvidia import operands
from conformance.plugin.api import not_applicable_if_switched_off

pytestmark = pytest.mark.disruptive

PLUGIN_DS = operands.get_operand("device-plugin").name
GFD_DS = operands.get_operand("gpu-feature-discovery").name
DCGM_EXPORTER = operands.get_operand("dcgm-exporter")
DCGM_APP = DCGM_EXPORTER.app


@pytest.fixture
def change_policy(cluster, cluster_policy, gpu_env, request):
    """``change_policy(path, value)``: change one ClusterPolicy field for this test.

    Cleanup restores that field only, then waits until the operands settle.
    """
    if cluster_policy is None:
        pytest.skip("not-applicable: no ClusterPolicy to change")
    changes: list[policy_edit.FieldChange] = []

    def change(path: tuple[str, ...], value) -> policy_edit.FieldChange:
        changes.append(policy_edit.change_field(cluster, cluster_policy.name, path, value))
        return changes[-1]

    def restore() -> None:
        for done in reversed(changes):
            done.restore()
        policy_edit.wait_operands_settled(cluster, gpu_env.options.operator_namespace,
                                          gpu_env.options.reconcile_timeout)

    request.addfinalizer(restore)
    return change


def _ds_env(cluster, ns: str, ds: str) -> dict[str, str]:
    d = cluster.apps.read_namespaced_daemon_set(ds, ns)
    return {e.name: e.value for c in d.spec.template.spec.containers for e in (c.env or [])}


def _pods(cluster, ns: str, app: str) -> list:
    return cluster.core.list_namespaced_pod(ns, label_selector=f"app={app}").items


def _wait_env(cluster, gpu_env, ds: str, name: str, value: str, why: str) -> None:
    ns = gpu_env.options.operator_namespace
    wait_for(f"env {name}={value} in DaemonSet {ns}/{ds} ({why})",
             lambda: _ds_env(cluster, ns, ds).get(name) == value,
             timeout=gpu_env.options.reconcile_timeout, interval=1.0,
             describe_last=lambda: str(_ds_env(cluster, ns, ds)))


@pytest.mark.requirement("OPS-REC-001")
def test_device_plugin_env_reaches_the_daemonset(cluster, change_policy, gpu_env):
    marker = f"gpuconf-{secrets.token_hex(3)}"
    change_policy(("devicePlugin", "env"), [{"name": "GPUCONF_RECONCILE_PROBE",
                                             "value": marker}])
    _wait_env(cluster, gpu_env, PLUGIN_DS, "GPUCONF_RECONCILE_PROBE", marker,
              "spec.devicePlugin.env")


@pytest.mark.requirement("OPS-REC-001")
def test_mig_strategy_reaches_plugin_and_gfd(cluster, change_policy, gpu_env):
    change_policy(("mig", "strategy"), "mixed")
    for ds in (PLUGIN_DS, GFD_DS):
        _wait_env(cluster, gpu_env, ds, "MIG_STRATEGY", "mixed", "spec.mig.strategy=mixed")


@pytest.mark.requirement("OPS-REC-001")
def test_sharing_config_switch_reaches_the_plugin(cluster, change_policy, gpu_env):
    ns = gpu_env.options.operator_namespace
    marker = f"gpuconf-{secrets.token_hex(3)}"
    change_policy(("devicePlugin", "config"), {"name": marker, "default": "any"})
    wait_for(f"the device plugin to switch to sharing config {marker}",
             lambda: _ds_env(cluster, ns, PLUGIN_DS).get("DEFAULT_CONFIG") == "any"
             and marker in str(cluster.apps.read_namespaced_daemon_set(
                 PLUGIN_DS, ns).spec.template.spec.volumes),
             timeout=gpu_env.options.reconcile_timeout, interval=1.0,
             describe_last=lambda: str(_ds_env(cluster, ns, PLUGIN_DS)))


@pytest.mark.requirement("OPS-REC-001")
def test_dcgm_exporter_switches_off_and_on(cluster, change_policy, cluster_policy, gpu_env):
    not_applicable_if_switched_off(cluster_policy, DCGM_EXPORTER, "switch off and on")
    ns, timeout = gpu_env.options.operator_namespace, gpu_env.options.reconcile_timeout
    switched = change_policy(("dcgmExporter", "enabled"), False)
    wait_for(f"DCGM exporter pods in {ns} to disappear (dcgmExporter.enabled=false)",
             lambda: not _pods(cluster, ns, DCGM_APP), timeout=timeout, interval=1.0,
             describe_last=lambda: f"{len(_pods(cluster, ns, DCGM_APP))} left")
    switched.restore()
    wait_for(f"DCGM exporter pods in {ns} to come back Ready (dcgmExporter.enabled restored)",
             lambda: any(pod_ready(p) for p in _pods(cluster, ns, DCGM_APP)), timeout=timeout,
             interval=1.0)


@pytest.mark.requirement("OPS-REC-002")
def test_deploy_operands_label_switches_a_node(cluster, gpu_env, require_gpu_nodes, request):
    ns = gpu_env.options.operator_namespace
    node = require_gpu_nodes[0].name
    before = require_gpu_nodes[0].label(L.DEPLOY_OPERANDS)

    def on_node() -> list[str]:
        return views.read_operator_view(cluster, ns).operand_pods_on(node)

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
