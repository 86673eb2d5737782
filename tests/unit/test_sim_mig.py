"""MIG on the sim's nodes: single and mixed strategies, with time-slicing, the models' layout
rules and the operator's mig-parted config.

Upstream facts are checked against ../shared/upstream where that tree exists (the project's CI);
elsewhere those tests skip.
"""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from sim_label_helpers import OPERATOR, P4D, labels_of, upstream

from conformance.nvidia import gfd_contract as contract
from conformance.nvidia.gpu_models import GPU_MODELS, get_model, sanitise
from conformance.nvidia.sharing import SharingConfig
from conformance.sim import gfd
from conformance.sim.profiles import (
    get_profile,
    gpu_group,
)


def test_mig_single_counts_mig_devices_as_gpus():
    group = get_profile("mig-single").group("a100")
    labels = gfd.node_labels(group, 0)
    assert gfd.gpu_resources(group) == {"nvidia.com/gpu": 56}  # 8 GPUs x 7 x 1g.5gb
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert (labels["nvidia.com/gpu.count"], labels["nvidia.com/gpu.memory"],
            labels["nvidia.com/gpu.multiprocessors"], labels["nvidia.com/gpu.replicas"]) == (
        "56", "4864", "14", "1")
    assert labels["nvidia.com/mig.strategy"] == "single"
    assert labels["nvidia.com/mig.config"] == "all-1g.5gb"
    assert not any(k.startswith("nvidia.com/mig-") for k in labels)
    h100 = labels_of("mig-single", "h100")
    assert h100["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"


def test_mig_mixed_resources_and_labels():
    group = get_profile("mig-mixed").group("a100")
    assert gfd.gpu_resources(group) == {"nvidia.com/mig-1g.5gb": 16, "nvidia.com/mig-2g.10gb": 8,
                                        "nvidia.com/mig-3g.20gb": 8}
    labels = gfd.node_labels(group, 0)
    assert labels["nvidia.com/mig-1g.5gb.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert (labels["nvidia.com/mig-2g.10gb.memory"], labels["nvidia.com/mig-2g.10gb.count"],
            labels["nvidia.com/mig-2g.10gb.engines.decoder"]) == ("9984", "8", "1")
    # MIG-enabled full GPUs are labelled without sharing (internal/lm/mig-strategy.go)
    assert (labels["nvidia.com/gpu.count"], labels["nvidia.com/gpu.replicas"],
            labels["nvidia.com/gpu.product"]) == ("8", "0", "NVIDIA-A100-SXM4-40GB")
    assert gfd.gpu_resources(get_profile("mig-mixed").group("h100")) == {
        "nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-3g.40gb": 8}


def test_mig_mixed_with_time_slicing():
    sharing = SharingConfig.time_slicing(2, resources=("nvidia.com/mig-1g.5gb",))
    group = gpu_group("ts", 1, "NVIDIA-A100-SXM4-40GB", 8, mig_strategy="mixed",
                      mig_config="all-balanced", sharing=sharing, **P4D)
    labels = gfd.node_labels(group, 0)
    assert labels["nvidia.com/mig-1g.5gb.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED"
    assert labels["nvidia.com/mig-1g.5gb.replicas"] == "2"
    assert labels["nvidia.com/mig-1g.5gb.sharing-strategy"] == "time-slicing"
    assert labels["nvidia.com/mig-2g.10gb.replicas"] == "1"
    assert labels["nvidia.com/mig-2g.10gb.sharing-strategy"] == "none"
    assert gfd.gpu_resources(group)["nvidia.com/mig-1g.5gb"] == 32
    renamed = dataclasses.replace(group, sharing=dataclasses.replace(sharing,
                                                                     rename_by_default=True))
    assert gfd.gpu_resources(renamed) == {"nvidia.com/mig-1g.5gb.shared": 32,
                                          "nvidia.com/mig-2g.10gb": 8,
                                          "nvidia.com/mig-3g.20gb": 8}
    assert contract.check_gfd_labels(labels).problems == []


def test_mig_models_and_layout_rules():
    assert sanitise("NVIDIA A100-SXM4-40GB") == "NVIDIA-A100-SXM4-40GB"
    assert get_model("NVIDIA-A100-SXM4-40GB").mig_profile("7g.40gb").multiprocessors == 98
    assert get_model("NVIDIA-H100-80GB-HBM3").mig_profile("7g.80gb").multiprocessors == 132
    with pytest.raises(ValueError, match="single needs one MIG profile"):
        gpu_group("x", 1, "NVIDIA-A100-SXM4-40GB", 8, mig_config="all-balanced", **P4D)
    with pytest.raises(ValueError, match="no MIG configuration"):
        gpu_group("x", 1, "NVIDIA-A100-SXM4-40GB", 8, mig_config="all-1g.10gb", **P4D)
    with pytest.raises(ValueError, match="not MIG-capable"):
        gpu_group("x", 1, "Tesla-T4", 1, mig_config="all-1g.5gb", machine_type="g4dn.xlarge",
                  cpu=4, memory_gib=16)
    with pytest.raises(ValueError, match="needs MIG strategy single or mixed"):
        gpu_group("x", 1, "NVIDIA-A100-SXM4-40GB", 8, mig_strategy="none",
                  mig_config="all-1g.5gb", **P4D)
    t4 = gfd.node_labels(gpu_group("t4", 1, "Tesla-T4", 1, machine_type="g4dn.xlarge", cpu=4,
                                   memory_gib=16, mig_strategy="none"), 0)
    assert t4["nvidia.com/mig.capable"] == "false" and "nvidia.com/mig.strategy" not in t4
    assert "nvidia.com/gpu.deploy.mig-manager" not in t4 and "nvidia.com/mig.config" not in t4
    assert t4["nvidia.com/gpu.family"] == "turing"


def test_mig_layouts_match_the_operators_mig_parted_config():
    asset = upstream(OPERATOR / "assets" / "state-mig-manager" / "0400_configmap.yaml")
    configs = yaml.safe_load(yaml.safe_load(asset.read_text())["data"]["config.yaml"])
    checked = 0
    for model in GPU_MODELS.values():
        device = f"{model.pci_device_id}10DE".upper().replace("0X", "0x")
        for name, layout in model.mig_configs:
            entries = configs["mig-configs"][name]
            matching = [e for e in entries if "device-filter" not in e
                        or device in ([e["device-filter"]] if isinstance(e["device-filter"], str)
                                      else e["device-filter"])]
            assert len(matching) == 1, (model.product, name)
            assert matching[0]["mig-devices"] == dict(layout), (model.product, name)
            checked += 1
    assert checked >= 12
