"""Stack / operator: the GPU Operator runs and its ClusterPolicy is ready.

Checklist (gpu-operator tests/scripts/verify-operator.sh, tests/e2e/suites/clusterpolicy_test.go):
- STACK-OP-001 the operator Deployment is available
- STACK-OP-002 the ClusterPolicy exists and status.state is ready (the not-ready states listed);
  not applicable where the operator runs a GPUCluster instead (DRA-OP-001 checks that one)
- STACK-OP-003 the Helm release is deployed, when this run installed it
"""

from __future__ import annotations

import pytest

from conformance.cluster import evidence as ev
from conformance.nvidia import clusterpolicy
from conformance.nvidia import labels as L
from conformance.plugin.api import not_applicable


@pytest.mark.requirement("STACK-OP-001")
def test_operator_deployment_available(cluster, require_operator, attachments):
    deployments = require_operator.operator_deployments
    assert deployments, (f"no GPU Operator Deployment ({L.OPERATOR_SELECTOR}) in any namespace, "
                         "although its ClusterPolicy or node labels are there: the operator "
                         "was removed or never started")
    dep = deployments[0]
    ns = dep.metadata.namespace
    attachments.append(ev.Evidence("operator-deployment.yaml", ev.to_yaml(dep)))
    attachments.append(ev.Evidence("operator-events.txt", ev.events_text(cluster, ns)))
    available = {c.type: c.status for c in (dep.status.conditions or [])}.get("Available")
    ready = dep.status.ready_replicas or 0
    assert available == "True" and ready >= 1, (
        f"Deployment {ns}/{dep.metadata.name} is not available "
        f"({ready}/{dep.spec.replicas} replicas ready, Available={available})")


@pytest.mark.requirement("STACK-OP-002")
def test_cluster_policy_ready(require_operator, cluster_policy, attachments):
    if require_operator.runs_gpucluster:
        not_applicable("the operator runs a GPUCluster (the DRA stack), not a ClusterPolicy: "
                       "the two exclude each other; DRA-OP-001 checks the GPUCluster")
    assert cluster_policy is not None, (
        "no ClusterPolicy (nvidia.com/v1): the operator was installed without one, or its CRD "
        "is missing")
    attachments.append(ev.Evidence("clusterpolicy.yaml", ev.to_yaml(dict(cluster_policy.doc))))
    not_ready = cluster_policy.not_ready_conditions()
    assert cluster_policy.state == clusterpolicy.READY, (
        f"ClusterPolicy {cluster_policy.name} status.state is {cluster_policy.state!r}, not "
        f"'ready'" + (f"; not ready: {'; '.join(not_ready)}" if not_ready else ""))


@pytest.mark.requirement("STACK-OP-003")
def test_helm_release_deployed(cluster, gpu_env):
    release = gpu_env.options.helm_release
    if not release:
        not_applicable("the operator was not installed by this run (--install-operator)")
    ns = gpu_env.options.operator_namespace
    secrets = cluster.core.list_namespaced_secret(
        ns, label_selector=f"owner=helm,name={release}").items
    assert secrets, f"no Helm release record for {release} in {ns}"
    statuses = {s.metadata.labels.get("status") for s in secrets}
    assert "deployed" in statuses, f"Helm release {release} is {sorted(statuses)}, not deployed"
