"""Kueue in the sim (profiles with ``gang="kueue"``): the real Kueue manager as a process of
the control plane (``controlplane/kueue.py``), its CRDs from its module, and what a platform
team would set up: one ResourceFlavor and one ClusterQueue, open to every namespace, whose
nvidia.com/gpu quota is the GPUs the profile's nodes have.

Faults: ``gang-quota-overcommitted`` sets that quota to twice the GPUs (Kueue admits gangs the
nodes cannot hold, and the scheduler places what fits); ``gang-controller-down`` leaves the
CRDs and queues but no Kueue process.
"""

from __future__ import annotations

import yaml

from conformance.binaries import binaries
from conformance.checks.gang import KUEUE_GROUP, KUEUE_VERSION
from conformance.cluster.client import Cluster, Conflict, NotFound, already_done
from conformance.cluster.waits import wait_for
from conformance.common import processes
from conformance.common.console import Progress
from conformance.controlplane import kueue as kueue_process
from conformance.controlplane.components import ClusterState, ControlPlane
from conformance.nvidia.labels import GPU_RESOURCE
from conformance.sim import objects
from conformance.sim.operator_plan import SimState
from conformance.sim.profiles import Profile

CLUSTER_QUEUE = "gpuconf-gpus"
FLAVOR = "gpuconf-gpu"
OVERCOMMITTED = "gang-quota-overcommitted"
CONTROLLER_DOWN = "gang-controller-down"
KUEUE = "kueue"
CRD_GONE_TIMEOUT_S = 30.0  # the API server removes a CRD and its objects in seconds


def wanted(profile: Profile) -> bool:
    return profile.gang == KUEUE


def gpu_quota(state: SimState) -> int:
    gpus = state.resolve_profile().physical_gpus
    return 2 * gpus if state.has(OVERCOMMITTED) else gpus


def reconcile(cluster: Cluster, state: SimState, progress: Progress) -> None:
    """Kueue's CRDs, flavor and ClusterQueue for a Kueue profile; none of them otherwise."""
    if not wanted(state.resolve_profile()):
        remove(cluster)
        return
    docs = [yaml.safe_load(path.read_text()) for path in binaries.require_kueue().crds]
    installed = objects.ensure_crds(
        cluster, {d["metadata"]["name"]: (lambda d=d: d) for d in docs}, "Kueue")
    if installed:
        progress(f"installed the {len(installed)} Kueue CRDs")
    objects.ensure_namespace(cluster, kueue_process.NAMESPACE)
    _apply(cluster, "resourceflavors", FLAVOR, {})
    _apply(cluster, "clusterqueues", CLUSTER_QUEUE, {
        "namespaceSelector": {},  # every namespace (Kueue: an absent selector selects none)
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": [GPU_RESOURCE], "flavors": [
            {"name": FLAVOR, "resources": [{"name": GPU_RESOURCE,
                                            "nominalQuota": gpu_quota(state)}]}]}]})


def _apply(cluster: Cluster, plural: str, name: str, spec: dict) -> None:
    kind = {"resourceflavors": "ResourceFlavor", "clusterqueues": "ClusterQueue"}[plural]
    body = {"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", "kind": kind,
            "metadata": {"name": name, "labels": {objects.STANDIN_LABEL: "true"}},
            "spec": spec}
    try:
        cluster.custom.create_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural, body)
    except Conflict:
        cluster.custom.patch_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural, name,
                                                   {"spec": spec})


def _kueue_crds(cluster: Cluster) -> list:
    return [c for c in cluster.apiext.list_custom_resource_definition().items
            if c.spec.group == KUEUE_GROUP]


def remove(cluster: Cluster) -> None:
    """Every Kueue CRD and so every Kueue object, finalizers dropped first (with no Kueue
    running, gang-controller-down, nobody else would drop them), and Kueue's namespace."""
    crds = _kueue_crds(cluster)
    for crd in crds:
        plural, scoped = crd.spec.names.plural, crd.spec.scope == "Namespaced"
        items = cluster.custom.list_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION,
                                                          plural).get("items") or []
        for item in items:
            meta = item["metadata"]
            if not meta.get("finalizers"):
                continue
            patch = {"metadata": {"finalizers": None}}
            with already_done(NotFound):
                if scoped:
                    cluster.custom.patch_namespaced_custom_object(
                        KUEUE_GROUP, KUEUE_VERSION, meta["namespace"], plural, meta["name"],
                        patch)
                else:
                    cluster.custom.patch_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION,
                                                               plural, meta["name"], patch)
    for crd in crds:
        with already_done(NotFound):
            cluster.apiext.delete_custom_resource_definition(crd.metadata.name)
    if crds:
        wait_for("the Kueue CRDs to be gone", lambda: not _kueue_crds(cluster),
                 timeout=CRD_GONE_TIMEOUT_S)
    with already_done(NotFound):
        cluster.core.delete_namespace(kueue_process.NAMESPACE)


def ensure_process(state: ClusterState, sim_state: SimState, progress: Progress) -> None:
    """Kueue's manager running where the profile wants it and no fault stops it; stopped
    otherwise (its PID is the cluster state's, so ``sim down`` stops it too)."""
    want = wanted(sim_state.resolve_profile()) and not sim_state.has(CONTROLLER_DOWN)
    pid = state.pids.get(kueue_process.COMPONENT)
    plane = ControlPlane(state.name)
    if want and (pid is None or not processes.pid_alive(pid)):
        state.binaries[kueue_process.COMPONENT] = str(binaries.require_kueue().manager)
        plane.start_on_a_free_port(state, kueue_process.COMPONENT, False, progress)
    elif not want and pid is not None:
        progress("stopping kueue")
        plane.stop_component(state, kueue_process.COMPONENT)
