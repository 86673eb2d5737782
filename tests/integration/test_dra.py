"""DRA on the sim: the default suites pass on every DRA profile, each DRA fault fails exactly
its requirements, and a cluster without the NVIDIA DRA driver gets not-applicable, never a fail.

The real kube-scheduler allocates every claim here; the stand-in (``conformance/sim/dra.py``)
only writes what the NVIDIA DRA driver would: its DeviceClasses, its kubelet plugin DaemonSet and
one ResourceSlice pool per node. A fault that makes an unrelated check fail is as much a defect
as a check that no fault can fail (``test_fault_matrix.py`` counts these expectations too).
"""

from __future__ import annotations

import pytest

from conformance import catalog
from conformance.nvidia import dra
from conformance.sim import dra_plan, profiles
from conformance.sim.faults import BY_NAME
from tests.integration.conftest import run_suites, run_with_fault, verdicts

SUITES = ("stack", "scheduling", "sharing", "dra")  # what a default `gpuconf run` runs
DRA_PROFILES = tuple(p for p, prof in profiles.PROFILES.items()
                     if any(g.allocation == "dra" for g in prof.gpu_groups)
                     and prof.gpu_node_count < 100)  # dra-large: the scale measurement
DRA_IDS = {r.id for r in catalog.REQUIREMENTS if r.area == "dra"}
_UNUSABLE_CLASS = {"DRA-API-001", "DRA-ALLOC-001", "DRA-ALLOC-002", "DRA-ALLOC-003",
                   "DRA-ALLOC-005", "DRA-ALLOC-006", "DRA-ER-001"}
# fault -> (exactly the requirements that fail, a word their messages or diagnoses name)
DRA_EXPECTED: dict[str, tuple[set[str], str]] = {
    "dra-pool-incomplete": ({"DRA-POOL-001"}, "incomplete pool"),
    "dra-version-not-semver": ({"DRA-POOL-001"}, "not semver"),
    "dra-attributes-disagree": ({"DRA-ATTR-001", "DRA-ALLOC-003"}, "GFD"),
    "dra-stale-pool": ({"DRA-POOL-001", "DRA-POOL-002", "DRA-ATTR-002", "DRA-ALLOC-004"},
                       "dropped in v25"),
    "dra-mig-parent-offered": ({"DRA-POOL-002"}, "MIG devices"),
    # every claim for the class stays Pending: each allocation check says so, with the cause
    "dra-class-selector-wrong": (_UNUSABLE_CLASS, "DeviceClass"),
    "dra-both-paths": ({"DRA-ER-002"}, "both paths"),
    "dra-sharing-config-invalid": ({"DRA-SHARE-001"}, "sharing config"),
    "dra-gpucluster-operand-down": ({"DRA-OP-001"}, "nvidia-dcgm-exporter-dra"),
}
# The least each healthy DRA profile proves (the rest is not-applicable there, with a reason).
MUST_PASS = {
    "dra": DRA_IDS - {"DRA-SHARE-001", "DRA-SHARE-002", "DRA-ISO-001", "DRA-ISO-002",
                      "DRA-OP-001"},
    "dra-mig": {"DRA-API-001", "DRA-POOL-001", "DRA-POOL-002", "DRA-ATTR-001", "DRA-ATTR-002",
                "DRA-ALLOC-001", "DRA-ALLOC-002", "DRA-ALLOC-004", "DRA-ALLOC-005",
                "DRA-ALLOC-006", "DRA-ER-002"},
    "dra-mixed": DRA_IDS - {"DRA-SHARE-001", "DRA-SHARE-002", "DRA-ISO-001", "DRA-ISO-002",
                            "DRA-OP-001"} | {"STACK-DP-001", "STACK-DP-002", "SCHED-ALLOC-001"},
    # the GPU Operator's GPUCluster instead of a ClusterPolicy
    "dra-gpucluster": DRA_IDS - {"DRA-SHARE-001", "DRA-SHARE-002", "DRA-ISO-001",
                                 "DRA-ISO-002", "DRA-ER-002"},
}


# --- symptoms, read through the API (test_sim_profiles_and_faults.py checks them) -------------
def _slices(c) -> list[dict]:
    return c.custom.list_cluster_custom_object(dra.RESOURCE_GROUP, dra.RESOURCE_VERSION,
                                               "resourceslices").get("items", [])


def _devices(c):
    for s in _slices(c):
        for d in s["spec"].get("devices") or []:
            yield s, d


def _incomplete(c) -> bool:
    pools: dict[str, list[dict]] = {}
    for s in _slices(c):
        pools.setdefault(s["spec"]["pool"]["name"], []).append(s)
    return any(len(members) < members[0]["spec"]["pool"]["resourceSliceCount"]
               for members in pools.values())


def _plugin_without_slice(c) -> bool:
    sliced = {s["spec"].get("nodeName") for s in _slices(c)}
    pods = c.core.list_namespaced_pod(dra_plan.NAMESPACE).items
    return any(p.spec.node_name and p.spec.node_name not in sliced and p.status.phase == "Running"
               for p in pods)


def _mig_beside_parent(c) -> bool:
    for s in _slices(c):
        devices = s["spec"].get("devices") or []
        uuids = {d["attributes"]["uuid"]["string"] for d in devices
                 if d["attributes"]["type"]["string"] == "gpu"}
        if any(d["attributes"].get("parentUUID", {}).get("string") in uuids for d in devices):
            return True
    return False


def _both_paths(c) -> bool:
    sliced = {s["spec"].get("nodeName") for s in _slices(c)}
    return any(n.metadata.name in sliced and int((n.status.capacity or {}).get(
        "nvidia.com/gpu", 0)) > 0 for n in c.core.list_node().items)


def _gpu_class_selector(c) -> str:
    obj = c.custom.get_cluster_custom_object(dra.RESOURCE_GROUP, dra.RESOURCE_VERSION,
                                             "deviceclasses", dra.GPU_CLASS.name)
    return obj["spec"]["selectors"][0]["cel"]["expression"]


def _sharing_template(c) -> bool:
    items = c.custom.list_namespaced_custom_object(
        dra.RESOURCE_GROUP, dra.RESOURCE_VERSION, dra_plan.SHARING_NAMESPACE,
        "resourceclaimtemplates").get("items", [])
    return any(i["metadata"]["name"] == dra_plan.SHARING_TEMPLATE for i in items)


def _gpucluster_not_ready(c) -> bool:
    obj = c.custom.get_cluster_custom_object(*dra.GPUCLUSTER_API, dra.GPUCLUSTER_NAME)
    return (obj.get("status") or {}).get("state") == "notReady"


DRA_SYMPTOMS = {
    "dra-pool-incomplete": _incomplete,
    "dra-version-not-semver": _plugin_without_slice,
    "dra-attributes-disagree": lambda c: any(
        s["spec"]["nodeName"].startswith("dra-a100") and "H100" in d["attributes"][
            "productName"]["string"] for s, d in _devices(c)),
    "dra-stale-pool": lambda c: any("index" in d["attributes"] for _s, d in _devices(c)),
    "dra-mig-parent-offered": _mig_beside_parent,
    "dra-class-selector-wrong": lambda c: "== 'GPU'" in _gpu_class_selector(c),
    "dra-both-paths": _both_paths,
    "dra-sharing-config-invalid": _sharing_template,
    "dra-gpucluster-operand-down": _gpucluster_not_ready,
}


def test_every_dra_fault_is_expected_and_played():
    assert set(DRA_EXPECTED) == set(DRA_SYMPTOMS) == set(dra_plan.FAULT_NAMES)
    assert all(BY_NAME[f].profile in DRA_PROFILES for f in DRA_EXPECTED)


def test_every_dra_sim_check_fails_under_some_fault():
    proven = set().union(*(failing for failing, _word in DRA_EXPECTED.values()))
    on_sim = {r.id for r in catalog.REQUIREMENTS if r.area == "dra" and "sim" in r.targets
              and not r.needs_gpu}
    assert on_sim - proven == set()


# --- the suites against the sim ---------------------------------------------------------------
@pytest.mark.parametrize("profile", DRA_PROFILES)
def test_default_suites_pass_on_dra_profile(profile, sim, sim_state, tmp_path):
    sim_state(profile)
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, *SUITES)
    assert verdicts(doc, "fail") == set(), out[-3000:]
    assert code == 0, out[-3000:]
    missing = MUST_PASS[profile] - verdicts(doc, "pass")
    assert not missing, f"{profile}: expected to pass, did not: {sorted(missing)}\n{out[-2000:]}"


@pytest.mark.parametrize("fault", sorted(DRA_EXPECTED))
def test_dra_fault_fails_exactly_its_requirements(fault, sim, sim_cluster, sim_state, tmp_path):
    must_fail, word = DRA_EXPECTED[fault]
    run_with_fault(sim, sim_cluster, sim_state, tmp_path, SUITES, fault, must_fail, word)


def test_dra_checks_are_not_applicable_without_the_driver(sim, sim_state, tmp_path):
    """The default run on a device plugin cluster: every DRA check says why it does not apply."""
    sim_state("healthy")
    _code, doc, _out = run_suites(sim.kubeconfig, tmp_path, "dra")
    rows = [r for r in doc["requirements"] if r["id"] in DRA_IDS]
    assert {r["verdict"] for r in rows} <= {"not-applicable", "skip"}, [
        (r["id"], r["verdict"]) for r in rows]
    api = next(r for r in rows if r["id"] == "DRA-API-001")
    assert "no NVIDIA DRA driver" in api["message"] and "resource.k8s.io/v1 is served" in (
        api["message"]), api
