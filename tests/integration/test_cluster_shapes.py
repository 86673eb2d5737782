"""Clusters as they are in the wild (issue: no operator, older GFD, NVIDIA's own sharing flow,
NVIDIA's own test pod, long silent waits), each against the real control plane of the sim."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from kubernetes.client.exceptions import ApiException

from conformance.cluster.views import list_gpu_nodes
from conformance.nvidia import clusterpolicy
from conformance.nvidia import labels as L
from tests.helpers import run_suites, verdicts

FLOW_TIMEOUT_S = 30.0  # the acceptance bar: the operator's sharing flow shows within 30 s
PLUGIN_CONFIG = {  # NVIDIA/gpu-operator tests/plugin-config.yaml
    "time-slicing": "version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n"
                    "    renameByDefault: false\n    resources:\n      - name: nvidia.com/gpu\n"
                    "        replicas: 10\n",
    "mps": "version: v1\nflags:\n  migStrategy: none\nsharing:\n  mps:\n"
           "    renameByDefault: false\n    resources:\n      - name: nvidia.com/gpu\n"
           "        replicas: 4\n"}


def _until(what: str, check, timeout: float = FLOW_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout:.0f}s: {what}")


# ---- 1. GPU nodes without the operator's label ---------------------------------------------
def test_device_plugin_chart_cluster_passes_without_the_operator(sim, sim_cluster, sim_state,
                                                                 tmp_path):
    sim_state("device-plugin-chart-time-slicing")
    nodes = list_gpu_nodes(sim_cluster)
    assert nodes and all(L.GPU_PRESENT not in n.labels for n in nodes)
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, "stack", "scheduling", "sharing")
    assert verdicts(doc, "fail") == set() and code == 0, out[-3000:]
    rows = {r["id"]: r for r in doc["requirements"]}
    assert {"STACK-DP-001", "STACK-GFD-001", "STACK-DP-002", "STACK-GFD-002", "SHARE-CAP-001",
            "SHARE-OVS-001", "SCHED-ALLOC-001"} <= verdicts(doc, "pass")
    assert rows["STACK-OP-001"]["verdict"] == "not-applicable"
    assert "no GPU Operator" in rows["STACK-OP-001"]["message"]
    fp = doc["fingerprint"]
    assert fp["gpu_stack"] == "device-plugin-chart" and fp["gpu_node_count"] == len(nodes)
    assert all("NFD PCI 10de" in n["gpu_evidence"] for n in fp["nodes"])


def test_a_node_nfd_sees_as_nvidia_without_gpus_is_a_finding(sim, sim_cluster, sim_state,
                                                              tmp_path):
    sim_state("healthy")
    cpu = next(n.metadata.name for n in sim_cluster.core.list_node().items
               if not (n.metadata.labels or {}).get(L.GPU_PRESENT))
    sim_cluster.core.patch_node(cpu, {"metadata": {"labels": {L.NFD_PCI_NVIDIA: "true"}}})
    try:
        _code, doc, out = run_suites(sim.kubeconfig, tmp_path, "stack/test_device_plugin.py")
    finally:
        sim_cluster.core.patch_node(cpu, {"metadata": {"labels": {L.NFD_PCI_NVIDIA: None}}})
    row = next(r for r in doc["requirements"] if r["id"] == "STACK-DP-002")
    assert row["verdict"] == "fail", out[-2000:]
    assert cpu in row["message"] and "NFD PCI 10de" in row["message"]


# ---- 2. GFD of another release -------------------------------------------------------------
def test_labels_an_older_gfd_never_wrote_are_a_warning(sim, sim_cluster, sim_state, tmp_path):
    sim_state("healthy")
    sim_cluster.custom.patch_cluster_custom_object(*clusterpolicy.API, "cluster-policy", {
        "spec": {"gfd": {"version": "v0.14.5"}}})  # GFD before v0.15.0

    def old_gfd_runs() -> bool:
        pods = sim_cluster.core.list_namespaced_pod(
            "gpu-operator", label_selector="app=gpu-feature-discovery").items
        return bool(pods) and all(p.spec.containers[0].image.endswith(":v0.14.5")
                                  and p.status.phase == "Running" for p in pods)

    _until("GFD v0.14.5 pods running", old_gfd_runs)
    for node in list_gpu_nodes(sim_cluster):  # what that GFD never wrote
        newer = {k: None for k in node.labels if k.startswith((
            "nvidia.com/cuda.driver-version.", "nvidia.com/cuda.runtime-version.",
            "nvidia.com/gpu.mode"))}
        sim_cluster.core.patch_node(node.name, {"metadata": {"labels": newer}})
    _code, doc, out = run_suites(sim.kubeconfig, tmp_path, "stack/test_gfd.py",
                                 "stack/test_driver.py")
    rows = {r["id"]: r for r in doc["requirements"]}
    assert rows["STACK-GFD-002"]["verdict"] == "pass", out[-3000:]
    assert "GFD v0.14.5" in rows["STACK-GFD-002"]["message"]
    assert "cuda.driver-version.full (added in v0.15.0)" in rows["STACK-GFD-002"]["message"]
    assert rows["STACK-DRV-002"]["verdict"] == "pass"  # read from cuda.driver.* instead


def test_mig_labels_naming_another_profile_than_the_resource_fail(sim, sim_cluster, sim_state,
                                                                  tmp_path):
    sim_state("mig-mixed", ["standin-ignores-changes"])
    node = next(n for n in list_gpu_nodes(sim_cluster) if "nvidia.com/mig-3g.20gb" in
                n.allocatable)
    renamed = {k.replace("mig-3g.20gb", "mig-3g.21gb"): v for k, v in node.labels.items()
               if k.startswith("nvidia.com/mig-3g.20gb.")}
    gone = {k: None for k in node.labels if k.startswith("nvidia.com/mig-3g.20gb.")}
    sim_cluster.core.patch_node(node.name, {"metadata": {"labels": {**gone, **renamed}}})
    _code, doc, out = run_suites(sim.kubeconfig, tmp_path, "stack/test_device_plugin.py")
    row = next(r for r in doc["requirements"] if r["id"] == "STACK-DP-003")
    assert row["verdict"] == "fail", out[-2000:]
    assert "nvidia.com/mig-3g.21gb" in row["message"] and node.name in row["message"]


# ---- 3. NVIDIA's documented sharing flow ---------------------------------------------------
def test_the_operators_sharing_flow_changes_nodes_and_runs_its_test(sim, sim_cluster,
                                                                    sim_state, tmp_path):
    sim_state("healthy")
    ns = "gpu-operator"
    c = sim_cluster
    try:
        c.core.create_namespaced_config_map(ns, {"apiVersion": "v1", "kind": "ConfigMap",
                                                 "metadata": {"name": "plugin-config"},
                                                 "data": PLUGIN_CONFIG})
    except ApiException as exc:
        assert exc.status == 409
    c.custom.patch_cluster_custom_object(*clusterpolicy.API, "cluster-policy", {"spec": {
        "devicePlugin": {"config": {"name": "plugin-config", "default": "time-slicing"}}}})
    node = _until("gpu.replicas=10 and 80 nvidia.com/gpu on a node", lambda: next(
        (n for n in list_gpu_nodes(c) if n.label(L.REPLICAS) == "10"
         and n.gpu_resources.get(L.GPU_RESOURCE) == 80), None))
    product = node.label(L.PRODUCT)
    assert product.endswith("-SHARED")
    test_pods = {"apiVersion": "apps/v1", "kind": "Deployment",  # tests/plugin-test.yaml
                 "metadata": {"name": "nvidia-plugin-test"}, "spec": {
                     "replicas": 5, "selector": {"matchLabels": {"app": "nvidia-plugin-test"}},
                     "template": {"metadata": {"labels": {"app": "nvidia-plugin-test"}}, "spec": {
                         "tolerations": [dict(L.GPU_TOLERATION)],
                         "serviceAccount": "nvidia-device-plugin",
                         "nodeSelector": {L.PRODUCT: product},
                         "containers": [{"name": "nvidia-plugin-test-ctr", "image":
                                         "nvcr.io/nvidia/cloud-native/gpu-operator-validator:"
                                         "v26.7.0", "command": ["sh", "-c"],
                                         "args": ["while true; do vectorAdd; sleep 30; done"],
                                         "resources": {"limits": {L.GPU_RESOURCE: "1"}}}]}}}}
    c.apps.create_namespaced_deployment(ns, test_pods)
    try:
        _until("5 Running nvidia-plugin-test pods", lambda: len([
            p for p in c.core.list_namespaced_pod(ns, label_selector="app=nvidia-plugin-test")
            .items if p.status.phase == "Running"]) == 5)
        _code, doc, out = run_suites(sim.kubeconfig, tmp_path, "sharing/test_config.py")
        assert {"SHARE-CFG-001", "SHARE-CAP-001", "SHARE-LBL-001"} <= verdicts(doc, "pass"), (
            out[-2000:])
        # one node picks another key of the ConfigMap by its label
        c.core.patch_node(node.name, {"metadata": {"labels": {L.DEVICE_PLUGIN_CONFIG: "mps"}}})
        _until(f"MPS on {node.name}", lambda: next(
            n for n in list_gpu_nodes(c) if n.name == node.name).labels.get(
                "nvidia.com/mps.capable") == "true")
    finally:
        c.apps.delete_namespaced_deployment("nvidia-plugin-test", ns)
        c.core.patch_node(node.name, {"metadata": {"labels": {L.DEVICE_PLUGIN_CONFIG: None}}})


# ---- 4. NVIDIA's own test pod ------------------------------------------------------------------
GPU_POD = {"apiVersion": "v1", "kind": "Pod",  # NVIDIA/gpu-operator tests/gpu-pod.yaml
           "metadata": {"name": "gpu-operator-test"},
           "spec": {"restartPolicy": "OnFailure", "containers": [{
               "name": "cuda-vector-add", "image": "k8s.gcr.io/cuda-vector-add:v0.1",
               "resources": {"limits": {L.GPU_RESOURCE: "1"}}}]}}


@pytest.mark.parametrize("profile", ["healthy", "managed-tainted"])
def test_nvidias_test_pod_completes(profile, sim, sim_cluster, sim_state):
    sim_state(profile)
    sim_cluster.core.create_namespaced_pod("default", GPU_POD)
    try:
        _until("gpu-operator-test to succeed", lambda: sim_cluster.core.read_namespaced_pod(
            "gpu-operator-test", "default").status.phase == "Succeeded")
    finally:
        sim_cluster.core.delete_namespaced_pod("gpu-operator-test", "default",
                                               grace_period_seconds=0)


def test_managed_taint_still_keeps_pods_without_gpus_off(sim, sim_state, tmp_path):
    sim_state("managed-tainted")
    _code, doc, out = run_suites(sim.kubeconfig, tmp_path, "scheduling/test_taints.py")
    assert verdicts(doc, "pass") == {"SCHED-TAINT-001"}, out[-2000:]


# ---- 5. long waits say what they wait for; pods without a result are reported at once -------
def test_pods_without_a_result_are_reported_promptly(sim, sim_state, tmp_path):
    """A cluster whose GPU pods finish without output (here KWOK's) is reported with the pod's
    state in seconds, not after the run timeout."""
    sim_state("healthy")
    started = time.monotonic()
    _code, doc, out = run_suites(sim.kubeconfig, tmp_path, "stack/test_node_gpu.py",
                                target="existing", extra=["--requirement=STACK-NODE-001"])
    took = time.monotonic() - started
    row = next(r for r in doc["requirements"] if r["id"] == "STACK-NODE-001")
    assert row["verdict"] == "fail" and "without a result line" in row["message"], out[-2000:]
    assert took < 120, f"took {took:.0f}s"


def test_long_waits_say_what_they_wait_for(sim, sim_state, tmp_path):
    sim_state("healthy", ["standin-ignores-changes"])
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--kubeconfig", str(sim.kubeconfig),
         "--target", "sim", "--suite", "operations", "--disruptive", "--reconcile-timeout",
         "12", "--requirement", "OPS-REC-001", "--results", str(tmp_path), "--",
         "-k", "device_plugin_env"], capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert "waiting up to 12s for env GPUCONF_RECONCILE_PROBE" in out, out[-2000:]
    assert proc.returncode == 1, out[-2000:]  # the stand-in ignored the change
