"""Scheduling / placement by GPU type through GFD labels.

Checklist (the design's "FP8 only on the new generation" exercise):
- SCHED-PLACE-001 a nodeSelector on nvidia.com/gpu.product lands only on that GPU type, and
  every node carrying that label is that GPU type by its other labels (compute capability,
  memory): the scheduler trusts the label
- SCHED-PLACE-002 node affinity nvidia.com/gpu.compute.major > 8 lands only on Hopper or newer
- SCHED-PLACE-003 on a cluster of several GPU types, running GPU workloads select one (a
  nodeSelector or affinity on GFD labels); the risk of unpinned pods is reported
"""

from __future__ import annotations

import pytest

from conformance.checks import gfd_consistency, placement
from conformance.cluster import evidence as ev
from conformance.cluster import namespaces, pods, views
from conformance.cluster.pods import PodSpec
from conformance.nvidia import labels as L
from conformance.plugin.api import finding, not_applicable

PODS_PER_TYPE = 3  # enough to see a spread across nodes, few enough to stay fast


def _pod_count(cluster, nodes, resource: str) -> int:
    """One-GPU pods to place: PODS_PER_TYPE, but no more than ``nodes`` have ``resource`` free
    to hand out (on a one-GPU node a second pod is Pending, not misplaced: SCHED-ALLOC-001's;
    GPUs other teams' pods hold are not free), and at least one (a type with none allocatable
    leaves it Pending: the check fails)."""
    in_use = pods.gpus_in_use_by_node(cluster)
    free = sum(max(n.main_resource[1] - in_use.get(n.name, {}).get(resource, 0), 0)
               for n in nodes if n.main_resource[0] == resource)
    return max(1, min(PODS_PER_TYPE, free))


def _products(nodes) -> dict[str, list]:
    out: dict[str, list] = {}
    for n in nodes:
        if n.label(L.PRODUCT):
            out.setdefault(n.label(L.PRODUCT), []).append(n)
    return out


@pytest.mark.requirement("SCHED-PLACE-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_product_selector_places_on_that_gpu_type(cluster, gpu_env, gpu_nodes,
                                                  require_device_plugin_nodes, namespace):
    products = _products(require_device_plugin_nodes)
    assert products, f"no GPU node carries {L.PRODUCT}: GFD labels are missing"
    # any GPU node: the DRA driver may serve nvidia.com/gpu too (DRAExtendedResource)
    by_name = {n.name: n for n in gpu_nodes}
    wrong = []
    for product, nodes in sorted(products.items())[:4]:
        resource = nodes[0].main_resource[0]
        assert resource is not None, (
            f"no {product} node advertises a GPU resource: a pod selecting that type would "
            "stay Pending (device plugin)")
        names = [pods.create(cluster, namespace, PodSpec("bytype", gpus=1, resource=resource,
                                                         node_selector={L.PRODUCT: product}),
                             gpu_env.run_id) for _ in range(_pod_count(cluster, nodes, resource))]
        for name in names:
            node = by_name.get(pods.wait_scheduled(cluster, namespace, name))
            if node is None or node.label(L.PRODUCT) != product:
                wrong.append(f"{name} selecting {product} landed on a node labelled "
                             f"{node.label(L.PRODUCT) if node else 'no GPU'}")
        # The scheduler trusts the label: every node carrying it is one a pod may land on next,
        # so each must be that GPU type by its other labels, not only those these pods hit.
        for node in nodes:
            contradictions = [p for p in gfd_consistency.inconsistencies(node)
                              if "wrong GPU type" in p]
            if contradictions:
                wrong.append(f"pods selecting {product} may land on {node.name}, which is not "
                             f"that GPU type: {contradictions[0]}")
    assert not wrong, "; ".join(wrong[:5])


@pytest.mark.requirement("SCHED-PLACE-002")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_compute_capability_affinity_places_on_new_generation(request, cluster, gpu_env, gpu_nodes,
                                                              require_device_plugin_nodes,
                                                              namespace):
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": L.COMPUTE_MAJOR, "operator": "Gt", "values": ["8"]}]}]}}}
    eligible = [n for n in require_device_plugin_nodes if (n.int_label(L.COMPUTE_MAJOR) or 0) >= 9]
    resource = (eligible or require_device_plugin_nodes)[0].main_resource[0]
    assert resource is not None, (
        "no GPU node advertises a GPU resource: FP8 pods would stay Pending (device plugin)")
    names = [pods.create(cluster, namespace, PodSpec("fp8", gpus=1, resource=resource,
                                                     affinity=affinity), gpu_env.run_id)
             for _ in range(_pod_count(cluster, eligible or require_device_plugin_nodes,
                                               resource))]
    if not eligible:
        reason = pods.wait_unschedulable(cluster, namespace, names[0])
        finding(request, f"no Hopper-or-newer GPU node: FP8 pods stay Pending ({reason})")
        return
    by_name = {n.name: n for n in gpu_nodes}  # the DRA driver may serve nvidia.com/gpu too
    landed = [by_name.get(pods.wait_scheduled(cluster, namespace, n)) for n in names]
    old = [n.name for n in landed if n is None or (_real_compute_major(n) or 0) < 9]
    assert not old, f"pods requiring compute.major > 8 landed on older GPUs: {old}"
    # The scheduler trusts the label; a node whose product is older would take them next.
    impostors = [f"{n.name} ({n.label(L.PRODUCT)} is compute {_real_compute_major(n)}.x)"
                 for n in eligible if (_real_compute_major(n) or 0) < 9]
    assert not impostors, ("nodes labelled compute.major >= 9 whose GPU is older would take "
                           f"FP8 pods: {', '.join(impostors[:5])}")


def _real_compute_major(node) -> int | None:
    """The compute capability the node's GPU model has (its label when the model is unknown)."""
    model = gfd_consistency.gpu_model(node)
    return model.compute_major if model else node.int_label(L.COMPUTE_MAJOR)


@pytest.mark.requirement("SCHED-PLACE-003")
def test_gpu_workloads_select_a_gpu_type(request, cluster, gpu_env, require_gpu_nodes,
                                         attachments):
    products = _products(require_gpu_nodes)
    if len(products) <= 1:
        not_applicable("one GPU type in the cluster: an unpinned GPU pod cannot land on the "
                       "wrong type")
    summary = ", ".join(f"{p} ({len(n)} node(s))" for p, n in sorted(products.items()))
    unpinned = placement.unpinned_gpu_pods(
        views.unfinished_pods(cluster), skip_namespaces={gpu_env.options.operator_namespace},
        skip_label=(namespaces.MANAGED_BY, namespaces.MANAGER))
    attachments.append(ev.Evidence("unpinned-gpu-pods.txt", "\n".join(unpinned) or "(none)"))
    assert not unpinned, (
        f"{len(unpinned)} GPU pod(s) select no GPU type on a cluster of {summary}: "
        f"{', '.join(unpinned[:5])} (add a nodeSelector on {L.PRODUCT} or an affinity on "
        f"{L.COMPUTE_MAJOR})")
    finding(request, f"heterogeneous cluster ({summary}): every running GPU workload selects "
                     f"a GPU type; a new one without a selector on {L.PRODUCT} or "
                     f"{L.COMPUTE_MAJOR} may land on any of them")
