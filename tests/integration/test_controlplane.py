"""The local control plane is a real Kubernetes: TLS, RBAC, the scheduler, KWOK nodes."""

from __future__ import annotations

import time

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.binaries import binaries
from conformance.cluster import pods
from conformance.cluster.pods import PodSpec
from conformance.common.console import quiet
from conformance.common.processes import pid_alive as _pid_alive
from conformance.controlplane.components import ControlPlane
from conformance.sim import cluster as simcluster


def test_server_reports_the_pinned_kubernetes_version(sim_cluster):
    assert sim_cluster.server_version() == binaries.read_versions()["KUBERNETES_VERSION"]


def test_api_round_trip(sim_cluster):
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "roundtrip", "namespace": "default"}, "data": {"k": "v"}}
    sim_cluster.core.create_namespaced_config_map("default", body)
    try:
        got = sim_cluster.core.read_namespaced_config_map("roundtrip", "default")
        assert got.data == {"k": "v"}
    finally:
        sim_cluster.core.delete_namespaced_config_map("roundtrip", "default")


def test_rbac_is_enforced(sim):
    """An identity without roles is refused: authorization is RBAC, not always-allow."""
    from conformance.cluster.client import connect

    cluster = connect(str(sim.kubeconfig))
    cluster.api_client.set_default_header("Impersonate-User", "nobody@example.com")
    with pytest.raises(ApiException) as refused:
        cluster.core.list_namespaced_secret("default")
    assert refused.value.status == 403


def test_gpu_pod_scheduled_onto_kwok_gpu_node_and_running(sim_cluster):
    name = pods.create(sim_cluster, "default", PodSpec("itest-gpu", gpus=1), "itest")
    try:
        node = pods.wait_scheduled(sim_cluster, "default", name)
        assert node.startswith("gpu-"), f"a GPU pod landed on {node}"
        assert pods.wait_phase(sim_cluster, "default", name, ("Running",), timeout=30) == "Running"
    finally:
        pods.delete(sim_cluster, "default", name)


def test_pod_asking_more_gpus_than_any_node_stays_pending(sim_cluster):
    name = pods.create(sim_cluster, "default", PodSpec("itest-huge", gpus=64), "itest")
    try:
        reason = pods.wait_unschedulable(sim_cluster, "default", name)
        assert "Insufficient nvidia.com/gpu" in reason
        assert sim_cluster.core.read_namespaced_pod(name, "default").status.phase == "Pending"
    finally:
        pods.delete(sim_cluster, "default", name)


def test_small_sim_starts_fast_and_down_leaves_no_process():
    """`sim up --nodes 1 --gpus-per-node 2` from cached binaries, then `sim down`."""
    if binaries.locate().missing():
        pytest.skip("control-plane binaries not built: run `make setup`")
    name = "itest-small"
    t0 = time.monotonic()
    state = simcluster.up(name, profile="healthy", nodes=1, gpus_per_node=2,
                          progress=quiet)
    started_s = time.monotonic() - t0
    pids = dict(state.pids)
    try:
        api = client.CoreV1Api(client.ApiClient(_config(state.kubeconfig)))
        gpu_nodes = api.list_node(label_selector="nvidia.com/gpu.present=true").items
        assert [n.status.allocatable["nvidia.com/gpu"] for n in gpu_nodes] == ["2"]
    finally:
        assert simcluster.down(name, progress=quiet)
    print(f"\nsmall sim start from cache: {started_s:.1f}s")
    still = {c: p for c, p in pids.items() if _pid_alive(p)}
    assert not still, f"processes left after sim down: {still}"
    assert ControlPlane(name).state() is None
    assert not ControlPlane(name).folder.exists()


def _config(kubeconfig):
    from kubernetes import config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return configuration


@pytest.mark.parametrize("component", ["kwok", "kube-apiserver"])
def test_a_component_whose_port_is_taken_meanwhile_starts_on_another(component, monkeypatch):
    """Between picking a port and listening on it, something else may take it: start anyway."""
    import socket

    from conformance.controlplane import components as controlplane

    if binaries.locate().missing():
        pytest.skip("control-plane binaries not built: run `make setup`")
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    real = controlplane._free_ports
    calls = []

    def first_pick_is_taken(names, fixed):
        calls.append(fixed)
        ports = real(names, fixed)
        return {**ports, component: taken} if len(calls) == 1 else ports

    monkeypatch.setattr(controlplane, "_free_ports", first_pick_is_taken)
    said: list[str] = []
    plane = ControlPlane(f"itest-port-{component.split('-')[-1]}")
    try:
        state = plane.up(progress=said.append)
        assert state.ports[component] != taken
        assert any("port was taken meanwhile" in line for line in said), said
        assert all(_pid_alive(p) for p in state.pids.values()), state.pids
        core = client.CoreV1Api(client.ApiClient(_config(state.kubeconfig)))
        assert core.list_namespace().items  # the kubeconfig names the port it listens on
    finally:
        squatter.close()
        plane.down(progress=quiet)
