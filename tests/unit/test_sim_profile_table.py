"""The sim's profile table: its rows, unknown names, cluster-wide settings that must agree, and
the cost of a large profile's labels.
"""

from __future__ import annotations

import dataclasses
import time

import pytest
from sim_label_helpers import P5, gpu_nodes

from conformance.sim import gfd
from conformance.sim.profiles import (
    PROFILES,
    NodeGroup,
    Profile,
    get_profile,
    gpu_group,
)


def test_profile_table():
    expected = {  # name: (GPU nodes, physical GPUs, CPU nodes)
        "healthy": (2, 16, 1), "heterogeneous": (5, 40, 1), "time-slicing": (2, 4, 1),
        "time-slicing-renamed": (2, 4, 1), "time-slicing-e2e": (2, 16, 1),
        "mig-single": (3, 24, 1), "mig-mixed": (3, 24, 1),
        "large": (500, 4000, 1), "managed-tainted": (2, 16, 1),
        "device-plugin-chart": (2, 16, 1), "device-plugin-chart-time-slicing": (2, 4, 1),
        "dra": (3, 24, 1), "dra-mig": (2, 16, 1), "dra-mixed": (4, 32, 1),
        "dra-gpucluster": (2, 16, 1), "dra-large": (500, 4000, 1), "gang-kueue": (2, 4, 1),
        "autoscaling-karpenter": (2, 4, 1),
        "pod-autoscaling": (2, 4, 1),
    }
    assert {n: (p.gpu_node_count, p.physical_gpus, p.node_count - p.gpu_node_count)
            for n, p in PROFILES.items()} == expected
    assert get_profile("mig-mixed").mig_strategy == "mixed"
    assert get_profile("healthy").mig_strategy == "single"
    assert get_profile("healthy").sharing_config() is None
    assert get_profile("time-slicing").sharing_config() == {"version": "v1", "sharing": {
        "timeSlicing": {"renameByDefault": False, "failRequestsGreaterThanOne": False,
                        "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
    assert get_profile("healthy").driver_version == "580.105.08"
    names = [name for _, _, name in get_profile("large").iter_nodes()]
    assert len(names) == len(set(names)) == 501


def test_unknown_profile_lists_valid_names():
    with pytest.raises(ValueError, match="valid profiles: healthy, heterogeneous") as err:
        get_profile("nope")
    assert all(name in str(err.value) for name in PROFILES)


def test_cluster_wide_settings_must_agree():
    a = gpu_group("a", 1, "NVIDIA-H100-80GB-HBM3", 8, **P5)
    with pytest.raises(ValueError, match="mig_strategy is cluster-wide"):
        Profile("p", "", (a, dataclasses.replace(a, name="b", name_prefix="b",
                                                 mig_strategy="mixed")))
    with pytest.raises(ValueError, match="driver_version is cluster-wide"):
        Profile("p", "", (a, dataclasses.replace(a, name="b", name_prefix="b",
                                                 driver_version="570.86.15")))
    with pytest.raises(ValueError, match="node group name values repeat"):
        Profile("p", "", (a, a))
    with pytest.raises(ValueError, match="DNS label"):
        NodeGroup("x", 1, "Bad_Prefix", "m", 1, 1)
    with pytest.raises(ValueError, match=r"X\.Y"):
        dataclasses.replace(a, driver_version="580")


def test_large_profile_labels_are_cheap():
    prof = get_profile("large")
    assert prof.gpu_node_count == 500
    start = time.perf_counter()
    nodes = {name: (gfd.node_labels(g, i, generation=1799999999), gfd.advertised_resources(g))
             for g, i, name in gpu_nodes(prof)}
    elapsed = time.perf_counter() - start
    print(f"labels and resources for {len(nodes)} GPU nodes: {elapsed * 1000:.1f} ms")
    assert len(nodes) == 500 and elapsed < 10
    assert all(r["nvidia.com/gpu"] == "8" for _, r in nodes.values())
