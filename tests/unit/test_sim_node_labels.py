"""The GFD labels and resources of the sim's nodes: a healthy node's full set, determinism,
heterogeneous groups, fault knobs, CPU nodes, taints.
"""

from __future__ import annotations

import pytest
from sim_label_helpers import labels_of

from conformance.sim import gfd
from conformance.sim.profiles import (
    PROFILES,
    get_profile,
)


def test_full_label_set_of_a_healthy_node():
    labels = labels_of("healthy", "h100")
    expected = {
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.workload.config": "container",
        "nvidia.com/gfd.timestamp": str(gfd.DEFAULT_GENERATION),
        "nvidia.com/cuda.driver-version.full": "580.105.08",
        "nvidia.com/cuda.driver-version.major": "580",
        "nvidia.com/cuda.driver-version.minor": "105",
        "nvidia.com/cuda.driver-version.revision": "08",
        "nvidia.com/cuda.driver.major": "580", "nvidia.com/cuda.driver.minor": "105",
        "nvidia.com/cuda.driver.rev": "08",
        "nvidia.com/cuda.runtime-version.full": "13.0",
        "nvidia.com/cuda.runtime-version.major": "13",
        "nvidia.com/cuda.runtime-version.minor": "0",
        "nvidia.com/cuda.runtime.major": "13", "nvidia.com/cuda.runtime.minor": "0",
        "nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.count": "8", "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.machine": "p5.48xlarge", "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.mode": "compute",
        "nvidia.com/mig.capable": "true", "nvidia.com/mps.capable": "false",
        "nvidia.com/mig.strategy": "single", "nvidia.com/vgpu.present": "false",
        "nvidia.com/mig.config": "all-disabled", "nvidia.com/mig.config.state": "success",
        "nvidia.com/gpu.deploy.mig-manager": "true",
        "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
    }
    expected.update({f"nvidia.com/gpu.deploy.{op}": "true" for op in gfd.DEPLOY_OPERANDS})
    assert labels == expected


def test_labels_are_deterministic_and_generation_is_injectable():
    group = get_profile("healthy").group("h100")
    assert gfd.node_labels(group, 0) == gfd.node_labels(group, 1)
    labels = gfd.node_labels(group, 1, generation=1800000000)
    assert labels["nvidia.com/gfd.timestamp"] == "1800000000"
    for bad in (123, 10**10):
        with pytest.raises(ValueError, match="10 digits"):
            gfd.node_labels(group, 0, generation=bad)
    with pytest.raises(IndexError):
        gfd.node_labels(group, 2)
    labels["nvidia.com/gpu.count"] = "0"  # a copy: the cache is not changed through it
    assert gfd.node_labels(group, 1, generation=1800000000)["nvidia.com/gpu.count"] == "8"


def test_heterogeneous_nodes_differ_in_product_and_compute():
    a100, h200 = labels_of("heterogeneous", "a100"), labels_of("heterogeneous", "h200")
    assert (a100["nvidia.com/gpu.product"], a100["nvidia.com/gpu.compute.major"],
            a100["nvidia.com/gpu.family"]) == ("NVIDIA-A100-SXM4-40GB", "8", "ampere")
    assert (h200["nvidia.com/gpu.product"], h200["nvidia.com/gpu.compute.major"],
            h200["nvidia.com/gpu.memory"]) == ("NVIDIA-H200", "9", "143771")
    prof = get_profile("heterogeneous")
    assert prof.group("a100").count != prof.group("h200").count


def test_fault_knobs():
    group = get_profile("healthy").group("h100")
    labels = gfd.node_labels(group, 0, driver_version="570.86.15", product_override="Tesla-T4",
                             replicas_override=3)
    assert labels["nvidia.com/cuda.driver-version.full"] == "570.86.15"
    assert labels["nvidia.com/cuda.driver.rev"] == "15"
    assert labels["nvidia.com/gpu.product"] == "Tesla-T4"
    assert labels["nvidia.com/gpu.replicas"] == "3"
    bare = gfd.node_labels(group, 0, include_gfd=False)
    assert bare == gfd.operator_labels(group)
    assert "nvidia.com/gpu.product" not in bare and bare["nvidia.com/gpu.present"] == "true"
    assert not set(bare) & set(gfd.gfd_labels(group))
    assert gfd.other_product("NVIDIA-H100-80GB-HBM3-SHARED") == "NVIDIA-A100-SXM4-40GB-SHARED"
    assert gfd.other_product("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb") == (
        "NVIDIA-H100-80GB-HBM3-MIG-1g.5gb")
    assert gfd.other_product("Unknown-GPU") == "NVIDIA-H100-80GB-HBM3"


def test_cpu_node_has_no_gpu_labels_or_resources():
    cpu = get_profile("healthy").group("cpu")
    assert gfd.node_labels(cpu, 0) == {}
    assert gfd.advertised_resources(cpu) == {"cpu": "16", "memory": f"{64 * 1024**2}Ki",
                                             "pods": "110"}
    assert cpu.taints == () and cpu.sharing is None


def test_only_the_managed_profile_taints_gpu_nodes():
    """The GPU Operator does not taint nodes (NVIDIA's own gpu-pod.yaml has no toleration);
    managed node pools do, with ExtendedResourceToleration on."""
    for profile in PROFILES.values():
        for group in profile.gpu_groups:
            want = ([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
                    if profile.name == "managed-tainted" else [])
            assert [dict(t) for t in group.taints] == want, profile.name
