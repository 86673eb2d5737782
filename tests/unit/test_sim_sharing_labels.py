"""Sharing on the sim's nodes: the shared suffix, capacity as GPUs times replicas, renamed
resources, MPS.
"""

from __future__ import annotations

import pytest
from sim_label_helpers import P4D, P5, labels_of

from conformance.nvidia import operands, sharing
from conformance.nvidia.sharing import SharedResource, SharingConfig
from conformance.sim import gfd
from conformance.sim.profiles import (
    PROFILES,
    get_profile,
    gpu_group,
)


def test_shared_suffix_only_when_replicas_above_one_and_not_renamed():
    plain = labels_of("healthy", "h100")
    sliced = labels_of("time-slicing", "h100")
    renamed = labels_of("time-slicing-renamed", "h100")
    assert plain["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert sliced["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"
    assert renamed["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    for labels, replicas, strategy in ((plain, "1", "none"), (sliced, "4", "time-slicing"),
                                       (renamed, "4", "time-slicing")):
        assert labels["nvidia.com/gpu.replicas"] == replicas
        assert labels["nvidia.com/gpu.sharing-strategy"] == strategy
        assert labels["nvidia.com/gpu.count"] == ("8" if labels is plain else "2")
    with pytest.raises(ValueError, match=">= 2"):
        SharingConfig.time_slicing(1)


def test_capacity_is_gpus_times_replicas():
    assert gfd.gpu_resources(get_profile("time-slicing").group("h100")) == {"nvidia.com/gpu": 8}
    assert gfd.gpu_resources(get_profile("healthy").group("h100")) == {"nvidia.com/gpu": 8}
    sharing = SharingConfig.time_slicing(10)
    eight = gpu_group("big", 1, "NVIDIA-H100-80GB-HBM3", 8, sharing=sharing, **P5)
    assert gfd.advertised_resources(eight)["nvidia.com/gpu"] == "80"  # the README's example
    for profile in PROFILES.values():
        for group in profile.gpu_groups:
            labels = gfd.node_labels(group, 0)
            for resource, count in gfd.gpu_resources(group).items():
                base = resource.removesuffix(".shared")
                prefix = base if base.startswith("nvidia.com/mig-") else "nvidia.com/gpu"
                assert count == (int(labels[f"{prefix}.count"])
                                 * int(labels[f"{prefix}.replicas"])), (profile.name, resource)


def test_renamed_resource_name():
    resources = gfd.advertised_resources(get_profile("time-slicing-renamed").group("h100"))
    assert resources["nvidia.com/gpu.shared"] == "8"
    assert "nvidia.com/gpu" not in resources


def test_mps_sharing():
    group = gpu_group("mps", 1, "NVIDIA-H100-80GB-HBM3", 2, sharing=SharingConfig.mps(3), **P5)
    labels = gfd.node_labels(group, 0)
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert labels["nvidia.com/mps.capable"] == "true"
    assert gfd.gpu_resources(group) == {"nvidia.com/gpu": 6}
    assert operands.get_operand("mps-control-daemon").selects(labels)
    assert not operands.get_operand("mps-control-daemon").selects(labels_of("healthy", "h100"))
    doc = group.sharing.document()
    assert doc == {"version": "v1", "sharing": {"mps": {
        "renameByDefault": False, "resources": [{"name": "nvidia.com/gpu", "replicas": 3}]}}}
    assert sharing.validate_sharing_config(doc) == []
    assert group.sharing.fails_requests_greater_than_one
    with pytest.raises(ValueError, match="MIG"):
        gpu_group("x", 1, "NVIDIA-A100-SXM4-40GB", 8, mig_config="all-1g.5gb",
                  sharing=SharingConfig.mps(2), **P4D)
    with pytest.raises(ValueError, match=r"only nvidia\.com/gpu"):
        SharingConfig("mps", (SharedResource("nvidia.com/mig-1g.5gb", 2),))
