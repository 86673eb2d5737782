"""The GPU Operator stand-in: writes what the operator, device plugin and GFD would write.

What to write is worked out in ``operator_plan`` (from the profile and faults alone); the
stand-in writes it through the real API server only, one module per job:

- this module, ``reconcile``: apply a profile and its faults (``gpuconf sim up`` / ``sim set``);
  idempotent;
- ``standin_state``: the chosen state in the cluster, and the handshake with the loop;
- ``node_objects``: the GPU nodes (labels, taints, capacity/allocatable);
- ``operator_objects``: the operator namespace and Deployment, the ClusterPolicy (upstream CRD
  when the chart is at hand), operand DaemonSets with upstream names, ``app`` labels and
  ``nvidia.com/gpu.deploy.*`` node selectors (rolled out onto KWOK nodes by the real DaemonSet
  controller) and the device plugin's sharing ConfigMap; ``plugin_chart`` and ``gpucluster``
  the same for the profiles without a ClusterPolicy;
- ``controller``: one pass of the controller loop, which plays the operator's reaction to
  ClusterPolicy and node-label changes and the device plugin's admission check;
- ``loop``: that loop as a process (``python -m conformance.sim.loop``).

Faults from ``faults.py`` change what is written.
"""

from __future__ import annotations

from conformance.cluster.client import Cluster
from conformance.common.console import Progress
from conformance.sim import (
    dra,
    foreign_objects,
    gpucluster,
    karpenter,
    kueue,
    node_objects,
    objects,
    operator_objects,
    plugin_chart,
    standin_state,
)
from conformance.sim.faults import validate as validate_faults
from conformance.sim.objects import STANDIN_LABEL
from conformance.sim.operator_plan import SimState, plan_nodes, seeded_source


def reconcile(cluster: Cluster, state: SimState, *, chart: str | None = None,
              progress: Progress = lambda _m: None, nodes: bool = True) -> None:
    validate_faults(state.faults)
    profile = state.resolve_profile()
    standin_state.save_state(cluster, state)
    seed = seeded_source(state)
    plan = plan_nodes(state, seed, node_objects.node_labels(cluster))
    operator = profile.runs_cluster_policy
    if nodes:
        progress(f"writing {state.profile} nodes")
        node_objects.apply_nodes(cluster, plan.nodes, operator=operator)
    dra.reconcile(cluster, state, progress)  # the NVIDIA DRA driver, whoever runs the stack
    kueue.reconcile(cluster, state, progress)  # Kueue's CRDs and queue (its process: cluster.py)
    karpenter.reconcile(cluster, state, progress)  # its CRDs and NodePool (process: cluster.py)
    if gpucluster.wanted(profile):  # the operator runs a GPUCluster, not a ClusterPolicy
        operator_objects.remove_operator(cluster, state, keep_deployment=True)
        plugin_chart.remove(cluster)
        objects.ensure_namespace(cluster, state.operator_namespace, {STANDIN_LABEL: "true"})
        operator_objects.ensure_operator(cluster, state)
        gpucluster.reconcile(cluster, state, chart, progress)
        return
    gpucluster.remove(cluster, state)
    if state.operator == "chart":
        # The chart brings the namespace, CRD, operator Deployment and ClusterPolicy; the
        # controller loop plays the operator once they exist.
        return
    if operator:
        plugin_chart.remove(cluster)  # a `sim set` from a profile without the operator
        objects.ensure_namespace(cluster, state.operator_namespace, {STANDIN_LABEL: "true"})
        operator_objects.ensure_crd(cluster, chart, progress)
        spec = operator_objects.ensure_cluster_policy(cluster, state)
        operator_objects.ensure_operator(cluster, state)
        operator_objects.ensure_sharing_config(cluster, state)
        operator_objects.apply_daemonsets(cluster, state, spec, plugin_refuses=bool(plan.refused))
        operator_objects.set_cluster_policy_status(cluster, state)
    else:
        # a `sim set` from a profile with the operator
        operator_objects.remove_operator(cluster, state)
        plugin_chart.apply(cluster, seed, crashloop=bool(plan.refused), write_config=True)
    foreign_objects.ensure_request_rewriter(cluster, state.has("gpu-request-rewriter"))
    foreign_objects.ensure_unpinned_workload(cluster, state.has("unpinned-gpu-workload"))
    foreign_objects.ensure_gpu_holder(
        cluster, profile.physical_gpus - 1 if state.has("hpa-gpus-held") else 0)
