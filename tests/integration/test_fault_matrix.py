"""The suites pass on every healthy profile and catch every fault under the right requirement.

This is how a check that cannot fail shows up: each fault of the sim's catalog names the
requirements that must fail when it is injected, and the diagnosis must name the faulty layer.
"""

from __future__ import annotations

import pytest

from conformance.cluster.namespaces import leftover_namespaces
from conformance.sim import profiles
from conformance.sim.faults import FAULTS
from tests.integration.conftest import run_suites, verdicts

SUITES = ("stack", "scheduling", "sharing")

# fault -> (profile it is played on, requirements that must fail, a word the diagnosis names)
EXPECTED = {
    "device-plugin-absent": ("healthy", {"STACK-DP-001", "STACK-DP-002", "SCHED-ALLOC-001"},
                             "device plugin"),
    "toolkit-absent": ("healthy", {"STACK-TK-001"}, "toolkit"),
    "driver-version-mismatch": ("healthy", {"STACK-DRV-002"}, "driver"),
    "gfd-absent": ("healthy", {"STACK-GFD-001", "STACK-GFD-002", "SCHED-PLACE-001"},
                   "Feature Discovery"),
    "gfd-label-wrong": ("healthy", {"STACK-GFD-003", "STACK-DP-003"}, "GPU Feature Discovery"),
    "time-slicing-replicas-mislabelled": ("time-slicing", {"SHARE-LBL-001", "STACK-GFD-003"},
                                          "sharing labels"),
    "operand-crashloop": ("healthy", {"STACK-DCGM-001", "STACK-OPD-002"}, "DCGM"),
    "clusterpolicy-notready": ("healthy", {"STACK-OP-002"}, "ClusterPolicy"),
    "gpu-node-taint-missing-toleration": ("healthy", {"SCHED-TAINT-001", "STACK-DP-001"},
                                          "taint"),
    "wrong-gpu-type-label": ("heterogeneous", {"SCHED-PLACE-001", "STACK-GFD-003"},
                             "wrong GPU type"),
}
# Reconcile faults break the operator's reaction to changes; the disruptive operations suite
# catches them (tests/integration/test_operations.py).
NOT_STATIC = {"standin-ignores-changes"}


def test_every_fault_has_an_expectation():
    assert set(EXPECTED) | NOT_STATIC == {f.name for f in FAULTS}


@pytest.mark.parametrize("profile", [p for p in profiles.PROFILES if p != "large"])
def test_suites_pass_on_healthy_profile(profile, sim, sim_state, tmp_path):
    sim_state(profile)
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, *SUITES)
    assert verdicts(doc, "fail") == set(), out[-3000:]
    assert code == 0, out[-3000:]
    assert len(verdicts(doc, "pass")) >= 20  # the run checked things; it did not skip its way


@pytest.mark.parametrize("fault", sorted(EXPECTED))
def test_fault_fails_the_right_requirements(fault, sim, sim_cluster, sim_state, tmp_path):
    profile, must_fail, layer_word = EXPECTED[fault]
    sim_state(profile, [fault])
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, *SUITES)
    failed = verdicts(doc, "fail")
    assert must_fail <= failed, f"{fault}: expected {sorted(must_fail)} to fail, got " \
                                f"{sorted(failed)}\n{out[-2000:]}"
    assert code == 1
    rows = {r["id"]: r for r in doc["requirements"]}
    diagnoses = " ".join(rows[i]["diagnosis"] + " " + rows[i]["message"] for i in must_fail)
    assert layer_word.lower() in diagnoses.lower(), diagnoses
    failing = [rows[i] for i in must_fail]
    assert all(r["evidence"] for r in failing), "a failing check attached no evidence"
    assert leftover_namespaces(sim_cluster) == [], "failing checks left test namespaces behind"


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
