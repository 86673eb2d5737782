"""Kueue in the sim (profiles with ``gang="kueue"``): the real Kueue manager as a process of
the control plane (``controlplane/kueue.py``), its CRDs from its module, and what a platform
team would set up: one ResourceFlavor and one ClusterQueue, open to every namespace, whose
nvidia.com/gpu quota is the GPUs the profile's nodes have.

Faults: ``gang-quota-overcommitted`` sets that quota to twice the GPUs (Kueue admits gangs the
nodes cannot hold, and the scheduler places what fits); ``gang-controller-down`` leaves the
CRDs and queues but no Kueue process.
"""

from __future__ import annotations

from conformance.binaries import binaries
from conformance.checks.gang import KUEUE_GROUP, KUEUE_VERSION
from conformance.cluster.client import Cluster, NotFound, already_done
from conformance.cluster.waits import wait_until_done
from conformance.common.console import Progress
from conformance.common.errors import NotConverged
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
QUEUE_TAKEN_TIMEOUT_S = 60.0  # Kueue takes a changed queue in well under a second when idle


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
    objects.install_crd_files(cluster, binaries.require_kueue().crds, "Kueue", progress)
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
    objects.apply_cluster_object(cluster, KUEUE_GROUP, KUEUE_VERSION, plural, kind, name, spec)


def remove(cluster: Cluster) -> None:
    """Every Kueue CRD and so every Kueue object (finalizers dropped first: with no Kueue
    running, gang-controller-down, nobody else would drop them), and Kueue's namespace."""
    objects.remove_crds(cluster, (KUEUE_GROUP,), "Kueue")
    with already_done(NotFound):
        cluster.core.delete_namespace(kueue_process.NAMESPACE)


def ensure_process(cluster: Cluster, state: ClusterState, sim_state: SimState,
                   progress: Progress) -> None:
    """Kueue's manager running where the profile wants it and no fault stops it, with the
    ClusterQueue as ``reconcile`` wrote it taken in; stopped otherwise."""
    want = wanted(sim_state.resolve_profile()) and not sim_state.has(CONTROLLER_DOWN)
    ControlPlane(state.name).run_or_stop(state, kueue_process.COMPONENT, want,
                                         lambda: binaries.require_kueue().manager, progress)
    if want:
        wait_queue_taken(cluster, progress)


def queue_not_taken(cluster_queue: dict) -> str | None:
    """What Kueue has not yet taken of the ClusterQueue (None once its Active condition has
    observed the queue's generation: Kueue's cache holds that spec, its quota included)."""
    generation = cluster_queue["metadata"].get("generation")
    active = next((c for c in (cluster_queue.get("status") or {}).get("conditions") or []
                   if c.get("type") == "Active"), None)
    seen = active.get("observedGeneration") if active else None
    if seen != generation:
        return (f"Kueue has taken generation {seen} of ClusterQueue {CLUSTER_QUEUE}, which is "
                f"at {generation}")
    if active.get("status") != "True":
        return (f"Kueue holds ClusterQueue {CLUSTER_QUEUE} inactive: {active.get('reason')}: "
                f"{active.get('message')}")
    return None


def wait_queue_taken(cluster: Cluster, progress: Progress) -> None:
    """Until Kueue admits by the ClusterQueue as it now is. A check run right after the quota
    changed (`sim set`, gang-quota-overcommitted) found Kueue still holding a gang back by the
    quota before the change: its manager takes a changed queue in its own time (CI, under
    load)."""
    wait_until_done(f"Kueue to take ClusterQueue {CLUSTER_QUEUE} as it now is",
                    lambda: queue_not_taken(cluster.custom.get_cluster_custom_object(
                        KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", CLUSTER_QUEUE)),
                    timeout=QUEUE_TAKEN_TIMEOUT_S, interval=0.2, progress=progress,
                    error=NotConverged)
