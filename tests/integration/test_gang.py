"""Gang scheduling on the sim with the real Kueue (profile gang-kueue): both checks pass, the
CNCF item gang_scheduling reads Implemented, the checks stay under a minute, and they are
not-applicable where no gang scheduler runs. The faults that must fail them are in the fault
matrix (test_fault_matrix.py: gang-quota-overcommitted, gang-controller-down)."""

from __future__ import annotations

from conformance.cluster.namespaces import leftover_namespaces
from conformance.report import cncf
from tests.helpers import cncf_item, run_suites, seconds_took, verdicts

GANG = {"SCHED-GANG-001", "SCHED-GANG-002"}
GANG_CHECKS_BUDGET_S = 60.0  # the target for the gang checks on the 2-core sim


def test_gang_checks_pass_on_kueue_and_the_cncf_item_is_implemented(sim, sim_cluster,
                                                                    sim_state, tmp_path):
    sim_state("gang-kueue")
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, "scheduling/test_gang.py")
    assert verdicts(doc, "pass") == GANG and code == 0, out[-3000:]
    assert cncf_item(doc, "gang_scheduling")["status"] == cncf.IMPLEMENTED
    took = seconds_took(doc, GANG)
    assert took < GANG_CHECKS_BUDGET_S, f"the gang checks took {took:.1f}s"
    assert leftover_namespaces(sim_cluster) == []


def test_gang_checks_are_not_applicable_without_a_gang_scheduler(sim, sim_state, tmp_path):
    sim_state("healthy")
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, "scheduling/test_gang.py")
    assert verdicts(doc, "not-applicable") >= GANG and code == 0, out[-3000:]
    rows = {r["id"]: r for r in doc["requirements"]}
    assert "no gang scheduler" in rows["SCHED-GANG-001"]["message"]
    assert cncf_item(doc, "gang_scheduling")["status"] == cncf.NOT_APPLICABLE
