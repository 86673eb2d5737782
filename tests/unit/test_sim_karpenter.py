"""Karpenter in the sim, without a cluster: the process's command line (controlplane/
karpenter.py), the instance types it offers and the NodePool each fault plays
(sim/karpenter.py)."""

from __future__ import annotations

from conformance.controlplane import karpenter
from conformance.controlplane.components import PORT_NAMES
from conformance.sim import gfd
from conformance.sim import karpenter as sim_karpenter
from conformance.sim.faults import BY_NAME
from conformance.sim.operator_plan import SimState
from conformance.sim.profiles import get_profile

PROFILE = "autoscaling-karpenter"


def test_karpenter_runs_as_its_own_user_on_picked_ports(tmp_path):
    argv = karpenter.argv("/bin/karpenter-kwok", tmp_path,
                          {karpenter.COMPONENT: 20001, karpenter.METRICS_PORT: 20002})
    assert "--health-probe-port=20001" in argv and "--metrics-port=20002" in argv
    assert "--disable-leader-election=true" in argv
    assert f"--instance-types-file-path={tmp_path / 'karpenter' / 'instance-types.json'}" in argv
    assert karpenter.env(tmp_path) == {"KUBECONFIG": str(tmp_path / "karpenter.kubeconfig")}
    assert set(karpenter.PORT_NAMES) <= set(PORT_NAMES)


def test_instance_types_have_what_the_stand_in_gives_such_a_node():
    profile = get_profile(PROFILE)
    types = {t["name"]: t for t in sim_karpenter.instance_types(profile)}
    gpu, cpu = profile.autoscaled
    assert types[gpu.machine_type]["resources"] == gfd.advertised_resources(gpu)
    assert types[gpu.machine_type]["resources"]["nvidia.com/gpu"] == "1"
    assert "nvidia.com/gpu" not in types[cpu.machine_type]["resources"]
    assert all(t["offerings"][0]["Available"] for t in types.values())


def test_nodepool_per_fault():
    healthy = sim_karpenter.nodepool_spec(SimState(PROFILE))
    assert healthy["disruption"]["consolidateAfter"] == "0s"
    assert [r["key"] for r in healthy["template"]["spec"]["requirements"]] == [
        "karpenter.sh/capacity-type"]
    no_gpu = sim_karpenter.nodepool_spec(SimState(PROFILE, [sim_karpenter.NO_GPU_TYPES]))
    assert no_gpu["template"]["spec"]["requirements"][-1] == {
        "key": "node.kubernetes.io/instance-type", "operator": "In",
        "values": ["n2-standard-16"]}
    kept = sim_karpenter.nodepool_spec(SimState(PROFILE, [sim_karpenter.SCALE_DOWN_DISABLED]))
    assert kept["disruption"]["consolidateAfter"] == "Never"


def test_only_the_autoscaling_profile_runs_karpenter_and_its_faults_play_there():
    assert sim_karpenter.wanted(get_profile(PROFILE))
    assert not sim_karpenter.wanted(get_profile("healthy"))
    for name in (sim_karpenter.NO_GPU_TYPES, sim_karpenter.SCALE_DOWN_DISABLED):
        assert BY_NAME[name].profile == PROFILE
