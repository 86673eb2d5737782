"""Cluster autoscaling on the sim with the real Karpenter (profile autoscaling-karpenter): the
check passes, the CNCF item cluster_autoscaling reads Implemented with the check's finding,
the check stays within its time budget and leaves no node behind (and the other checks pass
beside Karpenter), and it is not-applicable
where no node autoscaler runs. The faults that must fail it are in the fault matrix
(test_fault_matrix.py: autoscaling-no-gpu-instance-types, autoscaling-scale-down-disabled)."""

from __future__ import annotations

from conformance.cluster.namespaces import leftover_namespaces
from conformance.report import cncf
from conformance.sim import faults
from tests.helpers import run_suites, verdicts

CHECK = "SCHED-AUTOSCALE-001"
# scale-up in ~5 s, Karpenter's disruption loop removes the empty node ~30 s later (2 cores)
AUTOSCALING_CHECK_BUDGET_S = 75.0


def _item(doc: dict) -> dict:
    return next(i for i in cncf.rollup(doc["requirements"])["items"]
                if i["id"] == "cluster_autoscaling")


def test_autoscaling_check_passes_on_karpenter_and_the_cncf_item_is_implemented(
        sim, sim_cluster, sim_state, tmp_path):
    """The default suites, as test_fault_matrix.py's healthy-profile runs (this profile's
    is this one): all pass with Karpenter running, the autoscaling check among them."""
    sim_state("autoscaling-karpenter")
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, *faults.SUITES)
    assert verdicts(doc, "fail") == set() and code == 0, out[-3000:]
    assert CHECK in verdicts(doc, "pass"), out[-3000:]
    item = _item(doc)
    assert item["status"] == cncf.IMPLEMENTED
    row = next(r for r in doc["requirements"] if r["id"] == CHECK)
    assert "grew from 0 to 1 nodes" in row["message"] and "back to 0" in row["message"]
    took = sum(t["duration_s"] for t in row["tests"])
    assert took < AUTOSCALING_CHECK_BUDGET_S, f"the autoscaling check took {took:.1f}s"
    assert sim_cluster.core.list_node(label_selector="karpenter.sh/nodepool").items == []
    assert leftover_namespaces(sim_cluster) == []


def test_autoscaling_check_is_not_applicable_without_an_autoscaler(sim, sim_state, tmp_path):
    sim_state("healthy")
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, "scheduling/test_autoscaling.py")
    assert verdicts(doc, "not-applicable") == {CHECK} and code == 0, out[-3000:]
    row = next(r for r in doc["requirements"] if r["id"] == CHECK)
    assert "no cluster autoscaler" in row["message"]
    assert _item(doc)["status"] == cncf.NOT_APPLICABLE
