"""DRA / the GPU Operator's GPUCluster (v26.7.0, tech preview): checked like ClusterPolicy.

Checklist (gpu-operator v26.7.0: api/nvidia/v1alpha1/gpucluster_types.go, controllers/
gpucluster_controller.go, manifests/state-dra-driver and state-dra-validation; the chart's
validations.yaml makes ClusterPolicy and GPUCluster mutually exclusive):
- DRA-OP-001 the GPUCluster's status.state is ready, and each operand it enables runs on every
  GPU node it serves (nvidia.com/gpu.deploy.<operand>=true): the DRA kubelet plugin, DCGM (when
  spec.dcgm.enabled), the DCGM exporter, the DRA validator; the compute-domain controller
  Deployment is available when spec.draDriver.computeDomains.enabled
"""

from __future__ import annotations

import pytest

from conformance.checks import dra as rules
from conformance.checks import rollout
from conformance.cluster import evidence as ev
from conformance.nvidia import dra
from conformance.plugin.api import finding, not_applicable


@pytest.mark.requirement("DRA-OP-001")
def test_gpucluster_ready_and_operands_rolled_out(request, cluster, dra_view, gpu_nodes,
                                                  cluster_policy, gpu_env, attachments):
    obj = dra_view.gpucluster
    if obj is None:
        not_applicable("no GPUCluster (nvidia.com/v1alpha1): "
                       + ("its CRD is installed but no GPUCluster exists"
                          if dra_view.gpucluster_crd else "the GPUCluster CRD is not installed")
                       + ("; a ClusterPolicy manages the GPU stack" if cluster_policy
                          else ""))
    attachments.append(ev.Evidence("gpucluster.yaml", ev.to_yaml(obj)))
    problems = rules.gpucluster_problems(obj)
    ns = (obj.get("status") or {}).get("namespace") or gpu_env.options.operator_namespace
    served = [n for n in gpu_nodes if rules.serving_stack(
        n, cluster_policy=cluster_policy is not None, gpu_cluster=True) == rules.GPU_CLUSTER]
    dss = {d.metadata.name: d for d in cluster.apps.list_namespaced_daemon_set(ns).items}
    deps = {d.metadata.name: d for d in cluster.apps.list_namespaced_deployment(ns).items}
    pods_by_app: dict[str, list] = {}
    for pod in cluster.core.list_namespaced_pod(ns).items:
        pods_by_app.setdefault((pod.metadata.labels or {}).get("app"), []).append(pod)
    spec = obj.get("spec") or {}
    checked = []
    for op in dra.GPUCLUSTER_OPERANDS:
        if not op.enabled(spec):
            continue
        checked.append(op.name)
        if op.kind == "Deployment":
            dep = deps.get(op.name)
            if dep is None or not (dep.status.available_replicas or 0):
                problems.append(f"Deployment {ns}/{op.name} is "
                                + ("missing" if dep is None else "not available"))
            continue
        nodes = [n.name for n in served if n.label(op.deploy_label or "") != "false"]
        pods = [p for p in pods_by_app.get(op.app, []) if any(
            o.name == op.name for o in p.metadata.owner_references or [])]
        result = rollout.rollout(pods, nodes, found=op.name in dss)
        if not result.daemonset_found:
            problems.append(f"DaemonSet {ns}/{op.name} is missing ({len(nodes)} node(s) need it)")
        elif result.missing or result.not_ready:
            problems.append(f"{op.name}: no pod on {', '.join(result.missing[:5]) or 'none'}, "
                            f"not Ready on {', '.join(result.not_ready[:5]) or 'none'}")
    assert not problems, "the GPUCluster stack is not ready: " + "; ".join(problems)
    finding(request, f"GPUCluster ready, serving {len(served)} node(s); operands rolled out: "
                     f"{', '.join(checked)}")
