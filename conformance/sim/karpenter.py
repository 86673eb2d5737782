"""Karpenter in the sim (profiles with ``autoscaler="karpenter"``): the real Karpenter with its
KWOK cloud provider as a process of the control plane (``controlplane/karpenter.py``), its CRDs
from its module, and what a platform team would set up: one KWOKNodeClass and one NodePool
that may launch the profile's ``autoscaled`` instance types, empty nodes removed at once
(``consolidateAfter: 0s``, as fast as Karpenter's disruption loop goes).

Karpenter's KWOK provider creates a launched node with the instance type's capacity and the
NodeClaim's labels; the sim's KWOK makes it Ready. What a GPU node has besides (GFD's and the
operator's labels, the device plugin's capacity, and so the operand DaemonSets' pods, the
device plugin among them) the stand-in's controller loop writes on it, from the instance
type's node group, as on every other GPU node (``control_once``; ``gfd.py`` holds the facts).

Faults: ``autoscaling-no-gpu-instance-types`` limits the NodePool to the instance types without
a GPU; ``autoscaling-scale-down-disabled`` sets its ``consolidateAfter`` to ``Never``.
"""

from __future__ import annotations

import json
from pathlib import Path

from conformance.binaries import binaries
from conformance.checks.autoscaling import (
    KARPENTER,
    KARPENTER_GROUP,
    KARPENTER_VERSION,
    NEVER,
    NODEPOOL_LABEL,
)
from conformance.cluster.client import Cluster, NotFound, already_done
from conformance.common.console import Progress
from conformance.controlplane import karpenter as karpenter_process
from conformance.controlplane.components import ClusterState, ControlPlane
from conformance.nvidia.labels import GPU_RESOURCE
from conformance.sim import gfd, node_objects, objects
from conformance.sim.operator_plan import NodePlan, SimState
from conformance.sim.profiles import NodeGroup, Profile

NODEPOOL = "gpuconf-gpu"
NODECLASS = "gpuconf"
KWOK_GROUP, KWOK_VERSION = "karpenter.kwok.sh", "v1alpha1"
# the groups of the CRDs the build carries (kwok/charts/crds, kwok/apis/crds)
CRD_GROUPS = (KARPENTER_GROUP, KWOK_GROUP, "autoscaling.x-k8s.io")
NO_GPU_TYPES = "autoscaling-no-gpu-instance-types"
SCALE_DOWN_DISABLED = "autoscaling-scale-down-disabled"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ZONE = "sim-zone-a"
GPU_LIMIT = 4  # the NodePool's nvidia.com/gpu limit: room for the check's node, and a bound


def wanted(profile: Profile) -> bool:
    return profile.autoscaler == KARPENTER


def instance_types(profile: Profile) -> list[dict]:
    """The KWOK provider's instance types (kwok/cloudprovider/helpers.go InstanceTypeOptions):
    one per autoscaled group, named by its machine type, with the capacity the stand-in gives
    such a node; on demand, in one zone, priced by its GPUs and CPUs."""
    return [{"name": g.machine_type, "architecture": "amd64", "operatingSystems": ["linux"],
             "resources": gfd.advertised_resources(g),
             "offerings": [{"Price": round(3.0 * g.gpus_per_node + 0.05 * g.cpu, 3),
                            "Available": True, "Requirements": [
                                {"key": "karpenter.sh/capacity-type", "operator": "In",
                                 "values": ["on-demand"]},
                                {"key": "topology.kubernetes.io/zone", "operator": "In",
                                 "values": [ZONE]}]}]}
            for g in profile.autoscaled]


def nodepool_spec(state: SimState) -> dict:
    profile = state.resolve_profile()
    requirements = [{"key": "karpenter.sh/capacity-type", "operator": "In",
                     "values": ["on-demand"]}]
    if state.has(NO_GPU_TYPES):
        requirements.append({"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": [
            g.machine_type for g in profile.autoscaled if not g.is_gpu]})
    return {
        "template": {"spec": {
            "nodeClassRef": {"group": KWOK_GROUP, "kind": "KWOKNodeClass", "name": NODECLASS},
            "requirements": requirements, "expireAfter": NEVER}},
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                       "consolidateAfter": NEVER if state.has(SCALE_DOWN_DISABLED) else "0s",
                       "budgets": [{"nodes": "100%"}]},
        "limits": {GPU_RESOURCE: str(GPU_LIMIT)},
    }


def reconcile(cluster: Cluster, state: SimState, progress: Progress) -> None:
    """Karpenter's CRDs, NodeClass and NodePool for a Karpenter profile; none of them (nor
    the nodes it launched) otherwise."""
    if not wanted(state.resolve_profile()):
        remove(cluster)
        return
    objects.install_crd_files(cluster, binaries.require_karpenter().crds, "Karpenter", progress)
    objects.apply_cluster_object(cluster, KWOK_GROUP, KWOK_VERSION, "kwoknodeclasses",
                                 "KWOKNodeClass", NODECLASS, {})
    objects.apply_cluster_object(cluster, KARPENTER_GROUP, KARPENTER_VERSION, "nodepools",
                                 "NodePool", NODEPOOL, nodepool_spec(state))


def remove(cluster: Cluster) -> None:
    """The nodes Karpenter launched (their termination finalizer dropped: Karpenter may be
    stopping) and every Karpenter CRD, so every NodePool and NodeClaim."""
    for node in cluster.core.list_node(label_selector=NODEPOOL_LABEL).items:
        with already_done(NotFound):
            cluster.core.patch_node(node.metadata.name, {"metadata": {"finalizers": None}})
            cluster.core.delete_node(node.metadata.name)
    objects.remove_crds(cluster, CRD_GROUPS, "Karpenter")


def ensure_process(state: ClusterState, sim_state: SimState, progress: Progress) -> None:
    """Karpenter running where the profile wants it, with the profile's instance types;
    stopped otherwise."""
    profile = sim_state.resolve_profile()
    if wanted(profile):  # read when Karpenter starts
        path = karpenter_process.instance_types_file(Path(state.folder))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(instance_types(profile), indent=2))
    ControlPlane(state.name).run_or_stop(state, karpenter_process.COMPONENT, wanted(profile),
                                         lambda: binaries.require_karpenter().manager, progress)


def _group_of(profile: Profile, node) -> NodeGroup | None:
    instance_type = (node.metadata.labels or {}).get(INSTANCE_TYPE_LABEL)
    return next((g for g in profile.autoscaled if g.machine_type == instance_type), None)


def control_once(cluster: Cluster, state: SimState) -> None:
    """Each node Karpenter launched made the GPU node its instance type is: the labels and
    capacity the stand-in gives a node of that group (its other labels and taints, Karpenter's,
    left alone)."""
    profile = state.resolve_profile()
    if not wanted(profile):
        return
    for node in cluster.core.list_node(label_selector=NODEPOOL_LABEL).items:
        group = _group_of(profile, node)
        if group is None or not group.is_gpu or node.metadata.deletion_timestamp:
            continue
        labels = gfd.labels_of(group, operator=profile.runs_cluster_policy)
        current = node.metadata.labels or {}
        patch = {k: v for k, v in labels.items() if current.get(k) != v}
        with already_done(NotFound):
            if patch:
                cluster.core.patch_node(node.metadata.name, {"metadata": {"labels": patch}})
            plan = NodePlan(node.metadata.name, labels, [], gfd.advertised_resources(group),
                            True)
            status = node_objects.status_change(plan, node)
            if status:
                cluster.core.patch_node_status(node.metadata.name, {"status": status})
