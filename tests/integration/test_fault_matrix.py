"""The suites pass on every healthy profile and catch every fault under the right requirement.

This is how a check that cannot fail shows up: each fault of the sim's catalog
(``conformance/sim/faults.py``) names the requirements that must fail when it is injected and a
word the diagnoses must name (the faulty layer); this matrix plays every one of them.
"""

from __future__ import annotations

import pytest

from conformance.sim import faults, profiles
from tests.helpers import DRA_PROFILES, run_suites, run_with_fault, verdicts

SUITES = faults.SUITES
# The static faults a default run catches (DRA faults: test_dra.py; reconcile faults: the
# disruptive operations suite, test_operations.py). What each must fail is on the fault itself.
STATIC = sorted(f.name for f in faults.FAULTS if not f.reconcile and f.suites == SUITES)
_EVERY_STACK_PASSES = {"STACK-DP-001", "STACK-DP-002", "STACK-DRV-002",
                       "STACK-GFD-001", "STACK-GFD-002", "STACK-GFD-003", "STACK-OPD-002",
                       "SCHED-ALLOC-001", "SCHED-ALLOC-002", "SCHED-INT-001", "SCHED-INT-002",
                       "SCHED-LAT-001", "SCHED-PLACE-001", "SCHED-PLACE-002"}
_OPERATOR_PASSES = {"STACK-OP-001", "STACK-OP-002", "STACK-DRV-001", "STACK-TK-001",
                    "STACK-DCGM-001", "STACK-VAL-001"}


def test_every_fault_has_an_expectation():
    """Each fault says what it fails, or is a reconcile fault the operations suite catches."""
    silent = [f.name for f in faults.FAULTS if not f.reconcile and not (f.fails and f.word)]
    assert silent == []


def test_every_sim_check_is_proven_to_fail():
    """No check runs on the sim that no injected fault makes fail (a check that cannot fail)."""
    from conformance import catalog

    proven = set().union(*(f.fails for f in faults.FAULTS))
    proven |= {"STACK-OP-003"}  # test_helm_release_check_fails_for_a_missing_release
    proven |= {r.id for r in catalog.REQUIREMENTS if r.disruptive}  # test_operations.py
    # not run on the sim (its KWOK pods serve no HTTP): their faults are the real node's
    proven |= {"INF-MET-001"}  # tests/node/test_node_service_metrics.py
    proven |= {"INF-GW-001", "INF-GW-002"}  # tests/node/test_node_gateway.py
    proven |= {"INF-GW-003"}  # tests/integration/test_inference_pool.py
    unproven = {r.id for r in catalog.REQUIREMENTS if "sim" in r.targets} - proven
    # INF-GW-004 needs a Gateway implementation that routes to InferencePools (an ext-proc
    # data plane: Envoy, NGINX Gateway Fabric, agentgateway); none can be built here, so no
    # fault can be played on one: on the real node it is not applicable (Traefik refuses the
    # kind), proven by tests/node/test_node_gateway.py; README, "INF-GW-004".
    assert unproven == {"INF-GW-004"}


def test_helm_release_check_fails_for_a_missing_release(sim, sim_state, tmp_path):
    sim_state("healthy")
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, "stack/test_operator.py",
                                extra=["--helm-release=gpu-operator-gone"])
    assert verdicts(doc, "fail") == {"STACK-OP-003"} and code == 1, out[-2000:]
    row = next(r for r in doc["requirements"] if r["id"] == "STACK-OP-003")
    assert "no Helm release record for gpu-operator-gone" in row["message"]


# autoscaling-karpenter: test_autoscaling.py runs the suites on it (one run, not two)
@pytest.mark.parametrize("profile", [p for p in profiles.PROFILES if p != "large"
                                     and p not in DRA_PROFILES and p != "dra-large"
                                     and p != "autoscaling-karpenter"])
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


@pytest.mark.parametrize("fault", STATIC)
def test_fault_fails_the_right_requirements(fault, sim, sim_cluster, sim_state, tmp_path):
    run_with_fault(sim, sim_cluster, sim_state, tmp_path, faults.BY_NAME[fault])


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
