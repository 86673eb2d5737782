"""DRA rules (conformance.checks.dra) on what the sim's DRA driver stand-in publishes.

The stand-in's pools are the healthy reference: every rule passes on them, and each fault the
stand-in plays breaks exactly the rule that owns it.
"""

from __future__ import annotations

import copy

import pytest

from conformance.checks import dra as rules
from conformance.checks.gpu_nodes import GpuNode
from conformance.nvidia import dra
from conformance.sim import dra_plan, gfd
from conformance.sim.profiles import get_profile

RELEASE = (0, 4, 1)


def node_of(profile: str, group: str, index: int = 0) -> GpuNode:
    g = get_profile(profile).group(group)
    return GpuNode(name=g.node_name(index), labels=gfd.node_labels(g, index),
                   capacity=gfd.advertised_resources(g), allocatable=gfd.advertised_resources(g),
                   taints=(), ready=True)


def slices_of(profile: str, group: str, faults: tuple[str, ...] = (), index: int = 0):
    g = get_profile(profile).group(group)
    node = g.node_name(index)
    return [rules.slice_from_api(b)
            for b in dra_plan.node_slices(list(faults), g, node, "uid", True)]


def devices_of(slices) -> list[rules.Device]:
    return [d for s in slices for d in s.devices]


@pytest.mark.parametrize(("profile", "group"), [
    ("dra", "a100"), ("dra", "h100"), ("dra-mig", "a100"), ("dra-mig", "h100"),
    ("dra-mixed", "h200")])
def test_healthy_stand_in_pools_pass_every_rule(profile, group):
    node = node_of(profile, group)
    slices = slices_of(profile, group)
    pools = rules.pools(slices)
    plugin = rules.PluginPod("p", "ns", node.name, True, dra_plan.IMAGE)
    assert plugin.release == RELEASE
    assert rules.pool_problems(node.name, pools, plugin) == []
    devices = devices_of(slices)
    assert rules.device_count_problems(node, devices) == []
    assert rules.attribute_problems(node, devices, "580.105.08") == []
    assert rules.attribute_set_problems(node.name, devices, RELEASE) == []
    assert rules.allocation_path(node, True, True) == rules.DRA
    assert rules.both_paths(node, len(devices)) is None


def test_stand_in_devices_carry_the_v041_attribute_set_exactly():
    new = dra.attribute_set(RELEASE)
    for profile, group in (("dra", "h100"), ("dra-mig", "h100")):
        for d in devices_of(slices_of(profile, group)):
            names = set(d.attributes)
            assert new.required(d.type) <= names <= new.allowed(d.type), (d.name, names)
            assert all(dra.is_semver(str(d.attr(v))) for v in d.version_attributes)


def test_incomplete_pool():
    node = node_of("dra", "a100")
    pools = rules.pools(slices_of("dra", "a100", ("dra-pool-incomplete",)))
    problems = rules.pool_problems(node.name, pools, None)
    assert len(problems) == 1 and "incomplete pool" in problems[0] and "ignores" in problems[0]


def test_plugin_ready_without_slice():
    problems = rules.pool_problems("n", [], rules.PluginPod("p", "ns", "n", True, None))
    assert "is Ready but no gpu.nvidia.com ResourceSlice" in problems[0]
    assert "not semver" in problems[0]


def test_pools_keep_the_current_generation_only():
    s = slices_of("dra", "h100")[0]
    old = rules.Slice(s.name + "-old", s.driver, s.node, s.pool, 1, 1, s.devices)
    new = rules.Slice(s.name, s.driver, s.node, s.pool, 2, 1, s.devices)
    (pool,) = rules.pools([old, new])
    assert pool.generation == 2 and pool.complete and pool.stale == 1
    assert rules.pools([new], driver="other.example.com") == []


def test_unnormalised_version_is_not_semver():
    g = get_profile("dra").group("a100")
    devs, _ = dra_plan._with_faults(["dra-version-not-semver"], g, "n",
                                    dra_plan.devices(g, "n"), True)
    assert devs[0]["attributes"]["driverVersion"] == {"version": "580.105.08"}
    assert not dra.is_semver("580.105.08")  # what the API server refuses
    problems = rules.attribute_set_problems(
        "n", [rules.device_from_api(d, dra.DRIVER) for d in devs], RELEASE)
    assert any("driverVersion=580.105.08 is not semver" in p for p in problems)


def test_attributes_that_disagree_with_gfd():
    node = node_of("dra", "a100")
    devices = devices_of(slices_of("dra", "a100", ("dra-attributes-disagree",)))
    problems = rules.attribute_problems(node, devices)
    assert any("productName 'NVIDIA H100 80GB HBM3'" in p for p in problems)
    assert any("cudaComputeCapability 9.0.0, GFD says compute 8.0" in p for p in problems)


def test_expected_driver_version_compared_as_semver():
    node = node_of("dra", "h100")
    devices = devices_of(slices_of("dra", "h100"))
    assert rules.attribute_problems(node, devices, "580.105.08") == []
    problems = rules.attribute_problems(node, devices, "570.86.15")
    assert problems and "driverVersion 580.105.8 is not 570.86.15" in problems[0]


def test_memory_disagreement():
    node = node_of("dra", "h100")
    device = devices_of(slices_of("dra", "h100"))[0]
    wrong = rules.Device(device.name, device.attributes, device.version_attributes,
                         {"memory": "40Gi"})
    (problem,) = rules.attribute_problems(node, [wrong])
    assert "memory 40Gi (40960 MiB), GFD says nvidia.com/gpu.memory=81559 MiB" in problem


def test_stale_pool_doubles_the_gpus_with_dropped_attributes():
    node = node_of("dra", "a100")
    slices = slices_of("dra", "a100", ("dra-stale-pool",))
    pools = rules.pools(slices)
    assert len(pools) == 2
    assert "2 gpu.nvidia.com pools" in rules.pool_problems(node.name, pools, None)[0]
    (count,) = rules.device_count_problems(node, devices_of(slices))
    assert "8 GPU(s) by nvidia.com/gpu.count, the pool offers 16" in count
    problems = rules.attribute_set_problems(node.name, devices_of(slices), RELEASE)
    assert any("index (dropped in v25.8)" in p for p in problems)
    assert any("missing resource.kubernetes.io/pciBusID" in p for p in problems)
    # an old plugin publishing its own set is consistent with its release
    old = [d for d in devices_of(slices) if "index" in d.attributes]
    assert rules.attribute_set_problems(node.name, old, (0, 1, 2)) == []


def test_mig_parent_offered_beside_its_mig_devices():
    node = node_of("dra-mig", "a100")
    devices = devices_of(slices_of("dra-mig", "a100", ("dra-mig-parent-offered",)))
    problems = rules.device_count_problems(node, devices)
    assert any("offered whole and as their own MIG devices" in p for p in problems)
    # partitionable devices share counters: both may be offered
    shared = [rules.Device(d.name, d.attributes, d.version_attributes, d.capacity, True)
              for d in devices]
    assert not any("offered whole" in p for p in rules.device_count_problems(node, shared))


def test_mig_single_strategy_counts():
    node = node_of("mig-single", "a100")  # gpu.product NVIDIA-A100-SXM4-40GB-MIG-1g.5gb
    g = get_profile("mig-single").group("a100")
    devices = [rules.device_from_api(d, dra.DRIVER) for d in dra_plan.devices(g, node.name)]
    assert rules.device_count_problems(node, devices) == []
    assert rules.device_count_problems(node, devices[:-1])


def test_device_classes():
    healthy = dra_plan.device_classes([])
    assert rules.class_problems(healthy) == []
    assert rules.extended_resource_classes(healthy) == ["gpu.nvidia.com"]
    wrong = dra_plan.device_classes(["dra-class-selector-wrong"])
    (problem,) = rules.class_problems(wrong)
    assert "gpu.nvidia.com selects" in problem and "type == 'GPU'" in problem
    missing = [c for c in healthy if c["metadata"]["name"] != "mig.nvidia.com"]
    assert rules.class_problems(missing) == ["DeviceClass mig.nvidia.com is missing"]
    remapped = copy.deepcopy(healthy)
    remapped[1]["spec"]["extendedResourceName"] = "nvidia.com/gpu"
    assert "maps extendedResourceName nvidia.com/gpu" in rules.class_problems(remapped)[0]


def test_paths_and_stacks():
    dp = node_of("dra-mixed", "h100")
    dra_node = node_of("dra-mixed", "h200")
    assert rules.allocation_path(dp, False, False) == rules.DEVICE_PLUGIN
    assert rules.allocation_path(dp, True, False) == rules.BOTH
    assert rules.allocation_path(dra_node, False, True) == rules.DRA
    bare = GpuNode("n", {}, {}, {}, (), True)
    assert rules.allocation_path(bare, False, False) == rules.NONE
    assert "offers 8 device(s)" in rules.both_paths(dp, 8)
    assert rules.serving_stack(dp, cluster_policy=True, gpu_cluster=False) == rules.CLUSTER_POLICY
    assert rules.serving_stack(dp, cluster_policy=False, gpu_cluster=True) == rules.GPU_CLUSTER
    assert rules.serving_stack(bare, cluster_policy=True, gpu_cluster=False) == rules.NONE


def test_gpucluster_state():
    ready = {"metadata": {"name": "gpu-cluster"}, "status": {"state": "ready"}}
    assert rules.gpucluster_problems(ready) == []
    bad = {"metadata": {"name": "gpu-cluster"}, "status": {"state": "notReady", "conditions": [
        {"type": "Ready", "status": "False", "reason": "OperandNotReady",
         "message": "Waiting for operand pods to be ready"}]}}
    (problem,) = rules.gpucluster_problems(bad)
    assert "'notReady'" in problem and "OperandNotReady" in problem


def test_sim_faults_are_in_the_catalog():
    from conformance.sim.faults import BY_NAME

    assert all(f in BY_NAME for f in dra_plan.FAULT_NAMES)


def test_a_refused_read_is_recorded_not_raised(monkeypatch):
    """An identity without the DRA reads still gets the device plugin checks (paths from what
    was read); the DRA checks then say which read was refused."""
    from types import SimpleNamespace

    from kubernetes.client.exceptions import ForbiddenException

    from conformance.cluster import dra as cluster_dra

    def forbidden(*_a, **_k):
        raise ForbiddenException(status=403, reason="Forbidden")

    group = SimpleNamespace(name="resource.k8s.io", versions=[SimpleNamespace(version="v1")])
    apis = SimpleNamespace(get_api_versions=lambda: SimpleNamespace(groups=[group]))
    cluster = SimpleNamespace(custom=SimpleNamespace(list_cluster_custom_object=forbidden),
                              core=SimpleNamespace(list_pod_for_all_namespaces=forbidden))
    monkeypatch.setattr(cluster_dra.k8s, "ApisApi", lambda _client: apis)
    monkeypatch.setattr(cluster_dra, "api_feature_gates",
                        lambda _c: (None, "GET /metrics: 403 Forbidden"))
    cluster.api_client = None
    view = cluster_dra.read_view(cluster)
    assert view.served and not view.driver_present
    assert [u.split(":")[0] for u in view.unreadable] == [
        "list deviceclasses", "list resourceslices", "list pods", "list gpuclusters"]
    assert view.paths([node_of("dra-mixed", "h100")]) == {"gpu-h100-0": rules.DEVICE_PLUGIN}
