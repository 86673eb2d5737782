"""The cluster autoscaling check's decisions (conformance/checks/autoscaling.py): which node
autoscaler a cluster runs, which pool the check may grow (opt-in), and what a NodePool says
about scaling down."""

from __future__ import annotations

import pytest

from conformance.checks import autoscaling as asc
from conformance.checks.autoscaling import NodePool, PoolChoice

KARPENTER = {"karpenter.sh": {"nodepools", "nodeclaims", "nodeoverlays"}}


@pytest.mark.parametrize("served, ca_status, found", [
    ({}, False, []),
    (KARPENTER, False, ["karpenter"]),
    ({}, True, ["cluster-autoscaler"]),
    (KARPENTER, True, ["karpenter", "cluster-autoscaler"]),
    ({"karpenter.sh": {"nodeclaims"}}, False, []),  # no NodePool: nothing to grow
])
def test_detect_names_the_autoscalers(served, ca_status, found):
    assert asc.detect(served, ca_status) == found


@pytest.mark.parametrize("text, parsed", [
    (None, None), ("", None),
    ("karpenter:gpu", PoolChoice("karpenter", "gpu")),
    ("cluster-autoscaler:cloud.google.com/gke-nodepool=gpu-pool",
     PoolChoice("cluster-autoscaler", "cloud.google.com/gke-nodepool=gpu-pool")),
])
def test_autoscaling_pool_option(text, parsed):
    assert PoolChoice.parse(text) == parsed


@pytest.mark.parametrize("text", ["karpenter", "karpenter:", "slurm:gpu",
                                  "cluster-autoscaler:gpu-pool"])
def test_autoscaling_pool_option_refuses_what_names_no_pool(text):
    with pytest.raises(ValueError, match="--autoscaling-pool"):
        PoolChoice.parse(text)


def test_a_pool_is_selected_by_its_node_labels():
    assert PoolChoice("karpenter", "gpu").selector == {"karpenter.sh/nodepool": "gpu"}
    assert PoolChoice("cluster-autoscaler", "eks.amazonaws.com/nodegroup=g5").selector == {
        "eks.amazonaws.com/nodegroup": "g5"}


def test_no_autoscaler_is_not_applicable_and_says_what_was_looked_for():
    decision = asc.choose([], None, [], opted_in=True)
    assert decision.pool is None and not decision.applicable
    assert decision.reason.startswith("no cluster autoscaler")
    assert "karpenter.sh" in decision.reason and "cluster-autoscaler-status" in decision.reason


def test_an_existing_cluster_runs_it_only_when_opted_in():
    decision = asc.choose(["karpenter"], None, ["gpu"], opted_in=False)
    assert decision.pool is None and decision.applicable
    assert "costs money" in decision.reason and "--autoscaling-pool" in decision.reason
    assert "NodePools: gpu" in decision.reason
    assert asc.choose(["karpenter"], PoolChoice("karpenter", "gpu"), ["gpu"],
                      opted_in=False).pool == PoolChoice("karpenter", "gpu")


def test_the_sim_uses_its_one_nodepool():
    assert asc.choose(["karpenter"], None, ["gpu"], opted_in=True).pool == PoolChoice(
        "karpenter", "gpu")
    assert asc.choose(["karpenter"], None, ["a", "b"], opted_in=True).pool is None


def test_an_option_naming_what_the_cluster_lacks_is_a_reason():
    decision = asc.choose(["karpenter"], PoolChoice("karpenter", "nope"), ["gpu"],
                          opted_in=False)
    assert decision.pool is None and "no Karpenter NodePool named 'nope'" in decision.reason
    decision = asc.choose(["karpenter"], PoolChoice("cluster-autoscaler", "a=b"), ["gpu"],
                          opted_in=False)
    assert decision.pool is None and "shows only karpenter" in decision.reason


def _nodepool(disruption: dict, taints: list | None = None) -> dict:
    return {"metadata": {"name": "gpu"},
            "spec": {"template": {"spec": {"taints": taints or []}}, "disruption": disruption}}


def test_nodepool_scale_down():
    pool = NodePool.from_object(_nodepool({"consolidateAfter": "30s"}))
    assert pool.scale_down_blocked is None
    assert pool.scale_down_timeout_s == 30 + asc.KARPENTER_SCALE_DOWN_SLACK_S
    never = NodePool.from_object(_nodepool({"consolidateAfter": "Never"}))
    assert never.scale_down_blocked.startswith("scale-down disabled")
    frozen = NodePool.from_object(_nodepool({"budgets": [{"nodes": "0"}]}))
    assert "budget of 0" in frozen.scale_down_blocked
    # a budget of 0 only on a schedule leaves the rest of the day open
    scheduled = NodePool.from_object(_nodepool({"budgets": [
        {"nodes": "0", "schedule": "0 9 * * *", "duration": "8h"}]}))
    assert scheduled.scale_down_blocked is None


@pytest.mark.parametrize("text, seconds", [("0s", 0), ("30s", 30), ("5m", 300),
                                           ("1h30m", 5400), ("1.5s", 1.5)])
def test_duration(text, seconds):
    assert asc.duration_s(text) == seconds


def test_duration_refuses_what_is_not_one():
    with pytest.raises(ValueError):
        asc.duration_s("soon")


def test_the_pods_tolerate_the_pools_taints():
    taints = ({"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
              {"key": "dedicated", "effect": "NoExecute"})
    assert asc.tolerations(taints) == [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule", "operator": "Equal", "value": "true"},
        {"key": "dedicated", "effect": "NoExecute", "operator": "Exists"}]
    assert NodePool.from_object(_nodepool({}, list(taints))).taints == taints


@pytest.mark.parametrize("free, pods", [(0, 1), (3, 4), (-1, 1)])
def test_one_pod_more_than_the_pool_has_free_gpus(free, pods):
    assert asc.pods_to_create(free) == pods


class _Pods:
    """read_namespaced_pod answering one pod, Running on ``node`` (counting the reads); no
    scheduling events."""

    def __init__(self, node: str) -> None:
        self.node, self.reads = node, 0

    def read_namespaced_pod(self, name, namespace):
        from types import SimpleNamespace as NS

        self.reads += 1
        return NS(spec=NS(node_name=self.node), status=NS(phase="Running"))

    def list_namespaced_event(self, namespace, field_selector):
        from types import SimpleNamespace as NS

        return NS(items=[])


@pytest.mark.parametrize("runs_on, added", [("gpu-new", {"gpu-new"}), ("gpu-0", set())],
                         ids=["on-the-added-node", "on-a-node-the-pool-had"])
def test_the_wait_for_growth_ends_once_the_pending_pod_runs(monkeypatch, runs_on, added):
    """A pod that runs on a node the pool had ends the wait at once (the check says not-run);
    it used to wait the whole scale-up timeout (600 s) for a node that never had to come."""
    from types import SimpleNamespace as NS

    from conformance.cluster import autoscaling as scaling

    before = {"gpu-0", "gpu-1"}
    monkeypatch.setattr(scaling, "pool_nodes", lambda cluster, pool: before | added)
    monkeypatch.setattr(scaling, "SCALE_UP_TIMEOUT_S", 5.0)
    core = _Pods(runs_on)
    grown = scaling.wait_grown(NS(core=core), PoolChoice.parse("karpenter:gpu"), before, "ns",
                               "autoscale-1")
    assert grown.pod_node == runs_on and grown.added == frozenset(added)
    assert core.reads == 1  # the first look ends the wait


class _Evicted(_Pods):
    """The pending pod gone (404) since the first read, with the event its evictor left."""

    def read_namespaced_pod(self, name, namespace):
        from conformance.cluster.client import NotFound

        self.reads += 1
        raise NotFound(status=404, reason="Not Found")

    def list_namespaced_event(self, namespace, field_selector):
        from types import SimpleNamespace as NS

        return NS(items=[NS(reason="Evicted", message="Evicted pod: Disrupting node")])


def test_the_wait_for_growth_ends_once_the_pending_pod_is_gone(monkeypatch):
    """A pending pod deleted by someone else ends the wait at once with its events (the check
    says not-run); a 404 used to be retried as an API hiccup until the 600 s timeout (CI: the
    suite run killed at 300 s, 'API error 404 Not Found')."""
    from types import SimpleNamespace as NS

    from conformance.cluster import autoscaling as scaling

    monkeypatch.setattr(scaling, "pool_nodes", lambda cluster, pool: {"gpu-new"})
    monkeypatch.setattr(scaling, "SCALE_UP_TIMEOUT_S", 5.0)
    core = _Evicted("")
    grown = scaling.wait_grown(NS(core=core), PoolChoice.parse("karpenter:gpu"), set(), "ns",
                               "autoscale-1")
    assert grown.gone == "Evicted: Evicted pod: Disrupting node" and grown.pod_node is None
    assert core.reads == 1


# the pending pod's events in a CI run (2026-12-06): bound to the node Karpenter had just added,
# then deleted by the taint manager, which still saw the node's registration taint
ON_ARRIVAL = ("Nominated: Pod should schedule on: nodeclaim/gpuconf-gpu-v9mjc; FailedScheduling: "
              "0/4 nodes are available: 1 node(s) had untolerated taint(s); Scheduled: "
              "Successfully assigned ns/autoscale-fe7500 to kwok-gpuconf-gpu-v9mjc; "
              "TaintManagerEviction: Marking for deletion Pod ns/autoscale-fe7500")


@pytest.mark.parametrize("added, gone, again", [
    ({"kwok-gpuconf-gpu-v9mjc"}, ON_ARRIVAL, True),
    (set(), ON_ARRIVAL, False),  # no node added: nothing shows that the pool grew
    ({"kwok-gpuconf-gpu-v9mjc"}, "Evicted: Evicted pod: Disrupting node", False),
    ({"kwok-gpuconf-gpu-v9mjc"}, "", False),
], ids=["taint-manager-on-the-added-node", "no-node-added", "another-eviction", "not-gone"])
def test_a_pod_deleted_by_the_taint_manager_on_the_added_node_is_tried_again(added, gone, again):
    from conformance.cluster import autoscaling as scaling

    grown = scaling.Growth(frozenset(added), None, gone=gone)
    assert scaling.evicted_on_arrival(grown) is again


def test_the_checks_pods_ask_both_autoscalers_to_leave_them_be():
    from conformance.cluster.pods import PodSpec

    pod = PodSpec("autoscale", annotations=asc.KEEP_WHILE_CHECKED).manifest({})
    assert pod["metadata"]["annotations"] == {
        "karpenter.sh/do-not-disrupt": "true",
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
