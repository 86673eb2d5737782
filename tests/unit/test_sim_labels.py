"""The sim's GPU models, profiles, GFD labels, resources, sharing config and operand catalogue.

Upstream facts are checked against ../shared/upstream where that tree exists (the project's CI);
elsewhere those tests skip and the rest run on the packaged contract copies.
"""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

import pytest
import yaml

from conformance.nvidia import gfd_contract as contract
from conformance.nvidia import operands, sharing
from conformance.nvidia.gpu_models import GPU_MODELS, get_model, sanitise
from conformance.nvidia.sharing import SharedResource, SharingConfig
from conformance.sim import gfd
from conformance.sim.profiles import (
    PROFILES,
    NodeGroup,
    Profile,
    get_profile,
    gpu_group,
)

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
DEVICE_PLUGIN = SHARED / "upstream" / "k8s-device-plugin-v0.20.0"
OPERATOR = SHARED / "upstream" / "gpu-operator-v26.7.0"

P5 = {"machine_type": "p5.48xlarge", "cpu": 192, "memory_gib": 2048}
P4D = {"machine_type": "p4d.24xlarge", "cpu": 96, "memory_gib": 1152}


def upstream(path: Path) -> Path:
    """``path`` under ../shared, or skip: only the project's CI has that tree."""
    if not path.exists():
        pytest.skip(f"{path} is absent: upstream data lives in ../shared, which only the "
                    "project's CI has")
    return path


def gpu_nodes(profile: Profile):
    for group, index, name in profile.iter_nodes():
        if group.is_gpu:
            yield group, index, name


def labels_of(profile: str, group: str, **kwargs) -> dict[str, str]:
    return gfd.node_labels(get_profile(profile).group(group), 0, **kwargs)


# --- the label contract -------------------------------------------------------------------------


@pytest.mark.parametrize("name", contract.CONTRACT_FILES)
def test_packaged_contract_equals_upstream(name):
    original = upstream(DEVICE_PLUGIN / "tests" / name)
    assert contract.contract_path(name).read_bytes() == original.read_bytes()


def test_packaged_contract_readme_names_origin():
    text = (contract.DATA_DIR / "README.md").read_text()
    assert "NVIDIA/k8s-device-plugin" in text and "v0.20.0" in text


def _contract(source: str, name: str) -> list[re.Pattern[str]]:
    if source == "upstream":
        return contract.load_label_contract(upstream(DEVICE_PLUGIN / "tests" / name))
    return list(contract.packaged_contract(name))


EXPECTED_CONTRACT = {"mig-single": contract.MIG_SINGLE, "mig-mixed": contract.MIG_MIXED,
                     "dra-mig": contract.MIG_MIXED}


@pytest.mark.parametrize("source", ["packaged", "upstream"])
@pytest.mark.parametrize("profile", list(PROFILES))
def test_every_gpu_node_meets_the_gfd_contract(profile, source):
    prof = get_profile(profile)
    checked = 0
    for group, index, name in gpu_nodes(prof):
        labels = gfd.node_labels(group, index)
        chosen = contract.select_contract(labels)
        assert chosen == EXPECTED_CONTRACT.get(profile, contract.FULL_GPU), name
        problems = contract.check_label_contract(labels, _contract(source, chosen))
        problems += contract.check_label_contract(labels, _contract(source, contract.VGPU),
                                                  require_all=False)
        assert problems == [], f"{name}: {problems}"
        checked += 1
    assert checked == prof.gpu_node_count > 0


@pytest.mark.parametrize("profile", list(PROFILES))
def test_gfd_labels_alone_pass_upstreams_own_check(profile):
    """Upstream's checkResult: every GFD output line matches some regex of the applicable file."""
    for group in get_profile(profile).gpu_groups:
        labels = gfd.gfd_labels(group)
        patterns = list(contract.packaged_contract(contract.select_contract(labels)))
        vgpu = list(contract.packaged_contract(contract.VGPU))
        for key, value in labels.items():
            pats = vgpu if "vgpu" in key else patterns
            line = f"{key}={value}"
            # mig.strategy is not in expected-output.txt: GFD writes it on full-GPU nodes under
            # the operator's default strategy "single", which upstream's own test (strategy none)
            # never sees.
            if key == "nvidia.com/mig.strategy" and group.mig_layout == ():
                continue
            assert any(p.search(line) for p in pats), line


def test_contract_matches_like_go_regexp_matchstring():
    patterns = contract.load_label_contract(contract.contract_path(contract.FULL_GPU))
    labels = labels_of("healthy", "h100")
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"  # digits: a search, not
    assert contract.check_label_contract(labels, patterns) == []  # a full match of [A-Za-z_-]+
    assert len(patterns) == 25


def test_contract_reports_missing_and_wrong_labels():
    patterns = list(contract.packaged_contract(contract.FULL_GPU))
    labels = labels_of("healthy", "h100")
    del labels["nvidia.com/gfd.timestamp"]
    labels["nvidia.com/gpu.count"] = "eight"
    labels["nvidia.com/gpu.family"] = "Hopper"
    problems = contract.check_label_contract(labels, patterns)
    assert len(problems) == 3, problems
    assert problems[0].startswith("missing label nvidia.com/gfd.timestamp")
    assert any("'nvidia.com/gpu.count=eight'" in p for p in problems)
    assert any("'nvidia.com/gpu.family=Hopper'" in p for p in problems)
    nine_digits = {**labels_of("healthy", "h100"), "nvidia.com/gfd.timestamp": "176722560"}
    assert len(contract.check_label_contract(nine_digits, patterns)) == 1


def test_contract_checks_every_governed_label_not_only_one():
    """A second MIG profile with a bad count fails although the first satisfies the pattern."""
    labels = labels_of("mig-mixed", "a100")
    patterns = list(contract.packaged_contract(contract.MIG_MIXED))
    assert contract.check_label_contract(labels, patterns) == []
    labels["nvidia.com/mig-3g.20gb.count"] = "many"
    problems = contract.check_label_contract(labels, patterns)
    assert problems == ["label 'nvidia.com/mig-3g.20gb.count=many' does not match "
                        "/nvidia\\.com\\/mig-[0-9]+g\\.[0-9]+gb\\.count=[0-9]+/"]


def test_contract_selection_and_vgpu():
    full = labels_of("healthy", "h100")
    assert full["nvidia.com/mig.strategy"] == "single"  # operator default, no MIG devices
    assert contract.select_contract(full) == contract.FULL_GPU
    assert contract.select_contract(labels_of("mig-single", "a100")) == contract.MIG_SINGLE
    assert contract.select_contract(labels_of("mig-mixed", "h100")) == contract.MIG_MIXED
    assert contract.check_gfd_labels(full).problems == []
    vgpu = {**full, "nvidia.com/vgpu.present": "true"}
    problems = contract.check_gfd_labels(vgpu).problems
    assert problems and all(p.startswith(contract.VGPU) for p in problems)
    assert any("vgpu.host-driver-branch" in p for p in problems)
    with pytest.raises(ValueError, match="known"):
        contract.contract_path("expected-output-foo.txt")


# --- labels -------------------------------------------------------------------------------------


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


# --- sharing: labels and capacity ---------------------------------------------------------------


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


# --- MIG ----------------------------------------------------------------------------------------


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


# --- profiles -----------------------------------------------------------------------------------


def test_profile_table():
    expected = {  # name: (GPU nodes, physical GPUs, CPU nodes)
        "healthy": (2, 16, 1), "heterogeneous": (5, 40, 1), "time-slicing": (2, 4, 1),
        "time-slicing-renamed": (2, 4, 1), "time-slicing-e2e": (2, 16, 1),
        "mig-single": (3, 24, 1), "mig-mixed": (3, 24, 1),
        "large": (500, 4000, 1), "managed-tainted": (2, 16, 1),
        "device-plugin-chart": (2, 16, 1), "device-plugin-chart-time-slicing": (2, 4, 1),
        "dra": (3, 24, 1), "dra-mig": (2, 16, 1), "dra-mixed": (4, 32, 1),
        "dra-gpucluster": (2, 16, 1), "dra-large": (500, 4000, 1),
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


# --- the sharing config validator ---------------------------------------------------------------


def ts(**resource) -> dict:
    return {"version": "v1", "sharing": {"timeSlicing": {
        "resources": [{"name": "nvidia.com/gpu", "replicas": 4, **resource}]}}}


README_EXAMPLES = [  # the concrete examples of README "Shared Access to GPUs", v0.20.0
    "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
    "      replicas: 10\n",
    "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: 10\n",
    "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n"
    "      replicas: 10\n",
    "version: v1\nsharing:\n  mps:\n    renameByDefault: true\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: 10\n",
]


def _readme_sharing_examples(readme: Path) -> list[str]:
    """The README's sharing YAML blocks: templates filled in, its "..." ellipsis lines dropped."""
    fill = {"<bool>": "true", "<resource-name>": "nvidia.com/gpu", "<num-replicas>": "2"}
    out = []
    for block in re.findall(r"```yaml\n(.*?)```", readme.read_text(), re.S):
        if "sharing:" not in block:
            continue
        for placeholder, value in fill.items():
            block = block.replace(placeholder, value)
        out.append("\n".join(line for line in block.splitlines() if line.strip() != "..."))
    return out


@pytest.mark.parametrize("text", README_EXAMPLES)
def test_validator_accepts_readme_examples(text):
    assert sharing.validate_sharing_config(text) == []
    assert sharing.sharing_config_warnings(text) == []


def test_validator_accepts_every_sharing_example_of_the_upstream_readme():
    examples = _readme_sharing_examples(upstream(DEVICE_PLUGIN / "README.md"))
    assert len(examples) == 6
    for text in examples:
        assert sharing.validate_sharing_config(text) == [], text
    assert set(README_EXAMPLES) <= {e + "\n" for e in examples}


@pytest.mark.parametrize("profile", list(PROFILES))
def test_validator_accepts_the_sims_own_configs(profile):
    doc = get_profile(profile).sharing_config()
    if doc is not None:
        assert sharing.validate_sharing_config(doc) == []
        assert sharing.validate_sharing_config(yaml.safe_dump(doc)) == []


@pytest.mark.parametrize("doc, message", [
    (ts(replicas=1), "number of replicas must be >= 2"),
    (ts(replicas="4"), "must be an integer"),
    (ts(replicas=True), "must be an integer"),
    ({"sharing": ts()["sharing"]}, "version: missing"),
    ({**ts(), "version": "v2"}, "unknown version 'v2'"),
    ({"version": "v1", "sharing": {"timeSlicing": ts()["sharing"]["timeSlicing"],
                                   "mps": {"resources": [{"name": "nvidia.com/gpu",
                                                          "replicas": 2}]}}},
     "exactly one of timeSlicing and mps"),
    ({"version": "v1", "sharing": {}}, "exactly one of timeSlicing and mps"),
    ({"version": "v1"}, "sharing: missing"),
    ({"version": "v1", "sharing": {"mps": {"resources": [
        {"name": "nvidia.com/mig-1g.5gb", "replicas": 2}]}}}, "MPS supports only nvidia.com/gpu"),
    ({**ts(), "flags": {"migStrategy": "mixed"},
      "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}},
     "mixed is not supported with MPS"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": []}}}, "no resources specified"),
    ({"version": "v1", "sharing": {"timeSlicing": {}}}, "no resources specified"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": [{"replicas": 2}]}}},
     "no resource name specified"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu"}]}}},
     "no replicas specified"),
    (ts(name="nvidia.com/gpu.shared"), "cannot be time-sliced"),
    (ts(name="nvidia.com/GPU"), "incorrect format"),
    ({**ts(), "sharng": {}}, "sharng: unknown field"),
    ({"version": "v1", "sharing": {"timeSlicing": {
        "renameByDefualt": True, "resources": ts()["sharing"]["timeSlicing"]["resources"]}}},
     "renameByDefualt: unknown field"),
    (ts(replica=4), "replica: unknown field"),
    ({"version": "v1", "sharing": {"timeSlicing": {
        "renameByDefault": "yes", "resources": ts()["sharing"]["timeSlicing"]["resources"]}}},
     "must be true or false"),
    (ts(devices="some"), "devices: must be 'all'"),
    (ts(devices=0), "devices: must be 'all'"),
    ({**ts(), "flags": {"migStrategy": "dual"}}, "is not one of none, single, mixed"),
    ("version: v1\nsharing: [", "not valid YAML"),
    ("- a list", "must be a mapping"),
])
def test_validator_catches(doc, message):
    errors = sharing.validate_sharing_config(doc)
    assert any(message in e for e in errors), errors


def test_validator_rules_that_are_warnings_or_relaxed():
    relaxed = {"sharing": ts()["sharing"]}
    assert sharing.validate_sharing_config(relaxed, require_version=False) == []
    assert sharing.validate_sharing_config(ts(name="gpu")) == []  # nvidia.com/ is prepended
    assert sharing.validate_sharing_config(ts(name="nvidia.com/mig-1g.5gb")) == []
    for doc, warning in [
        (ts(rename="nvidia.com/gpu-shared"), "rename"),
        (ts(devices=[0, "1", "GPU-b1028956-cfa2-0990-bf4a-5da9abb51763"]), "devices"),
        ({**ts(), "resources": {"gpus": [{"pattern": "*", "name": "gpu"}]}}, "resources"),
        ({"version": "v1", "sharing": {"mps": {"failRequestsGreaterThanOne": False, "resources": [
            {"name": "nvidia.com/gpu", "replicas": 2}]}}}, "MPS always fails"),
        ({"version": "v1", "sharing": {"timeSlicing": {"resources": [
            {"name": "nvidia.com/gpu", "replicas": 2},
            {"name": "gpu", "replicas": 3}]}}}, "named twice"),
    ]:
        assert sharing.validate_sharing_config(doc) == [], doc
        assert any(warning in w for w in sharing.sharing_config_warnings(doc)), doc
    default_rename = {"version": "v1", "sharing": {"timeSlicing": {
        "renameByDefault": True,
        "resources": [{"name": "nvidia.com/gpu", "rename": "nvidia.com/gpu.shared",
                       "replicas": 2, "devices": "all"}]}}}
    assert sharing.validate_sharing_config(default_rename) == []
    assert sharing.sharing_config_warnings(default_rename) == []


# --- operands -----------------------------------------------------------------------------------


def test_operand_catalogue_defaults():
    assert [op.key for op in operands.OPERANDS] == [
        "driver", "container-toolkit", "device-plugin", "mps-control-daemon",
        "gpu-feature-discovery", "dcgm-exporter", "dcgm", "mig-manager", "operator-validator",
        "node-status-exporter"]
    spec = operands.default_cluster_policy_spec()
    enabled = {op.key for op in operands.enabled_operands(spec)}
    assert enabled == {op.key for op in operands.OPERANDS} - {"dcgm", "node-status-exporter"}
    assert operands.get_operand("dcgm").enabled({"dcgm": {"enabled": True}})
    assert not operands.get_operand("gpu-feature-discovery").enabled({"gfd": {"enabled": False}})
    assert operands.get_operand("nvidia-dcgm-exporter").spec_path == "dcgmExporter.enabled"
    assert operands.get_operand("operator-validator").spec_path is None
    assert operands.get_operand("driver").update_strategy == "OnDelete"
    assert operands.operand_env(operands.get_operand("device-plugin"),
                                {"mig": {"strategy": "mixed"},
                                 "devicePlugin": {"env": [{"name": "A", "value": "1"}]}}) == {
        "MIG_STRATEGY": "mixed", "A": "1"}
    # every operand runs on every GPU node of the sim that its switch selects
    labels = labels_of("healthy", "h100")
    assert all(op.selects(labels) for op in operands.OPERANDS if op.key != "mps-control-daemon")
    with pytest.raises(ValueError, match="known"):
        operands.get_operand("nvidia-gpu-operator")


def test_operands_match_the_operator_assets():
    root = upstream(OPERATOR / "assets")
    for op in operands.OPERANDS:
        ds = yaml.safe_load((root / op.asset).read_text())
        pod = ds["spec"]["template"]
        assert ds["kind"] == "DaemonSet" and ds["metadata"]["name"] == op.name
        assert ds["spec"]["selector"]["matchLabels"]["app"] == op.app
        assert pod["metadata"]["labels"] == {"app": op.app, **op.extra_labels}, op.key
        assert pod["spec"]["nodeSelector"] == op.node_selector, op.key
        assert pod["spec"]["tolerations"] == list(operands.DEFAULT_TOLERATIONS), op.key
        assert pod["spec"]["containers"][0]["name"] == op.container, op.key
        assert tuple(c["name"] for c in pod["spec"].get("initContainers", [])) == (
            op.init_containers), op.key
        assert pod["spec"]["priorityClassName"] == operands.PRIORITY_CLASS
        strategy = (ds["spec"].get("updateStrategy") or {}).get("type", "RollingUpdate")
        assert strategy == op.update_strategy, op.key
        if op.service:
            svc = yaml.safe_load((root / op.service.asset).read_text())
            assert svc["metadata"]["name"] == op.service.name
            assert (svc["spec"]["ports"][0]["port"], svc["spec"]["ports"][0]["name"]) == (
                op.service.port, op.service.port_name)
            assert svc["spec"].get("internalTrafficPolicy") == op.service.internal_traffic_policy


def test_operand_defaults_match_the_chart_values():
    values = yaml.safe_load(upstream(OPERATOR / "chart" / "values.yaml").read_text())
    assert values["daemonsets"]["tolerations"] == list(operands.DEFAULT_TOLERATIONS)
    assert values["mig"]["strategy"] == operands.default_cluster_policy_spec()["mig"]["strategy"]
    assert values["migManager"]["config"]["default"] == "all-disabled"
    spec = operands.default_cluster_policy_spec()
    for op in operands.OPERANDS:
        if op.spec_section:
            assert values[op.spec_section]["enabled"] == op.default_enabled, op.key
        section = values[op.image_section]
        expected = (f"{section['repository']}/{section['image']}:"
                    f"{section.get('version') or operands.OPERATOR_VERSION}")
        assert op.image(spec) == op.image(None) == expected, op.key
