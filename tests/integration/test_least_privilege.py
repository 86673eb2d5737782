"""The suite runs as a ServiceAccount bound to exactly the shipped role (no 403 during the run),
cannot read Secrets or write outside its own namespaces, and no token leaks into any output."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from conformance.cluster import rbac
from conformance.cluster.client import connect
from tests.helpers import run_suites, verdicts

SUITES = ("stack", "scheduling", "sharing")


@pytest.fixture(scope="module")
def sa_kubeconfig(sim, sim_cluster, tmp_path_factory):
    said: list[str] = []
    rbac.apply(sim_cluster, said.append)
    # apply returns once the API server enforces the policy (it loads it a moment later)
    assert said[-1] == "policy in force: a Pod outside its namespaces is refused", said
    return rbac.service_account_kubeconfig(sim_cluster, tmp_path_factory.mktemp("sa") / "kc")


def test_whole_suite_runs_as_the_service_account_without_403(sa_kubeconfig, sim_state,
                                                             tmp_path):
    sim_state("time-slicing")  # exercises the sharing checks too
    code, doc, out = run_suites(sa_kubeconfig, tmp_path, *SUITES)
    assert "403" not in out and "Forbidden" not in out, out[-3000:]
    assert code == 0, out[-3000:]
    assert verdicts(doc, "fail") == set()
    assert len(verdicts(doc, "pass")) >= 20


def test_gang_checks_run_as_the_service_account(sa_kubeconfig, sim_state, tmp_path):
    """Jobs and a LocalQueue in its own namespace, the platform's ClusterQueue read only."""
    sim_state("gang-kueue")
    code, doc, out = run_suites(sa_kubeconfig, tmp_path, "scheduling/test_gang.py")
    assert "403" not in out and "Forbidden" not in out, out[-3000:]
    assert verdicts(doc, "pass") >= {"SCHED-GANG-001", "SCHED-GANG-002"} and code == 0, \
        out[-3000:]


def test_autoscaling_check_and_its_cleanup_run_as_the_service_account(sa_kubeconfig, sim_state,
                                                                     sim_cluster, tmp_path):
    """Karpenter's NodePool read, the pool grown, and (scale-down disabled) the node it added
    removed by deleting its NodeClaim: all within the role; the failure's evidence too."""
    sim_state("autoscaling-karpenter", ["autoscaling-scale-down-disabled"])
    code, doc, out = run_suites(sa_kubeconfig, tmp_path, "scheduling/test_autoscaling.py")
    assert "403" not in out and "Forbidden" not in out, out[-3000:]
    assert verdicts(doc, "fail") == {"SCHED-AUTOSCALE-001"} and code == 1, out[-3000:]
    row = next(r for r in doc["requirements"] if r["id"] == "SCHED-AUTOSCALE-001")
    assert row["message"].startswith("scale-down disabled"), row["message"]
    assert "autoscaler.yaml" in {e["name"] for e in row["evidence"]}
    assert sim_cluster.core.list_node(label_selector="karpenter.sh/nodepool").items == []


def test_pod_autoscaling_checks_run_as_the_service_account(sa_kubeconfig, sim_state, tmp_path):
    """A Deployment and its HPA in its own namespace, the metric written through the test
    adapter's Service proxy (that port only), the custom metrics API read only."""
    sim_state("pod-autoscaling")
    code, doc, out = run_suites(sa_kubeconfig, tmp_path, "scheduling/test_pod_autoscaling.py")
    assert "403" not in out and "Forbidden" not in out, out[-3000:]
    assert verdicts(doc, "pass") >= {"SCHED-HPA-001", "SCHED-HPA-002"} and code == 0, \
        out[-3000:]


def test_service_account_cannot_read_secrets(sa_kubeconfig):
    cluster = connect(str(sa_kubeconfig))
    with pytest.raises(ApiException) as refused:
        cluster.core.list_namespaced_secret("kube-system")
    assert refused.value.status == 403


def test_service_account_cannot_write_outside_its_namespaces(sa_kubeconfig):
    cluster = connect(str(sa_kubeconfig))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "intruder"},
           "spec": {"containers": [{"name": "c", "image": "x"}]}}
    with pytest.raises(ApiException) as refused:
        cluster.core.create_namespaced_pod("default", pod, dry_run="All")
    assert refused.value.status in (403, 422), refused.value.body
    assert "own labelled namespaces" in refused.value.body
    with pytest.raises(ApiException) as refused_ns:
        cluster.core.create_namespace({"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": "not-ours"}}, dry_run="All")
    assert refused_ns.value.status in (403, 422)
    with pytest.raises(ApiException) as refused_patch:
        cluster.custom.patch_cluster_custom_object("nvidia.com", "v1", "clusterpolicies",
                                                   "cluster-policy", {"metadata": {}})
    assert refused_patch.value.status == 403


def test_planted_token_appears_in_no_output(sim, sim_cluster, sim_state, tmp_path):
    """A token in an operand's annotations, dumped as failure evidence, is redacted everywhere."""
    token = ("eyJhbGciOiJSUzI1NiIsImtpZCI6InBsYW50ZWQifQ.eyJzdWIiOiJzeXN0ZW06cGxhbnRlZCJ9."
             "cGxhbnRlZC1zaWduYXR1cmUtdGhhdC1tdXN0LW5vdC1sZWFr")
    sim_state("healthy", ["operand-crashloop"])
    sim_cluster.apps.patch_namespaced_daemon_set(
        "nvidia-dcgm-exporter", "gpu-operator",
        {"metadata": {"annotations": {"example.com/token": token}}})
    _code, doc, out = run_suites(sim.kubeconfig, tmp_path, "stack",
                                extra=[f"--junitxml={tmp_path / 'junit.xml'}",
                                       f"--alluredir={tmp_path / 'allure'}"])
    assert "STACK-DCGM-001" in verdicts(doc, "fail")
    dumped = json.dumps(doc)
    assert "example.com/token" in dumped, "the evidence did not include the planted object"
    from conformance.report.build import build_report

    build_report(doc, tmp_path / "report")
    leaks = [str(p) for p in tmp_path.rglob("*") if p.is_file()
             and token in p.read_text(errors="replace")]
    assert token not in out
    assert not leaks, f"the planted token leaked into {leaks}"
