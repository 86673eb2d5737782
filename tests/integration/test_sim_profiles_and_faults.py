"""Every profile comes up with the upstream label contract; every fault shows its symptom in
the API (read through the API server, never from the stand-in's own variables)."""

from __future__ import annotations

import time

import pytest

from conformance import gfd_contract
from conformance import labels as L
from conformance.checks.nodes import list_gpu_nodes
from conformance.checks.operands import OperatorView, read_cluster_policy
from conformance.sim import gfd, profiles
from conformance.sim.faults import FAULTS

SIM_PROFILES = [p for p in profiles.PROFILES if p != "large"]  # large: see the scale benchmark


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
        assert gfd_contract.check_gfd_labels(node.labels) == [], name
        want = {k: int(v) for k, v in gfd.advertised_resources(group).items()
                if L.is_gpu_resource(k)}
        assert node.gpu_resources == want, name


def _view(sim_cluster):
    return OperatorView.read(sim_cluster, "gpu-operator")


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
        n.int_label(L.REPLICAS) != 1 for n in list_gpu_nodes(c)),
    "operand-crashloop": lambda c: any(
        (s.state.waiting and s.state.waiting.reason == "CrashLoopBackOff")
        for p in _view(c).pods_by_app.get("nvidia-dcgm-exporter", [])
        for s in (p.status.container_statuses or [])),
    "clusterpolicy-notready": lambda c: read_cluster_policy(c)["status"]["state"] == "notReady",
    "gpu-node-taint-missing-toleration": lambda c: any(
        t["key"] == "dedicated" for n in list_gpu_nodes(c) for t in n.taints),
    "wrong-gpu-type-label": lambda c: len({n.label(L.PRODUCT) for n in list_gpu_nodes(c)}) == 2,
    "standin-ignores-changes": lambda c: c.core.read_namespaced_config_map(
        "gpuconf-sim-standin", "kube-system").data["state.json"].count(
        "standin-ignores-changes") == 1,
}


def test_every_fault_has_a_symptom_check():
    assert set(SYMPTOMS) == {f.name for f in FAULTS}


@pytest.mark.parametrize("fault", [f.name for f in FAULTS])
def test_fault_shows_its_symptom_in_the_api(fault, sim_cluster, sim_state):
    assert not SYMPTOMS[fault](sim_cluster), f"{fault}'s symptom is present without the fault"
    sim_state("healthy", [fault])
    assert _settled(lambda: SYMPTOMS[fault](sim_cluster)), f"{fault} shows no symptom"
