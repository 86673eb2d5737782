"""The gang checks' decisions (conformance/checks/gang.py): which mechanism a cluster offers,
which Kueue ClusterQueue to use, and how big a gang and its blockers are."""

from __future__ import annotations

import pytest

from conformance.checks import gang
from conformance.checks.gang import ClusterQueue, GangChoice

KUEUE = {"kueue.x-k8s.io": {"clusterqueues", "localqueues", "workloads"}}
VOLCANO = {"scheduling.volcano.sh": {"podgroups", "queues"}}
WORKLOAD_API = {"scheduling.k8s.io": {"priorityclasses", "podgroups", "workloads"}}


@pytest.mark.parametrize("served, found", [
    ({}, []),
    ({"scheduling.k8s.io": {"priorityclasses"}}, []),  # scheduling.k8s.io/v1 alone: no gang
    (KUEUE, ["kueue"]),
    (VOLCANO, ["volcano"]),
    ({"scheduling.x-k8s.io": {"podgroups", "elasticquotas"}}, ["coscheduling"]),
    (WORKLOAD_API, ["workload-api"]),
    ({**KUEUE, **VOLCANO}, ["kueue", "volcano"]),
    ({"jobset.x-k8s.io": {"jobsets"}}, []),
])
def test_detect_names_the_mechanisms_by_their_api(served, found):
    assert gang.detect(served) == found


def test_no_mechanism_is_not_applicable_and_says_what_was_looked_for():
    decision = gang.choose_mechanism([], None, {"jobset.x-k8s.io": {"jobsets"}})
    assert decision.mechanism is None and not decision.applicable
    assert decision.reason.startswith("no gang scheduler")
    assert all(w in decision.reason for w in ("Kueue", "Volcano", "Workload API", "JobSet"))


def test_kueue_is_driven_and_others_are_not_run_with_the_reason():
    assert gang.choose_mechanism(["volcano", "kueue"], None, {}) == gang.Decision("kueue")
    decision = gang.choose_mechanism(["volcano"], None, {})
    assert decision.mechanism is None and decision.applicable
    assert "volcano" in decision.reason and "Kueue only" in decision.reason


def test_an_option_naming_a_mechanism_the_cluster_lacks_is_a_reason():
    decision = gang.choose_mechanism(["volcano"], GangChoice("kueue"), {})
    assert decision.mechanism is None and decision.applicable
    assert "kueue.x-k8s.io" in decision.reason


@pytest.mark.parametrize("text, parsed", [(None, None), ("", None), ("kueue", GangChoice("kueue")),
                                          ("kueue:team-a", GangChoice("kueue", "team-a"))])
def test_gang_queue_option(text, parsed):
    assert GangChoice.parse(text) == parsed


def test_gang_queue_option_refuses_an_unknown_mechanism():
    with pytest.raises(ValueError, match="one of kueue, volcano"):
        GangChoice.parse("slurm:q")


def _cq(name="q", quota=8, reserved=0, selector=None, stop=None) -> dict:
    spec = {"resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
        {"name": "a", "resources": [{"name": "cpu", "nominalQuota": "64"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": quota // 2}]},
        {"name": "b", "resources": [{"name": "nvidia.com/gpu",
                                     "nominalQuota": quota - quota // 2}]},
    ]}], "namespaceSelector": selector}
    if stop:
        spec["stopPolicy"] = stop
    status = {"flavorsReservation": [{"name": "a", "resources": [
        {"name": "nvidia.com/gpu", "total": str(reserved)}, {"name": "cpu", "total": "3"}]}]}
    return {"metadata": {"name": name}, "spec": spec, "status": status}


def test_cluster_queue_sums_gpu_quota_and_reservation_over_flavors():
    q = ClusterQueue.from_object(_cq(quota=16, reserved=5, selector={}))
    assert (q.gpu_quota, q.gpu_reserved, q.gpu_free, q.stopped) == (16, 5, 11, False)
    assert ClusterQueue.from_object(_cq(stop="Hold")).stopped


@pytest.mark.parametrize("selector, selected", [
    (None, False),  # Kueue: an absent namespaceSelector admits no namespace
    ({}, True),
    ({"matchLabels": {"team": "ml"}}, False),
    ({"matchLabels": {"app.kubernetes.io/managed-by": "gpu-conformance"}}, True),
    ({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                            "values": ["kube-system"]}]}, True),
    ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, False),
    ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, True),
    ({"matchExpressions": [{"key": "app.kubernetes.io/managed-by", "operator": "In",
                            "values": ["x", "gpu-conformance"]}]}, True),
])
def test_namespace_selector(selector, selected):
    labels = {"app.kubernetes.io/managed-by": "gpu-conformance",
              "kubernetes.io/metadata.name": "gpuconf-x"}
    assert gang.selects(selector, labels) is selected


def test_choose_queue_prefers_the_most_gpu_quota_open_to_the_namespace():
    queues = [ClusterQueue.from_object(_cq("small", 4, selector={})),
              ClusterQueue.from_object(_cq("closed", 64, selector=None)),
              ClusterQueue.from_object(_cq("big", 16, selector={}))]
    assert gang.choose_queue(queues, None, {})[0].name == "big"
    assert gang.choose_queue(queues, "small", {})[0].name == "small"
    queue, why = gang.choose_queue(queues, "closed", {})
    assert queue is None and "namespaceSelector" in why
    queue, why = gang.choose_queue(queues, "nope", {})
    assert queue is None and "no Kueue ClusterQueue named 'nope'" in why
    assert "has no ClusterQueue" in gang.choose_queue([], None, {})[1]


@pytest.mark.parametrize("physical, quota, size, blockers", [
    (16, 16, 4, 13),  # blockers leave room for 3
    (4, 4, 4, 1),     # the gang-kueue profile
    (16, 6, 4, 3),    # the queue's quota is the tighter limit: Kueue holds the gang back
    (4, 8, 4, 1),     # quota over capacity: the nodes are the limit, Kueue lets the gang in
    (3, 16, 3, 1),
    (2, 16, 2, 1),
])
def test_plan_sizes_the_gang_and_its_blockers(physical, quota, size, blockers):
    planned = gang.plan(physical, quota)
    assert (planned.size, planned.blockers) == (size, blockers)
    assert planned.free - planned.blockers == planned.size - 1


@pytest.mark.parametrize("physical, quota", [(1, 16), (16, 1), (0, 0)])
def test_no_gang_under_two_free_gpus(physical, quota):
    assert gang.plan(physical, quota) is None


@pytest.mark.parametrize("status, pending", [
    (None, "Kueue has taken generation None of ClusterQueue gpuconf-gpus, which is at 3"),
    ({"conditions": [{"type": "Active", "status": "True", "observedGeneration": 2}]},
     "Kueue has taken generation 2 of ClusterQueue gpuconf-gpus, which is at 3"),
    ({"conditions": [{"type": "Active", "status": "False", "observedGeneration": 3,
                      "reason": "FlavorNotFound", "message": "Can't admit new workloads"}]},
     "Kueue holds ClusterQueue gpuconf-gpus inactive: FlavorNotFound: Can't admit new workloads"),
    ({"conditions": [{"type": "Active", "status": "True", "observedGeneration": 3}]}, None),
])
def test_sim_set_waits_until_kueue_took_the_queue_it_wrote(status, pending):
    """`sim set` returns once Kueue's Active condition observed the ClusterQueue's generation
    (a quota change not yet taken let a check see the old quota: the gang-quota-overcommitted
    flake)."""
    from conformance.sim.kueue import queue_not_taken

    queue = {"metadata": {"name": "gpuconf-gpus", "generation": 3}}
    if status is not None:
        queue["status"] = status
    assert queue_not_taken(queue) == pending
