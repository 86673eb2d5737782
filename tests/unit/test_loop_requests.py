"""What wakes the stand-in's loop and what a pass of it sends: a node's heartbeat is no news
(``cluster/changes.py``), and what already exists is read, not created again and refused
(``sim/objects.py``). Measured on an idle sim: heartbeats woke ~25 passes a minute, and each
pass sent ~8 creates the API server refused (AlreadyExists)."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace

from conformance.cluster import changes
from conformance.cluster.client import Conflict, NotFound
from conformance.sim import objects

NODE = {"metadata": {"name": "gpu-0", "resourceVersion": "10", "labels": {"a": "1"},
                     "managedFields": [{"manager": "kwok", "time": "2026-12-06T12:00:00Z"}]},
        "spec": {"taints": []},
        "status": {"conditions": [{"type": "Ready", "status": "True",
                                   "lastHeartbeatTime": "2026-12-06T12:00:00Z",
                                   "lastTransitionTime": "2026-12-06T11:00:00Z"}],
                   "allocatable": {"nvidia.com/gpu": "8"}}}


def _event(kind: str, node: dict) -> bytes:
    return json.dumps({"type": kind, "object": node}).encode()


def _heartbeat(node: dict) -> dict:
    beat = copy.deepcopy(node)
    beat["metadata"]["resourceVersion"] = "11"
    beat["metadata"]["managedFields"][0]["time"] = "2026-12-06T12:00:10Z"
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-12-06T12:00:10Z"
    return beat


def test_a_heartbeat_is_no_news_a_label_or_a_condition_is():
    seen: dict[str, str] = {}
    news = changes.node_without_heartbeats
    assert changes._is_news(_event("ADDED", NODE), news, seen)  # a watch's first look
    beat = _heartbeat(NODE)
    assert not changes._is_news(_event("MODIFIED", beat), news, seen)
    labelled = copy.deepcopy(beat)
    labelled["metadata"]["labels"]["a"] = "2"
    assert changes._is_news(_event("MODIFIED", labelled), news, seen)
    not_ready = copy.deepcopy(labelled)
    not_ready["status"]["conditions"][0]["status"] = "False"
    assert changes._is_news(_event("MODIFIED", not_ready), news, seen)
    assert changes._is_news(_event("DELETED", not_ready), news, seen)
    assert changes._is_news(_event("ADDED", not_ready), news, seen)  # back again


def test_an_event_that_cannot_be_read_counts_as_news():
    assert changes._is_news(b"{not json", changes.node_without_heartbeats, {})
    assert changes._is_news(b'{"type": "ERROR", "object": {"code": 410}}',
                            changes.node_without_heartbeats, {})


class _Core:
    """The ServiceAccount and namespace calls a pass makes, recorded."""

    def __init__(self, accounts: set[str], phase: str | None) -> None:
        self.accounts, self.phase, self.calls = accounts, phase, []

    def list_namespaced_service_account(self, namespace):
        self.calls.append(("list", namespace))
        return SimpleNamespace(items=[SimpleNamespace(metadata=SimpleNamespace(name=n))
                                      for n in sorted(self.accounts)])

    def create_namespaced_service_account(self, namespace, body):
        self.calls.append(("create", body["metadata"]["name"]))
        self.accounts.add(body["metadata"]["name"])

    def read_namespace(self, name):
        self.calls.append(("read", name))
        if self.phase is None:
            raise NotFound(status=404, reason="NotFound")
        return SimpleNamespace(status=SimpleNamespace(phase=self.phase))

    def create_namespace(self, body):
        self.calls.append(("create-namespace", body["metadata"]["name"]))
        if self.phase:
            raise Conflict(status=409, reason="AlreadyExists")
        self.phase = "Active"


def test_existing_service_accounts_and_namespace_are_read_not_created_again():
    core = _Core({"a", "b"}, "Active")
    cluster = SimpleNamespace(core=core)
    objects.ensure_service_accounts(cluster, "ns", {"a", "b", "c"})
    objects.ensure_service_accounts(cluster, "ns", {"a", "b", "c"})
    assert core.calls == [("list", "ns"), ("create", "c"), ("list", "ns")]
    core.calls.clear()
    objects.ensure_namespace(cluster, "ns")
    assert core.calls == [("read", "ns")]
    missing = _Core(set(), None)
    objects.ensure_namespace(SimpleNamespace(core=missing), "ns")
    assert missing.calls == [("read", "ns"), ("create-namespace", "ns")]


class _Apps:
    """One DaemonSet the API server holds, and the replaces sent to it."""

    def __init__(self, generation: int) -> None:
        self.current = SimpleNamespace(
            metadata=SimpleNamespace(generation=generation),
            spec=SimpleNamespace(template=SimpleNamespace(
                metadata=SimpleNamespace(annotations={"config": "time-slicing"}),
                spec=SimpleNamespace(containers=[object()]))))
        self.replaced: list[dict] = []

    def create_namespaced_daemon_set(self, ns, body):
        raise Conflict(status=409, reason="AlreadyExists")

    def read_namespaced_daemon_set(self, name, ns):
        return self.current

    def replace_namespaced_daemon_set(self, name, ns, body):
        self.replaced.append(body)


STALE_BODY = {"metadata": {"name": "plugin"},
              "spec": {"selector": {"matchLabels": {"app": "plugin"}},
                       "template": {"metadata": {"annotations": {"config": "none"}},
                                    "spec": {"containers": [{}]}}}}


def test_a_pass_does_not_overwrite_a_daemonset_changed_since_it_looked():
    """`sim set` wrote the chart's DaemonSet (generation 3) while a loop pass that had read
    generation 2 was deciding: the pass's body is stale and is not written (it was, and the
    sim kept the old chart's config for good: no time-slicing on the time-slicing profile)."""
    apps = _Apps(generation=3)
    cluster = SimpleNamespace(apps=apps, core=SimpleNamespace(
        list_namespaced_pod=lambda *a, **k: SimpleNamespace(items=[])))
    objects.apply_daemonset(cluster, "ns", STALE_BODY, seen={"plugin": 2})
    assert apps.replaced == []
    objects.apply_daemonset(cluster, "ns", STALE_BODY, seen={"plugin": 3})  # nothing since
    assert apps.replaced == [STALE_BODY]
    objects.apply_daemonset(cluster, "ns", STALE_BODY)  # `sim set` itself: no look to compare
    assert len(apps.replaced) == 2
