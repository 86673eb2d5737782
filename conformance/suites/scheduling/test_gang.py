"""Scheduling / gang: the platform's gang scheduler places a distributed job all or nothing
(CNCF Kubernetes AI Conformance ``gang_scheduling``, a MUST).

Checklist (the gang: a Job of N one-GPU pods, N = 4 or fewer where fewer GPUs are free, queued
to the gang scheduler; ``--gang-queue`` picks the scheduler and queue):
- SCHED-GANG-001 the gang is admitted whole: all N pods are placed, then all N Succeed
- SCHED-GANG-002 blockers through the same queue leave room for N-1 GPUs: the gang places none
  of its pods (no partial placement) until the queue has decided on it and 15 s have passed;
  once the blockers are deleted it is placed whole

Both are not-applicable where the cluster offers no gang scheduler, and not run (with the
reason) where it offers one these checks cannot drive yet (``checks/gang.py`` says which).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from conformance.checks import gang
from conformance.cluster import allocation
from conformance.cluster import evidence as ev
from conformance.cluster import gang as gangs
from conformance.cluster.waits import WaitTimeout
from conformance.plugin.api import finding, not_applicable, not_run
from conformance.plugin.fixtures import failed


@dataclass(frozen=True)
class Queue:
    """Where the check queues its gangs: the platform's ClusterQueue through a LocalQueue in
    the test namespace, and the gang that fits there now."""

    cluster_queue: gang.ClusterQueue
    local: str
    plan: gang.GangPlan

    @property
    def where(self) -> str:
        return f"Kueue ClusterQueue {self.cluster_queue.name}"


@pytest.fixture
def gang_queue(request, cluster, gpu_env, attachments) -> Queue:
    """The queue to run gangs through (not-applicable without a gang scheduler); Kueue's view
    of it is attached to the report when the check fails. The test's namespace is made once a
    gang scheduler is there (its labels pick the queue)."""
    served = gangs.served(cluster)
    try:
        choice = gang.GangChoice.parse(gpu_env.options.gang_queue)
    except ValueError as exc:
        not_run(str(exc))
    decision = gang.choose_mechanism(gang.detect(served), choice, served)
    if decision.mechanism is None:
        (not_run if decision.applicable else not_applicable)(decision.reason)
    namespace = request.getfixturevalue("namespace")
    labels = cluster.core.read_namespace(namespace).metadata.labels or {}
    queue, why = gang.choose_queue(gangs.cluster_queues(cluster),
                                   choice.queue if choice else None, labels)
    if queue is None:
        not_run(why)
    nodes = request.getfixturevalue("require_device_plugin_nodes")
    physical = allocation.free_whole_gpus(cluster, nodes)
    queue = gangs.settled_queue(cluster, queue, min(gang.GANG_SIZE, physical))
    planned = gang.plan(physical, queue.gpu_free)
    if planned is None:
        not_run(f"a gang needs {gang.MIN_GANG} free GPUs: {physical} free on the nodes, "
                f"{queue.gpu_free} in ClusterQueue {queue.name}'s quota")
    local = gangs.create_local_queue(cluster, namespace, queue.name, gpu_env.run_id)

    def attach_kueue_view() -> None:  # runs before the namespace (and its dump) goes
        if failed(request.node):
            attachments.append(ev.Evidence("kueue.yaml",
                                           gangs.kueue_view(cluster, namespace, queue.name)))

    request.addfinalizer(attach_kueue_view)
    return Queue(queue, local, planned)


@pytest.mark.requirement("SCHED-GANG-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_gang_is_admitted_whole(request, cluster, gpu_env, gang_queue, namespace):
    size = gang_queue.plan.size
    job = gangs.submit(cluster, namespace, gang_queue.local, "gang", size, gpu_env.run_id,
                       image=gpu_env.options.cuda_image)
    request.addfinalizer(lambda: gangs.delete(cluster, job))
    gangs.wait_placed(cluster, job, gang_queue.where)
    done = gangs.wait_gang(cluster, job, f"all {size} pods of gang {job.name} to Succeed",
                           lambda s: s.succeeded == size, gangs.GANG_DONE_TIMEOUT_S)
    finding(request, f"{gang_queue.where} admitted a gang of {size} one-GPU pods whole: "
                     f"all placed, then {done.succeeded} Succeeded")


@pytest.mark.requirement("SCHED-GANG-002")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_gang_that_does_not_fit_places_nothing(request, cluster, gpu_env, gang_queue, namespace):
    plan = gang_queue.plan
    blockers = gangs.submit(cluster, namespace, gang_queue.local, "gang-blocker", plan.blockers,
                            gpu_env.run_id, image=gpu_env.options.cuda_image,
                            seconds=gangs.BLOCKER_RUN_S)
    request.addfinalizer(lambda: gangs.delete(cluster, blockers))
    gangs.wait_placed(cluster, blockers, gang_queue.where, running=True)  # N-1 GPUs left free
    job = gangs.submit(cluster, namespace, gang_queue.local, "gang", plan.size, gpu_env.run_id,
                       image=gpu_env.options.cuda_image)
    request.addfinalizer(lambda: gangs.delete(cluster, job))
    seen, held = gangs.watch_no_partial(cluster, job, gangs.NO_PARTIAL_WATCH_S)
    assert seen.bound == 0, (
        f"partial gang: {gang_queue.where} let {seen.bound} of the {plan.size} pods of gang "
        f"{job.name} be placed with room for {plan.size - 1} ({seen}): a gang scheduler "
        "places all or none; a quota above the nodes' GPUs admits gangs that do not fit")
    gangs.delete(cluster, blockers)
    try:
        gangs.wait_placed(cluster, job, f"{gang_queue.where}, its blockers deleted,")
    except WaitTimeout as exc:
        raise AssertionError(f"{gang_queue.where} held the gang back, but did not admit it "
                             f"once room was freed: {exc}") from None
    finding(request, f"{gang_queue.where} held a gang of {plan.size} back for "
                     f"{gangs.NO_PARTIAL_WATCH_S:.0f}s with room for {plan.size - 1} (no pod "
                     f"placed; Kueue: {held or 'not evaluated'}), then placed it whole once "
                     "room was freed")
