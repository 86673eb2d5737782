"""The suites pass on every healthy profile and catch every fault under the right requirement.

This is how a check that cannot fail shows up: each fault of the sim's catalog names the
requirements that must fail when it is injected, and the diagnosis must name the faulty layer.
"""

from __future__ import annotations

import pytest

from conformance.sim import profiles
from conformance.sim.faults import FAULTS
from tests.integration.conftest import run_suites, run_with_fault, verdicts
from tests.integration.test_dra import DRA_EXPECTED, DRA_PROFILES

SUITES = ("stack", "scheduling", "sharing")

# fault -> (exactly the requirements that fail, a word the failing diagnoses name). Each fault
# is played on its catalog profile (Fault.profile). Exact sets: a fault that makes an unrelated
# check fail is as much a defect as a check that no fault can fail.
_TAINT_EVICTS_OPERANDS = {"STACK-DRV-001", "STACK-TK-001", "STACK-DP-001", "STACK-DCGM-001",
                          "STACK-GFD-001", "STACK-MIG-001", "STACK-VAL-001"}
EXPECTED: dict[str, tuple[set[str], str]] = {
    "device-plugin-absent": ({"STACK-DP-001", "STACK-DP-002", "SCHED-ALLOC-001",
                              "SCHED-ALLOC-002", "SCHED-LAT-001", "SCHED-PLACE-001",
                              "SCHED-PLACE-002"}, "device plugin"),
    "toolkit-absent": ({"STACK-TK-001"}, "toolkit"),
    "driver-version-mismatch": ({"STACK-DRV-002"}, "driver"),
    "gfd-absent": ({"STACK-GFD-001", "STACK-GFD-002", "SCHED-PLACE-001"}, "Feature Discovery"),
    "gfd-label-wrong": ({"STACK-DP-003"}, "GPU Feature Discovery"),
    "time-slicing-replicas-mislabelled": ({"SHARE-LBL-001"}, "sharing labels"),
    "operand-crashloop": ({"STACK-DCGM-001", "STACK-OPD-002"}, "DCGM"),
    "clusterpolicy-notready": ({"STACK-OP-002"}, "ClusterPolicy"),
    "gpu-node-taint-missing-toleration": ({"SCHED-TAINT-001", *_TAINT_EVICTS_OPERANDS}, "taint"),
    "wrong-gpu-type-label": ({"SCHED-PLACE-001", "STACK-GFD-003"}, "wrong GPU type"),
    "operator-unavailable": ({"STACK-OP-001"}, "GPU Operator deployment"),
    "driver-crashloop": ({"STACK-DRV-001", "STACK-VAL-001", "STACK-OPD-002"}, "driver"),
    "mig-manager-crashloop": ({"STACK-MIG-001", "STACK-OPD-002"}, "MIG manager"),
    "gpu-request-rewriter": ({"SCHED-INT-001", "SCHED-INT-002"}, "admission"),
    "compute-capability-label-wrong": ({"SCHED-PLACE-001", "SCHED-PLACE-002", "STACK-GFD-003"},
                                       "compute-capability"),
    # the plugin and GFD crash-loop on it; the kubelet keeps the plugin's last capacity with
    # nothing allocatable (as the real node shows: tests/node/test_node_fault_matrix.py)
    "sharing-config-invalid": ({"SHARE-CFG-001", "STACK-DP-001", "STACK-OPD-002",
                                "STACK-DP-002", "STACK-GFD-001", "SCHED-ALLOC-001",
                                "SCHED-ALLOC-002", "SCHED-LAT-001", "SCHED-PLACE-001",
                                "SCHED-PLACE-002", "SHARE-OVS-001"},
                               "sharing config"),
    "sharing-config-not-applied": ({"SHARE-CAP-001", "SHARE-OVS-001"}, "sharing config"),
    "frgo-ignored": ({"SHARE-FRGO-001"}, "device plugin"),
    "unpinned-gpu-workload": ({"SCHED-PLACE-003"}, "nodeSelector"),
}
_EVERY_STACK_PASSES = {"STACK-DP-001", "STACK-DP-002", "STACK-DRV-002",
                       "STACK-GFD-001", "STACK-GFD-002", "STACK-GFD-003", "STACK-OPD-002",
                       "SCHED-ALLOC-001", "SCHED-ALLOC-002", "SCHED-INT-001", "SCHED-INT-002",
                       "SCHED-LAT-001", "SCHED-PLACE-001", "SCHED-PLACE-002"}
_OPERATOR_PASSES = {"STACK-OP-001", "STACK-OP-002", "STACK-DRV-001", "STACK-TK-001",
                    "STACK-DCGM-001", "STACK-VAL-001"}
# Reconcile faults break the operator's reaction to changes; the disruptive operations suite
# catches them (tests/integration/test_operations.py).
NOT_STATIC = {"standin-ignores-changes"}


def test_every_fault_has_an_expectation():
    # DRA faults fail DRA requirements, with the dra suite: test_dra.py plays them
    assert set(EXPECTED) | set(DRA_EXPECTED) | NOT_STATIC == {f.name for f in FAULTS}


def test_every_sim_check_is_proven_to_fail():
    """No check runs on the sim that no injected fault makes fail (a check that cannot fail)."""
    from conformance import catalog

    proven = set().union(*(failing for failing, _word in [*EXPECTED.values(),
                                                          *DRA_EXPECTED.values()]))
    proven |= {"STACK-OP-003"}  # test_helm_release_check_fails_for_a_missing_release
    proven |= {r.id for r in catalog.REQUIREMENTS if r.disruptive}  # test_operations.py
    unproven = {r.id for r in catalog.REQUIREMENTS if "sim" in r.targets} - proven
    assert unproven == set()


def test_helm_release_check_fails_for_a_missing_release(sim, sim_state, tmp_path):
    sim_state("healthy")
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, "stack/test_operator.py",
                                extra=["--helm-release=gpu-operator-gone"])
    assert verdicts(doc, "fail") == {"STACK-OP-003"} and code == 1, out[-2000:]
    row = next(r for r in doc["requirements"] if r["id"] == "STACK-OP-003")
    assert "no Helm release record for gpu-operator-gone" in row["message"]


@pytest.mark.parametrize("profile", [p for p in profiles.PROFILES if p != "large"
                                     and p not in DRA_PROFILES and p != "dra-large"])
def test_suites_pass_on_healthy_profile(profile, sim, sim_state, tmp_path):
    sim_state(profile)
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, *SUITES)
    assert verdicts(doc, "fail") == set(), out[-3000:]
    assert code == 0, out[-3000:]
    # the run checked things; it did not skip its way: whatever runs the stack, the device
    # plugin, GFD and scheduling checks pass, and under the operator its own checks too
    must_pass = _EVERY_STACK_PASSES | (_OPERATOR_PASSES if profiles.PROFILES[profile].stack
                                       == "gpu-operator" else set())
    assert must_pass <= verdicts(doc, "pass"), sorted(must_pass - verdicts(doc, "pass"))


@pytest.mark.parametrize("fault", sorted(EXPECTED))
def test_fault_fails_the_right_requirements(fault, sim, sim_cluster, sim_state, tmp_path):
    must_fail, layer_word = EXPECTED[fault]
    run_with_fault(sim, sim_cluster, sim_state, tmp_path, SUITES, fault, must_fail, layer_word)


def test_certify_names_exactly_the_injected_fault(sim, sim_state, tmp_path):
    """Two real runs that differ in one fault: certification names exactly that requirement."""
    import subprocess
    import sys

    sim_state("healthy")
    run_suites(sim.kubeconfig, tmp_path / "baseline", "stack")
    sim_state("healthy", ["clusterpolicy-notready"])
    run_suites(sim.kubeconfig, tmp_path / "candidate", "stack")
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "certify", "--baseline",
                           str(tmp_path / "baseline"), "--candidate", str(tmp_path / "candidate"),
                           "--output", str(tmp_path / "cert.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "NOT CERTIFIED" in proc.stdout
    import json

    cert = json.loads((tmp_path / "cert.json").read_text())
    assert cert["regressions"]["requirements"] == ["STACK-OP-002"], cert
    assert [c["id"] for c in cert["requirement_changes"]] == ["STACK-OP-002"], cert
