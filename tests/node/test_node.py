"""The real node, end to end: a kubelet joined through a bootstrap token and Ready, the real
device plugin advertising the mock's GPUs, GFD's labels carried to the node by NFD, GPU pods
that see exactly their devices through CDI, and ``down`` leaving nothing behind.

The tests run in file order; the last one takes the node down.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from kubernetes import client

from conformance.binaries import binaries
from conformance.cluster.logs import read_pod_log
from conformance.common.errors import NotConverged, UsageError
from conformance.controlplane.components import REAL_NODE_LABEL
from conformance.node import chart as chartmod
from conformance.node import lifecycle
from conformance.node.configs import CDI_RUN_DIR
from conformance.node.state import MPS_ROOT
from conformance.nvidia.gfd_contract import check_gfd_labels
from conformance.nvidia.sharing import MPS_DAEMON_COMPUTE_MODE
from tests.node import hostsnap, node_env
from tests.node.node_env import GPU_COUNT, NODE_NAME

pytestmark = pytest.mark.xdist_group(node_env.XDIST_GROUP)

POD_TIMEOUT_S = 60.0  # a pod here starts in 1-3 s; a minute covers a loaded CI machine


def _node(api) -> client.V1Node:
    return client.CoreV1Api(api).read_node(lifecycle.status(NODE_NAME)["node"])


def _run_pod(api, name: str, script: str, gpus: int | None) -> str:
    """Run ``script`` in the node's busybox image to completion; returns its log."""
    core = client.CoreV1Api(api)
    image = lifecycle.status(NODE_NAME)["images"]["busybox"]
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else None
    core.create_namespaced_pod("default", client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(restart_policy="Never", containers=[client.V1Container(
            name="c", image=image, command=["sh", "-c", script],
            resources=client.V1ResourceRequirements(limits=limits))])))
    deadline = time.monotonic() + POD_TIMEOUT_S
    phase = None
    while time.monotonic() < deadline:
        phase = core.read_namespaced_pod(name, "default").status.phase
        if phase in ("Succeeded", "Failed"):
            break
        time.sleep(0.5)
    log = read_pod_log(core, name, "default")  # through the API server -> kubelet
    core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
    assert phase == "Succeeded", f"pod {name} ended {phase}: {log}"
    return log


def test_node_is_a_real_kubelet_joined_and_ready(node, api):
    n = _node(api)
    ready = [c for c in n.status.conditions if c.type == "Ready"]
    assert ready and ready[0].status == "True", ready
    v = binaries.read_versions()
    assert n.status.node_info.kubelet_version == v["KUBERNETES_VERSION"]
    runtime = n.status.node_info.container_runtime_version
    assert runtime == f"containerd://{v['CONTAINERD_VERSION'].lstrip('v')}"
    assert n.metadata.labels[REAL_NODE_LABEL] == "true"  # so KWOK leaves it alone
    assert not any(k.startswith("kwok.x-k8s.io") for k in n.metadata.annotations or {})
    # joined through the bootstrap token: its client certificate came from an approved CSR
    csrs = client.CertificatesV1Api(api).list_certificate_signing_request().items
    assert any(c.spec.username.startswith("system:bootstrap:") and c.status.certificate
               for c in csrs), [c.spec.username for c in csrs]


def test_status_and_node_say_the_gpus_are_mock_nvml(node, api):
    s = lifecycle.status(NODE_NAME)
    assert s["running"] and s["ready"]
    assert s["gpu"]["source"] == "mock-nvml" and s["gpu"]["profile"] == "8xH100"
    assert s["host"]["cgroup"] in ("v1", "v2")
    assert _node(api).metadata.annotations[lifecycle.GPU_SOURCE_ANNOTATION] == "mock-nvml 8xH100"


def test_nvidia_daemonsets_from_the_upstream_chart_are_rolled_out(node, api):
    apps = client.AppsV1Api(api)
    names = {ds.metadata.name: ds for ds in apps.list_namespaced_daemon_set(
        chartmod.NAMESPACE).items}
    for want in ("nvdp-nvidia-device-plugin", "nvdp-nvidia-device-plugin-gpu-feature-discovery",
                 "nvdp-node-feature-discovery-worker"):
        ds = names[want]
        assert ds.status.number_available == ds.status.desired_number_scheduled == 1, want
    images = {c.image for ds in names.values() for c in ds.spec.template.spec.containers}
    assert lifecycle.status(NODE_NAME)["images"]["device-plugin"] in images


def test_device_plugin_advertises_the_profiles_gpus(node, api):
    n = _node(api)
    assert n.status.capacity["nvidia.com/gpu"] == str(GPU_COUNT)
    assert n.status.allocatable["nvidia.com/gpu"] == str(GPU_COUNT)


def test_gfd_labels_reach_the_node_through_nfd_and_meet_the_upstream_contract(node, api):
    labels = _node(api).metadata.labels
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == str(GPU_COUNT)
    assert labels["nvidia.com/cuda.driver-version.full"] == "550.163.01"
    # GFD published them as an NFD NodeFeature object; nfd-master turned that into labels
    features = client.CustomObjectsApi(api).list_namespaced_custom_object(
        "nfd.k8s-sigs.io", "v1alpha1", chartmod.NAMESPACE, "nodefeatures")["items"]
    assert any("nvidia.com/gpu.product" in (f.get("spec", {}).get("labels") or {})
               for f in features), [f["metadata"]["name"] for f in features]
    # the real GFD v0.20.0 against the contract the suite ships (upstream's, same tag)
    result = check_gfd_labels(labels)
    assert not result.problems and not result.too_old, result


def test_gpu_pod_sees_exactly_its_devices_through_cdi(node, api):
    """The plugin (deviceListStrategy cdi-cri) answers with CDI device names only; containerd
    resolves them from the spec the plugin wrote, and plain runc runs the pod (no NVIDIA
    runtime class): the devices, the NVML library and the spec's env come from CDI alone."""
    specs = list(Path(CDI_RUN_DIR).glob("k8s.device-plugin.nvidia.com-*"))
    assert specs, f"the device plugin wrote no CDI spec into {CDI_RUN_DIR}"
    log = _run_pod(api, "gpu-two", "ls /dev; ls /usr/lib64; env", gpus=2)
    gpus = sorted(set(re.findall(r"\bnvidia\d+\b", log)))
    assert len(gpus) == 2, log
    assert "nvidiactl" in log and "libnvidia-ml.so.1" in log, log
    assert "NVIDIA_VISIBLE_DEVICES=void" in log, log  # an edit of the plugin's CDI spec


def test_pod_without_gpus_sees_none(node, api):
    log = _run_pod(api, "gpu-none", "ls /dev", gpus=None)
    assert not re.search(r"\bnvidia", log), log


def test_second_node_is_refused_while_a_kubelet_runs(node, nvidia_src):
    with pytest.raises(UsageError, match=f"node '{NODE_NAME}' is \\(or was\\) up on this host"):
        lifecycle.up("ntest-second", nvidia_src=nvidia_src, progress=lambda _m: None)


TIME_SLICING = {"config": {"default": "default", "map": {"default": (
    "version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: 4\n")}}}


def test_time_slicing_through_the_charts_config_manager(node, api):
    """The chart's own sharing config (a ConfigMap, applied by config-manager): 8 GPUs x 4
    replicas advertised, and GFD labels the product -SHARED with the replica count."""
    lifecycle.reconfigure(NODE_NAME, chart_values=TIME_SLICING, progress=lambda _m: None)
    deadline = time.monotonic() + POD_TIMEOUT_S
    while time.monotonic() < deadline:
        n = _node(api)
        if (n.status.allocatable.get("nvidia.com/gpu") == str(4 * GPU_COUNT)
                and n.metadata.labels.get("nvidia.com/gpu.replicas") == "4"):
            break
        time.sleep(1)
    assert n.status.allocatable["nvidia.com/gpu"] == str(4 * GPU_COUNT)
    labels = n.metadata.labels
    assert labels["nvidia.com/gpu.replicas"] == "4"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"


MPS = {"config": {"default": "default", "map": {"default": (
    "version: v1\nsharing:\n  mps:\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: 2\n")}}}
MPS_DAEMON = f"{chartmod.RELEASE}-nvidia-device-plugin-mps-control-daemon"


def _mps_daemon_log(api) -> str:
    core = client.CoreV1Api(api)
    pods = [p for p in core.list_namespaced_pod(chartmod.NAMESPACE).items
            if p.metadata.name.rsplit("-", 1)[0] == MPS_DAEMON]
    for pod in pods:
        try:
            return read_pod_log(core, pod.metadata.name, chartmod.NAMESPACE,
                                                container="mps-control-daemon-ctr",
                                                tail_lines=200)
        except client.ApiException:
            pass  # still initialising
    return ""


def _shm_mounted() -> bool:
    shm = str(MPS_ROOT / "shm")
    return any(line.split()[4] == shm and " - tmpfs " in line
               for line in Path("/proc/self/mountinfo").read_text().splitlines())


def test_mps_runs_the_plugins_daemon_until_it_would_change_the_compute_mode(node, api):
    """sharing.mps through the chart: GFD labels the node MPS-capable, the chart's MPS control
    daemon (built from the plugin's source) starts, mounts its shm on the host (through the
    shared mount ``up`` made) and then, first of all, sets every GPU's compute mode. The mock
    has no nvidia-smi, so the daemon stops there and the plugin, which waits for it, advertises
    nothing. On real GPUs that step changes the host: ``up``/``reconfigure`` refuse it unless
    asked (test_node_mps_consent.py); what MPS does past it is not run here."""
    lifecycle.reconfigure(NODE_NAME, chart_values=MPS, wait=False, progress=lambda _m: None)
    stopped_at = f"error setting compute mode {MPS_DAEMON_COMPUTE_MODE}"
    try:
        deadline = time.monotonic() + 3 * POD_TIMEOUT_S
        while time.monotonic() < deadline:
            n = _node(api)
            if (n.metadata.labels.get("nvidia.com/mps.capable") == "true"
                    and n.status.allocatable.get("nvidia.com/gpu") == "0"
                    and stopped_at in _mps_daemon_log(api) and _shm_mounted()):
                break
            time.sleep(1)
        labels = n.metadata.labels
        assert labels.get("nvidia.com/gpu.sharing-strategy") == "mps", labels
        assert labels.get("nvidia.com/mps.capable") == "true", labels
        assert n.status.allocatable.get("nvidia.com/gpu") == "0", n.status.allocatable
        assert stopped_at in _mps_daemon_log(api), _mps_daemon_log(api)[-2000:]
        assert _shm_mounted(), f"no tmpfs at {MPS_ROOT / 'shm'}: the daemon's mount-shm failed"
    finally:
        lifecycle.reconfigure(NODE_NAME, chart_values={}, progress=lambda _m: None)


def test_the_gpu_operator_from_source_reconciles_the_node_as_far_as_nfd_shows_a_gpu(node, api,
                                                                                   tmp_path):
    """The operator and validator built from the gpu-operator source, installed by its chart,
    run against the real API server and kubelet and reconcile: the ClusterPolicy gets a
    status. The mock NVML has no NVIDIA device on the PCI bus, so NFD labels none and the
    operator finds no GPU node; ``node operator`` stops there, saying so (runs second to last:
    the node's chart is reduced to NFD). Its time-slicing config goes the way NVIDIA documents
    for the operator: a ConfigMap the ClusterPolicy's devicePlugin.config names."""
    from conformance.node import operator
    from conformance.nvidia import clusterpolicy

    try:
        binaries.require_operator()
    except UsageError as exc:
        pytest.skip(str(exc))
    chart = Path(os.environ.get("NVIDIA_SRC", ".")).parent / "gpu-operator-v26.7.0" / "chart"
    if not chart.is_dir():
        pytest.skip(f"no gpu-operator chart at {chart} (../shared/upstream in CI)")
    lines: list[str] = []
    sharing = tmp_path / "time-slicing.yaml"
    sharing.write_text("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                       "    - name: nvidia.com/gpu\n      replicas: 4\n")
    with pytest.raises(NotConverged, match="no NVIDIA PCI device seen"):
        operator.install(NODE_NAME, chart=chart, progress=lines.append, timeout=20,
                         sharing_config=sharing)
    # NVIDIA's time-slicing flow: the ConfigMap, named by the ClusterPolicy's devicePlugin.config
    cm = client.CoreV1Api(api).read_namespaced_config_map(operator.SHARING_CONFIGMAP,
                                                           operator.NAMESPACE)
    assert cm.data == {"any": sharing.read_text()}
    deadline = time.monotonic() + 90  # the operator's first pass (~10 s here, idle)
    while True:
        policies = client.CustomObjectsApi(api).list_cluster_custom_object(*clusterpolicy.API)
        states = [(p.get("status") or {}).get("state") for p in policies["items"]]
        if states != [None] or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert states == ["ready"], lines
    assert policies["items"][0]["spec"]["devicePlugin"]["config"] == {
        "name": operator.SHARING_CONFIGMAP, "default": "any"}
    conditions = policies["items"][0]["status"]["conditions"]
    assert any(c.get("reason") == "NoGPUNodes" for c in conditions), conditions
    assert hostsnap.take().root_shared, "the validator's / volume needs / shared"


def test_down_leaves_nothing_behind(node, host_before):
    assert lifecycle.down(NODE_NAME, progress=lambda _m: None)
    assert host_before.differences(hostsnap.take()) == []
    assert lifecycle.status(NODE_NAME) == {"name": NODE_NAME, "running": False}
    assert not lifecycle.down(NODE_NAME, progress=lambda _m: None)
