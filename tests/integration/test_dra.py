"""DRA on the sim: the default suites pass on every DRA profile, each DRA fault fails exactly
its requirements, and a cluster without the NVIDIA DRA driver gets not-applicable, never a fail.

The real kube-scheduler allocates every claim here; the stand-in (``conformance/sim/dra.py``)
only writes what the NVIDIA DRA driver would: its DeviceClasses, its kubelet plugin DaemonSet and
one ResourceSlice pool per node. A fault that makes an unrelated check fail is as much a defect
as a check that no fault can fail (what each fault fails is on the fault itself:
``conformance/sim/faults.py``).
"""

from __future__ import annotations

import pytest

from conformance import catalog
from conformance.sim import dra_plan
from conformance.sim.faults import BY_NAME, DRA_SUITES, FAULTS
from tests.helpers import DRA_PROFILES, run_suites, run_with_fault, verdicts
from tests.integration.dra_symptoms import DRA_SYMPTOMS

SUITES = DRA_SUITES  # what a default `gpuconf run` runs
DRA_IDS = {r.id for r in catalog.REQUIREMENTS if r.area == "dra"}
# The DRA faults, each with the requirements it fails (on the fault: conformance/sim/faults.py)
DRA_FAULTS = sorted(f.name for f in FAULTS if f.suites == DRA_SUITES)
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


# --- the catalog ------------------------------------------------------------------------------
def test_every_dra_fault_is_expected_and_played():
    assert set(DRA_FAULTS) == set(DRA_SYMPTOMS) == set(dra_plan.FAULT_NAMES)
    assert all(BY_NAME[f].profile in DRA_PROFILES for f in DRA_FAULTS)


def test_every_dra_sim_check_fails_under_some_fault():
    proven = set().union(*(BY_NAME[f].fails for f in DRA_FAULTS))
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


@pytest.mark.parametrize("fault", DRA_FAULTS)
def test_dra_fault_fails_exactly_its_requirements(fault, sim, sim_cluster, sim_state, tmp_path):
    run_with_fault(sim, sim_cluster, sim_state, tmp_path, BY_NAME[fault])


def test_dra_checks_are_not_applicable_without_the_driver(sim, sim_state, tmp_path):
    """The default run on a device plugin cluster: every DRA check says why it does not apply."""
    sim_state("healthy")
    _code, doc, _out = run_suites(sim.kubeconfig, tmp_path, "dra")
    rows = [r for r in doc["requirements"] if r["id"] in DRA_IDS]
    # never a pass or a fail: not applicable, or not run where a check needs real GPUs
    assert {r["verdict"] for r in rows} <= {"not-applicable", "skip", "not-run"}, [
        (r["id"], r["verdict"]) for r in rows]
    api = next(r for r in rows if r["id"] == "DRA-API-001")
    assert "no NVIDIA DRA driver" in api["message"] and "resource.k8s.io/v1 is served" in (
        api["message"]), api
