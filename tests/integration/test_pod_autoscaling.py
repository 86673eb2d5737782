"""Pod autoscaling on the sim with the real HPA (kube-controller-manager) and the real custom
metrics API (custom-metrics-apiserver v1.37.0's test adapter, profile pod-autoscaling): both
checks pass, the CNCF item pod_autoscaling reads Implemented, the checks stay under a minute,
and they are not-applicable where no custom metrics API is registered. hpa-gpus-held is in the
fault matrix (test_fault_matrix.py); hpa-metrics-api-down is here: it fails both checks, and
stalls every namespace deletion while the API is down (real Kubernetes behaviour), so it runs
the pod-autoscaling checks alone and proves their namespaces go once the adapter is back."""

from __future__ import annotations

from conformance.cluster.namespaces import leftover_namespaces
from conformance.cluster.waits import wait_for
from conformance.report import cncf
from conformance.sim.faults import BY_NAME
from tests.helpers import assert_fails_exactly, cncf_item, run_suites, seconds_took, verdicts

HPA = {"SCHED-HPA-001", "SCHED-HPA-002"}
HPA_CHECKS_BUDGET_S = 60.0  # the 3 minutes for gang, cluster and pod autoscaling
NAMESPACES_RESUME_S = 60.0  # the namespace controller retries a stalled deletion with backoff


def test_hpa_checks_pass_on_the_test_adapter_and_the_cncf_item_is_implemented(
        sim, sim_cluster, sim_state, tmp_path):
    sim_state("pod-autoscaling")
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, "scheduling/test_pod_autoscaling.py")
    assert verdicts(doc, "pass") == HPA and code == 0, out[-3000:]
    assert cncf_item(doc, "pod_autoscaling")["status"] == cncf.IMPLEMENTED
    rows = {r["id"]: r for r in doc["requirements"]}
    assert "scaled a GPU Deployment from 1 to 3 replicas" in rows["SCHED-HPA-001"]["message"]
    assert "stabilization window" in rows["SCHED-HPA-002"]["message"]
    took = seconds_took(doc, HPA)
    assert took < HPA_CHECKS_BUDGET_S, f"the pod-autoscaling checks took {took:.1f}s"
    assert leftover_namespaces(sim_cluster) == []


def test_hpa_checks_are_not_applicable_without_a_custom_metrics_api(sim, sim_state, tmp_path):
    sim_state("healthy")
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, "scheduling/test_pod_autoscaling.py")
    assert verdicts(doc, "not-applicable") >= HPA and code == 0, out[-3000:]
    rows = {r["id"]: r for r in doc["requirements"]}
    assert "no custom metrics API" in rows["SCHED-HPA-001"]["message"]
    assert cncf_item(doc, "pod_autoscaling")["status"] == cncf.NOT_APPLICABLE


def test_metrics_api_down_fails_both_and_stalls_namespace_deletion(sim, sim_cluster, sim_state,
                                                                    tmp_path):
    fault = BY_NAME["hpa-metrics-api-down"]
    sim_state(fault.profile, [fault.name])
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, *fault.suites)
    assert_fails_exactly(fault.name, code, doc, out, set(fault.fails), fault.word, sim_cluster,
                         namespaces_left=True)
    stalled = leftover_namespaces(sim_cluster)
    assert stalled, "the checks' namespaces went although custom.metrics.k8s.io is down"
    conditions = " ".join(c.message or "" for name in stalled
                          for c in sim_cluster.core.read_namespace(name).status.conditions or [])
    assert "custom.metrics.k8s.io" in conditions, conditions
    sim_state(fault.profile)  # the adapter back: the namespace controller finishes
    wait_for("the stalled test namespaces to be deleted",
             lambda: not leftover_namespaces(sim_cluster), timeout=NAMESPACES_RESUME_S)
