"""Every profile comes up with the upstream label contract; every fault shows its symptom in
the API (read through the API server, never from the stand-in's own variables)."""

from __future__ import annotations

import datetime
import time

import pytest

from conformance.checks import gfd_consistency
from conformance.checks.gang import KUEUE_GROUP, KUEUE_VERSION
from conformance.cluster.views import list_gpu_nodes, read_cluster_policy, read_operator_view
from conformance.nvidia import gfd_contract
from conformance.nvidia import labels as L
from conformance.sim import foreign_objects, gfd, profiles
from conformance.sim.faults import FAULTS
from tests.integration.dra_symptoms import DRA_SYMPTOMS

# large, dra-large: see the scale benchmark
SIM_PROFILES = [p for p in profiles.PROFILES if p not in ("large", "dra-large")]


@pytest.mark.parametrize("profile", SIM_PROFILES)
def test_profile_nodes_match_contract_and_resources(profile, sim_cluster, sim_state):
    sim_state(profile)
    prof = profiles.get_profile(profile)
    nodes = {n.name: n for n in list_gpu_nodes(sim_cluster)}
    assert len(nodes) == prof.gpu_node_count
    for group, _index, name in prof.iter_nodes():
        if not group.is_gpu:
            continue
        node = nodes[name]
        assert gfd_contract.check_gfd_labels(node.labels).problems == [], name
        want = {k: int(v) for k, v in gfd.advertised_resources(group).items()
                if L.is_gpu_resource(k)}
        assert node.gpu_resources == want, name


def _view(sim_cluster):
    return read_operator_view(sim_cluster, "gpu-operator")


def _settled(check, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.5)


SYMPTOMS = {
    "device-plugin-absent": lambda c: (
        "nvidia-device-plugin-daemonset" not in _view(c).daemonsets
        and all(not n.gpu_resources for n in list_gpu_nodes(c))),
    "toolkit-absent": lambda c: "nvidia-container-toolkit-daemonset" not in _view(c).daemonsets,
    "driver-version-mismatch": lambda c: len(
        {n.label(L.DRIVER_FULL) for n in list_gpu_nodes(c)}) == 2,
    "gfd-absent": lambda c: ("gpu-feature-discovery" not in _view(c).daemonsets and all(
        n.label(L.PRODUCT) is None for n in list_gpu_nodes(c))),
    "gfd-label-wrong": lambda c: any(
        n.int_label(L.COUNT) * (n.int_label(L.REPLICAS) or 1) != n.main_resource[1]
        for n in list_gpu_nodes(c)),
    "time-slicing-replicas-mislabelled": lambda c: any(
        n.int_label(L.REPLICAS) * n.int_label(L.COUNT) != n.main_resource[1]
        for n in list_gpu_nodes(c)),
    "operand-crashloop": lambda c: any(
        (s.state.waiting and s.state.waiting.reason == "CrashLoopBackOff")
        for p in _view(c).pods_by_app.get("nvidia-dcgm-exporter", [])
        for s in (p.status.container_statuses or [])),
    "clusterpolicy-notready": lambda c: read_cluster_policy(c).state == "notReady",
    "gpu-node-taint-missing-toleration": lambda c: any(
        t["key"] == "dedicated" for n in list_gpu_nodes(c) for t in n.taints),
    "wrong-gpu-type-label": lambda c: any(
        "wrong GPU type" in p for n in list_gpu_nodes(c)
        for p in gfd_consistency.inconsistencies(n)),
    "operator-unavailable": lambda c: any(
        d.status.available_replicas in (None, 0)
        for d in c.apps.list_namespaced_deployment("gpu-operator").items),
    "driver-crashloop": lambda c: _crashlooping(c, "nvidia-driver-daemonset") and all(
        p.status.phase == "Pending"
        for p in _view(c).pods_by_app.get("nvidia-operator-validator", [None])),
    "mig-manager-crashloop": lambda c: _crashlooping(c, "nvidia-mig-manager"),
    "gpu-request-rewriter": lambda c: _fractional_pod_admitted(c),
    "compute-capability-label-wrong": lambda c: any(
        n.label(L.PRODUCT).startswith("NVIDIA-A100") and n.int_label(L.COMPUTE_MAJOR) == 9
        for n in list_gpu_nodes(c)),
    "sharing-config-invalid": lambda c: "replicas: 1\n" in c.core.read_namespaced_config_map(
        "device-plugin-config", "gpu-operator").data["default"] and _crashlooping(
        c, "nvidia-device-plugin-daemonset"),
    "sharing-config-not-applied": lambda c: all(
        n.gpu_resources == {L.GPU_RESOURCE: n.int_label(L.COUNT)} and n.int_label(L.REPLICAS) == 4
        for n in list_gpu_nodes(c)),
    "frgo-ignored": lambda c: _two_slice_pod_runs(c),
    "unpinned-gpu-workload": lambda c: any(
        p.status.phase == "Running" for p in c.core.list_namespaced_pod("ml-team").items),
    "standin-ignores-changes": lambda c: c.core.read_namespaced_config_map(
        "gpuconf-sim-standin", "kube-system").data["state.json"].count(
        "standin-ignores-changes") == 1,
    "gang-quota-overcommitted": lambda c: _gpu_quota(c) > sum(
        n.gpu_resources.get(L.GPU_RESOURCE, 0) for n in list_gpu_nodes(c)),
    "gang-controller-down": lambda c: _local_queue_never_active(c),
    "autoscaling-no-gpu-instance-types": lambda c: _nodepool_gpu_types(c) == [],
    "autoscaling-scale-down-disabled": lambda c: _nodepool(c).get("spec", {}).get(
        "disruption", {}).get("consolidateAfter") == "Never",
    "hpa-metrics-api-down": lambda c: _custom_metrics_api_unavailable(c),
    "hpa-gpus-held": lambda c: _pods_running(c, foreign_objects.HOLDER_NAMESPACE) == sum(
        n.gpu_resources.get(L.GPU_RESOURCE, 0) for n in list_gpu_nodes(c)) - 1,
    **DRA_SYMPTOMS,
}


def _nodepool(c) -> dict:
    """The sim's Karpenter NodePool, as the API server has it ({} without Karpenter)."""
    from conformance.cluster.client import read_or_none
    from conformance.sim import karpenter

    return read_or_none(c.custom.get_cluster_custom_object, "karpenter.sh", "v1", "nodepools",
                        karpenter.NODEPOOL) or {}


def _nodepool_gpu_types(c) -> list[str] | None:
    """The GPU instance types (the profile's autoscaled GPU groups) the NodePool's
    instance-type requirement allows; None without the NodePool."""
    pool = _nodepool(c)
    if not pool:
        return None
    gpu_types = [g.machine_type for g in profiles.get_profile("autoscaling-karpenter").autoscaled
                 if g.is_gpu]
    for req in pool["spec"]["template"]["spec"].get("requirements") or []:
        if req["key"] == "node.kubernetes.io/instance-type" and req["operator"] == "In":
            return [t for t in gpu_types if t in req["values"]]
    return gpu_types


def _crashlooping(c, app: str) -> bool:
    return any((s.state.waiting and s.state.waiting.reason == "CrashLoopBackOff")
               for p in _view(c).pods_by_app.get(app, [])
               for s in (p.status.container_statuses or []))


def _custom_metrics_api_unavailable(c) -> bool:
    """APIService v1beta2.custom.metrics.k8s.io is registered and not Available."""
    from conformance.cluster import pod_autoscaling

    return any(not api.available for api in pod_autoscaling.metrics_apis(c))


def _pods_running(c, namespace: str) -> int:
    return sum(p.status.phase == "Running" for p in c.core.list_namespaced_pod(namespace).items)


def _kueue_served(c) -> bool:
    from conformance.cluster import gang as gangs

    return "clusterqueues" in gangs.served(c).get(KUEUE_GROUP, set())


def _gpu_quota(c) -> int:
    """The sim's ClusterQueue's nvidia.com/gpu quota (0 without Kueue)."""
    from conformance.cluster import gang as gangs

    return sum(q.gpu_quota for q in gangs.cluster_queues(c)) if _kueue_served(c) else 0


def _local_queue_never_active(c) -> bool:
    """A LocalQueue made in ``default`` is still not Active 5 s on: no Kueue reconciles it.

    Probes Kueue made Active earlier (before the fault stopped it) keep that status; they are
    ignored, and one probe Kueue has not seen is made whenever none is there."""
    if not _kueue_served(c):
        return False
    label = "gpuconf.io/symptom-probe"

    def active(queue: dict) -> bool:
        return any(cond["type"] == "Active" and cond["status"] == "True"
                   for cond in (queue.get("status") or {}).get("conditions") or [])

    probes = [q for q in c.custom.list_namespaced_custom_object(
        KUEUE_GROUP, KUEUE_VERSION, "default", "localqueues", label_selector=label)["items"]
        if not active(q)]
    if not probes:
        c.custom.create_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, "default", "localqueues",
            {"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", "kind": "LocalQueue",
             "metadata": {"generateName": "symptom-probe-", "labels": {label: "true"}},
             "spec": {"clusterQueue": "gpuconf-gpus"}})
        return False
    now = datetime.datetime.now(datetime.UTC)
    return any(now - datetime.datetime.fromisoformat(q["metadata"]["creationTimestamp"])
               > datetime.timedelta(seconds=5) for q in probes)


def _fractional_pod_admitted(c) -> bool:
    """A pod asking for 0.5 GPU passes the API server (dry run), rewritten to one GPU."""
    from kubernetes.client.exceptions import ApiException

    from conformance.cluster.pods import PodSpec

    try:
        pod = c.core.create_namespaced_pod("default", PodSpec("frac", gpus="0.5").manifest({}),
                                           dry_run="All")
    except ApiException as exc:
        assert exc.status == 422, exc
        return False
    return pod.spec.containers[0].resources.limits[L.GPU_RESOURCE] == "1"


def _two_slice_pod_runs(c) -> bool:
    """A pod asking for 2 shared GPUs is still Running a few seconds after it started."""
    from conformance.cluster.pods import PodSpec

    name = f"two-{int(time.monotonic() * 1000) % 100000}"
    body = PodSpec(name, gpus=2, resource=L.SHARED_RESOURCE).manifest({})
    c.core.create_namespaced_pod("default", body)
    try:
        time.sleep(4)
        return c.core.read_namespaced_pod(body["metadata"]["name"], "default").status.phase \
            == "Running"
    finally:
        c.core.delete_namespaced_pod(body["metadata"]["name"], "default",
                                     grace_period_seconds=0)


def test_every_fault_has_a_symptom_check():
    assert set(SYMPTOMS) == {f.name for f in FAULTS}


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
def test_fault_shows_its_symptom_in_the_api(fault, sim_cluster, sim_state):
    sim_state(fault.profile)
    assert not _settled(lambda: SYMPTOMS[fault.name](sim_cluster), timeout=0), (
        f"{fault.name}'s symptom is present without the fault")
    sim_state(fault.profile, [fault.name])
    assert _settled(lambda: SYMPTOMS[fault.name](sim_cluster)), f"{fault.name} shows no symptom"
