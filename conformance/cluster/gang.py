"""Gang workloads through Kueue: what the cluster serves, its ClusterQueues, and Jobs of
one-GPU pods admitted as one Workload (the decisions are ``checks/gang.py``'s).

A Job is created suspended with the ``kueue.x-k8s.io/queue-name`` label: Kueue's own mutating
webhook would suspend it, and creating it suspended makes the check independent of whether the
platform registered that webhook. Kueue unsuspends it once the whole Workload is admitted.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes.client.exceptions import ApiException

from conformance.checks import gang
from conformance.cluster import discovery
from conformance.cluster.client import Cluster, NotFound
from conformance.cluster.evidence import to_yaml
from conformance.cluster.namespaces import run_labels
from conformance.cluster.pods import PodSpec
from conformance.cluster.waits import WaitTimeout, wait_for, wait_until_done

# Kueue admits a Workload (unsuspends its Job) in well under a second when its quota is free;
# 30 s is ample on a busy 2-core sim and says "not admitted" long before the pods' own wait.
GANG_ADMIT_TIMEOUT_S = 30.0
# Kueue's Job reconciler makes a Job's Workload at once (well under a second here); none
# after this long means no Kueue controller handles the Job, whatever the quota says.
WORKLOAD_MADE_S = 10.0
# The scheduler binds an admitted Job's pods in seconds, but a real cluster pulls the image
# before they run: two minutes (the sim: seconds).
GANG_RUNNING_TIMEOUT_S = 120.0
# How long a gang that does not fit is watched for a partial placement at least (the watch
# also lasts until Kueue has decided on it: watch_no_partial). Kueue decides in a second, and a
# quota that lets the gang in over the nodes' capacity shows its first pods placed within
# seconds: 15 s is many times that, and keeps the check short.
NO_PARTIAL_WATCH_S = 15.0
QUEUE_SETTLE_S = 15.0  # Kueue updates a ClusterQueue's usage within a second or two
GANG_DONE_TIMEOUT_S = 180.0  # from Running to every pod Succeeded: GANG_RUN_S plus slack
GANG_RUN_S = 5  # how long each gang pod runs: long enough to see all of them Running at once
BLOCKER_RUN_S = 3600  # a blocker holds its GPU until the check deletes it
# KWOK's own annotation convention (its chaos stages read theirs): how long the pod's command
# runs, so a simulated node runs it that long too (conformance/controlplane/kwok-stages.yaml);
# inert on a real node.
RUNS_FOR = "pod-complete.stage.kwok.x-k8s.io/delay"


def served(cluster: Cluster) -> dict[str, set[str]]:
    """API group -> resources it serves, for the groups that betray a gang mechanism."""
    return discovery.served(cluster, {group for group, _ in gang.MECHANISMS.values()}
                            | {gang.JOBSET_GROUP})


def cluster_queues(cluster: Cluster) -> list[gang.ClusterQueue]:
    doc = cluster.custom.list_cluster_custom_object(gang.KUEUE_GROUP, gang.KUEUE_VERSION,
                                                    "clusterqueues")
    return [gang.ClusterQueue.from_object(o) for o in doc.get("items") or []]


def settled_queue(cluster: Cluster, queue: gang.ClusterQueue, wanted: int) -> gang.ClusterQueue:
    """The ClusterQueue once ``wanted`` GPUs of its quota are free, or as it is after
    QUEUE_SETTLE_S: Kueue releases a finished Workload's quota in its status a moment after
    the Job ends (the previous check's gang), and a busy queue may stay short."""
    last = [queue]

    def room() -> gang.ClusterQueue | None:
        last[:] = [q for q in cluster_queues(cluster) if q.name == queue.name] or last
        return last[0] if last[0].gpu_free >= wanted else None

    with contextlib.suppress(WaitTimeout):
        wait_for(f"ClusterQueue {queue.name} to have {wanted} GPUs of quota free", room,
                 timeout=QUEUE_SETTLE_S, interval=0.5)
    return last[0]


def create_local_queue(cluster: Cluster, namespace: str, cluster_queue: str,
                       run_id: str) -> str:
    """A LocalQueue in the test namespace that feeds ``cluster_queue``; its name."""
    name = "gpuconf-gang"
    cluster.custom.create_namespaced_custom_object(
        gang.KUEUE_GROUP, gang.KUEUE_VERSION, namespace, "localqueues",
        {"apiVersion": f"{gang.KUEUE_GROUP}/{gang.KUEUE_VERSION}", "kind": "LocalQueue",
         "metadata": {"name": name, "labels": run_labels(run_id)},
         "spec": {"clusterQueue": cluster_queue}})
    return name


@dataclass(frozen=True)
class GangJob:
    """A Job of ``size`` one-GPU pods that all run at once (parallelism = completions)."""

    namespace: str
    name: str
    size: int

    @property
    def selector(self) -> str:
        return f"batch.kubernetes.io/job-name={self.name}"


def submit(cluster: Cluster, namespace: str, queue: str, prefix: str, size: int, run_id: str,
           *, image: str, seconds: int = GANG_RUN_S) -> GangJob:
    """A suspended Job of ``size`` one-GPU pods in ``queue``; each pod runs ``seconds``."""
    pod = PodSpec(prefix, gpus=1, image=image, command=["sh", "-c", f"sleep {seconds}"],
                  restart_policy="Never").manifest(run_labels(run_id))
    template = {"metadata": {"labels": pod["metadata"]["labels"],
                             "annotations": {RUNS_FOR: f"{seconds}s"}},
                "spec": pod["spec"]}
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": pod["metadata"]["name"],
                         "labels": {**run_labels(run_id), gang.QUEUE_NAME_LABEL: queue}},
            "spec": {"parallelism": size, "completions": size, "backoffLimit": 0,
                     "suspend": True, "template": template}}
    cluster.batch.create_namespaced_job(namespace, body)
    return GangJob(namespace, body["metadata"]["name"], size)


def delete(cluster: Cluster, job: GangJob) -> None:
    """Delete the gang's Job and pods, then wait (QUEUE_SETTLE_S at most) until its Workload
    is gone: a finished gang's Workload that still holds its quota leaves the next gang a
    queue shorter than it says, and Kueue then holds for quota a gang the nodes could not
    place (a quota over capacity would go unseen)."""
    try:
        cluster.batch.delete_namespaced_job(job.name, job.namespace, grace_period_seconds=0,
                                            propagation_policy="Background")
    except NotFound:
        return
    cluster.core.delete_collection_namespaced_pod(job.namespace, label_selector=job.selector,
                                                  grace_period_seconds=0)
    with contextlib.suppress(WaitTimeout):
        wait_for(f"Kueue to let go of gang {job.name}'s Workload",
                 lambda: workload(cluster, job) is None, timeout=QUEUE_SETTLE_S)


@dataclass(frozen=True)
class GangState:
    """Where a gang's pods are: bound to a node, Running now, Succeeded; and whether the Job
    is still suspended (Kueue has not admitted it)."""

    size: int
    bound: int
    running: int
    succeeded: int
    suspended: bool

    def __str__(self) -> str:
        return (f"{self.bound}/{self.size} pods placed on a node, {self.running} Running, "
                f"{self.succeeded} Succeeded" + ("; the Job is still suspended (not admitted)"
                                                 if self.suspended else ""))


def state(cluster: Cluster, job: GangJob) -> GangState:
    found = cluster.core.list_namespaced_pod(job.namespace, label_selector=job.selector).items
    spec = cluster.batch.read_namespaced_job(job.name, job.namespace).spec
    return GangState(job.size, sum(1 for p in found if p.spec.node_name),
                     sum(1 for p in found if p.status.phase == "Running"),
                     sum(1 for p in found if p.status.phase == "Succeeded"), bool(spec.suspend))


def wait_gang(cluster: Cluster, job: GangJob, description: str,
              done: Callable[[GangState], bool], timeout: float) -> GangState:
    """Until ``done`` holds for the gang's state; the timeout names the last state."""
    last: list[GangState] = []

    def pending() -> str | None:
        now = state(cluster, job)
        last[:] = [now]
        return None if done(now) else str(now)

    wait_until_done(description, pending, timeout=timeout, interval=0.5)
    return last[0]


def wait_placed(cluster: Cluster, job: GangJob, where: str, *,
                running: bool = False) -> GangState:
    """Until ``where`` (the queue) admits the Job, then until all its pods are placed on nodes
    (``running``: Running at once); each wait names the last state on timeout."""
    what = f"{job.size} one-GPU pod" + ("s" if job.size > 1 else "")
    require_workload(cluster, job)
    wait_gang(cluster, job, f"{where} to admit {job.name} ({what})",
              lambda s: not s.suspended, GANG_ADMIT_TIMEOUT_S)
    return wait_gang(cluster, job, f"all {job.size} pods of {job.name} to be "
                     + ("Running" if running else "placed on nodes"),
                     lambda s: (s.running if running else s.bound) == job.size,
                     GANG_RUNNING_TIMEOUT_S)


def kueue_view(cluster: Cluster, namespace: str, cluster_queue: str) -> str:
    """The ClusterQueue, and the test namespace's LocalQueues and Workloads, as YAML (what
    Kueue decided and why: their conditions say it)."""
    def listed(plural: str) -> list:
        return cluster.custom.list_namespaced_custom_object(
            gang.KUEUE_GROUP, gang.KUEUE_VERSION, namespace, plural).get("items") or []

    try:
        queue = cluster.custom.get_cluster_custom_object(gang.KUEUE_GROUP, gang.KUEUE_VERSION,
                                                         "clusterqueues", cluster_queue)
        return to_yaml({"clusterQueue": queue, "localQueues": listed("localqueues"),
                        "workloads": listed("workloads")})
    except ApiException as exc:
        return f"(Kueue objects unavailable: {exc.status} {exc.reason})"


def workload(cluster: Cluster, job: GangJob) -> dict | None:
    """The Workload Kueue made for the Job (owned by it), or None while there is none."""
    items = cluster.custom.list_namespaced_custom_object(
        gang.KUEUE_GROUP, gang.KUEUE_VERSION, job.namespace, "workloads").get("items") or []
    return next((item for item in items
                 if any(o.get("kind") == "Job" and o.get("name") == job.name
                        for o in item["metadata"].get("ownerReferences") or [])), None)


def require_workload(cluster: Cluster, job: GangJob) -> None:
    """Until Kueue has made the Job's Workload; an AssertionError naming Kueue's controller
    when it has not within WORKLOAD_MADE_S (no admission wait can end otherwise)."""
    try:
        wait_for(f"Kueue to make a Workload for Job {job.name}",
                 lambda: workload(cluster, job) is not None, timeout=WORKLOAD_MADE_S)
    except WaitTimeout:
        raise AssertionError(
            f"gang not admitted: Kueue made no Workload for Job {job.name} within "
            f"{WORKLOAD_MADE_S:.0f}s: its controller manager is not running, or does not "
            f"manage namespace {job.namespace}") from None


def held_reason(cluster: Cluster, job: GangJob) -> str | None:
    """Why Kueue keeps the Job's Workload waiting (its QuotaReserved=False message), once it
    has evaluated it; None before that, or once it is admitted."""
    item = workload(cluster, job)
    for cond in ((item or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == "QuotaReserved" and cond["status"] == "False":
            return cond.get("message") or cond.get("reason") or "pending"
    return None


def watch_no_partial(cluster: Cluster, job: GangJob, seconds: float) -> tuple[GangState, str]:
    """Watch a gang that does not fit until the queue has decided on it: (its state, Kueue's
    reason for holding it). Done as soon as any of its pods is placed (a partial gang), or
    once Kueue holds it with a reason and ``seconds`` have passed since it was queued. A fixed
    watch alone would miss a slow admission on a loaded cluster: a gang admitted late is
    still watched until its pods are placed."""
    t0 = time.monotonic()
    seen: list[tuple[GangState, str]] = []

    def pending() -> str | None:
        now = state(cluster, job)
        held = held_reason(cluster, job) if now.suspended else None
        seen[:] = [(now, held or "")]
        if now.bound:
            return None
        if held and time.monotonic() - t0 >= seconds:
            return None
        if now.suspended:
            return f"held by the queue: {held}" if held else "not yet evaluated by the queue"
        return "admitted: waiting for its pods to be placed"

    # a timeout with nothing placed (never evaluated, or admitted and never placed) is judged
    # by the caller from the state: no pod was placed
    with contextlib.suppress(WaitTimeout):
        wait_until_done(f"Kueue to decide on gang {job.name} (hold it whole, or place it)",
                        pending, timeout=GANG_RUNNING_TIMEOUT_S, interval=0.5)
    return seen[-1]
