"""DRA / extended resources: nvidia.com/gpu served through DRA, and never through both paths.

Checklist (KEP-5004 DRAExtendedResource, beta and on by default in 1.36; the driver's bats
test_gpu_extres.bats; its chart's validation.yaml refuses GPUs beside the device plugin unless
gpuResourcesEnabledOverride; NVIDIA/aicr#332 over-admission):
- DRA-ER-001 a pod asking nvidia.com/gpu: 1 on a node that the DRA driver alone serves is
  scheduled there through a claim the scheduler creates (annotated
  resource.kubernetes.io/extended-resource-claim), allocated from that node and reserved for the
  pod; where a DeviceClass maps nvidia.com/gpu and the API server's gate is on
- DRA-ER-002 no node advertises nvidia.com/gpu through the device plugin while the DRA driver
  offers its GPUs too; the per-node allocation path and serving stack are the evidence
"""

from __future__ import annotations

import pytest

from conformance.checks import dra as rules
from conformance.cluster import dra as cluster_dra
from conformance.cluster import evidence as ev
from conformance.nvidia import dra
from conformance.plugin.api import finding, not_applicable, own_namespace

GATE = "DRAExtendedResource"


@pytest.mark.requirement("DRA-ER-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_extended_resource_is_served_through_a_claim(request, cluster, gpu_env, require_dra,
                                                     targets, attachments):
    mapped = rules.extended_resource_classes(require_dra.classes)
    if not mapped:
        not_applicable(f"no DeviceClass maps {dra.EXTENDED_RESOURCE} (extendedResourceName): "
                       "the driver's chart sets it on gpu.nvidia.com when it renders "
                       f"{dra.RESOURCE_API}; the GPUCluster's DeviceClass does not")
    if require_dra.gates is not None and not require_dra.gates.get(GATE):
        not_applicable(f"the API server's {GATE} feature gate is off (beta and on by default "
                       "from 1.36)")
    target = next((t for t in targets if t.device_class == dra.GPU_CLASS.name), None)
    if target is None:
        not_applicable("no node served by DRA alone has a free whole GPU")
    namespace = own_namespace(request)
    pod = cluster_dra.create_claim_pod(cluster, namespace, "extres", gpu_env.run_id, gpus=1,
                                       node=target.node.name)
    node, reason = cluster_dra.place(cluster, namespace, pod)
    attachments.append(ev.Evidence("resourceclaims.yaml",
                                ev.to_yaml(cluster_dra.list_claims(cluster, namespace))))
    assert node, (f"a pod asking {dra.EXTENDED_RESOURCE}: 1 on DRA node {target.node.name} was "
                  f"not scheduled: {reason}" + require_dra.class_hint())
    claims = cluster_dra.wait_allocated(cluster, namespace, pod)
    made = [c for c in claims if dra.EXTENDED_RESOURCE_CLAIM_ANNOTATION in (
        (c.get("metadata") or {}).get("annotations") or {})]
    assert made, (f"the pod holds no claim annotated {dra.EXTENDED_RESOURCE_CLAIM_ANNOTATION}: "
                  f"the scheduler did not serve {dra.EXTENDED_RESOURCE} through DRA")
    devices = cluster_dra.devices_of(made)
    pools = {p.name: p.node for p in require_dra.pools}
    assert len(devices) == 1 and pools.get(devices[0][0]) == node, (
        f"the scheduler's claim holds {devices}, expected one device of {node}'s pool")
    finding(request, f"{dra.EXTENDED_RESOURCE}: 1 on {node} served by claim "
                     f"{made[0]['metadata']['name']} ({devices[0][0]}/{devices[0][1]}) through "
                     f"{', '.join(mapped)}")


@pytest.mark.requirement("DRA-ER-002")
def test_no_node_offers_gpus_through_both_paths(request, require_dra, require_gpu_nodes,
                                                allocation_paths, cluster_policy, attachments):
    by_node = require_dra.pools_by_node()
    stacks = {n.name: rules.serving_stack(n, cluster_policy=cluster_policy is not None,
                                          gpu_cluster=require_dra.gpucluster is not None)
              for n in require_gpu_nodes}
    attachments.append(ev.Evidence("allocation-paths.txt", "\n".join(
        f"{n.name}: path={allocation_paths.get(n.name)} stack={stacks[n.name]} "
        f"capacity={ {k: v for k, v in n.capacity.items() if k.startswith('nvidia.com/')} } "
        f"devices={sum(len(p.devices) for p in by_node.get(n.name, []))}"
        for n in require_gpu_nodes)))
    doubled = [d for n in require_gpu_nodes if (d := rules.both_paths(
        n, sum(len(p.devices) for p in by_node.get(n.name, []))))]
    assert not doubled, (f"{len(doubled)} node(s) offer their GPUs through both paths: "
                         + "; ".join(doubled[:10]))
    counts: dict[str, int] = {}
    for path in allocation_paths.values():
        counts[path] = counts.get(path, 0) + 1
    finding(request, "allocation paths: " + ", ".join(f"{k} {v}" for k, v in
                                                     sorted(counts.items())))
