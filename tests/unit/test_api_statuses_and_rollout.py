"""API statuses mapped once (cluster/client.py) and rollouts judged once (cluster/rollout.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kubernetes.client.exceptions import ApiException

from conformance.cluster import rollout
from conformance.cluster.client import (
    Conflict,
    Forbidden,
    NotFound,
    already_done,
    create_or_replace,
    read_or_none,
)


def _raise(exc: Exception):
    def call(*_a, **_k):
        raise exc
    return call


def test_read_or_none_is_none_only_for_not_found():
    assert read_or_none(lambda name: {"name": name}, "x") == {"name": "x"}
    assert read_or_none(_raise(NotFound(status=404, reason="Not Found"))) is None
    with pytest.raises(Forbidden):
        read_or_none(_raise(Forbidden(status=403, reason="Forbidden")))
    with pytest.raises(ApiException):
        read_or_none(_raise(ApiException(status=500, reason="Internal")))


def test_create_or_replace_replaces_only_on_conflict():
    assert create_or_replace(lambda: "created", lambda: "replaced") == "created"
    assert create_or_replace(_raise(Conflict(status=409, reason="Conflict")),
                             lambda: "replaced") == "replaced"
    with pytest.raises(NotFound):
        create_or_replace(_raise(NotFound(status=404, reason="Not Found")), lambda: "replaced")


def test_already_done_swallows_only_the_named_statuses():
    with already_done(NotFound):
        raise NotFound(status=404, reason="Not Found")
    with already_done(NotFound, Conflict):
        raise Conflict(status=409, reason="Conflict")
    with pytest.raises(Conflict), already_done(NotFound):
        raise Conflict(status=409, reason="Conflict")


def test_the_client_raises_the_mapped_classes():
    """The kubernetes client itself maps 404/409/403 to these classes (from_response)."""
    for status, cls in ((404, NotFound), (409, Conflict), (403, Forbidden)):
        resp = SimpleNamespace(status=status, reason="r", data=b"", getheaders=lambda: {},
                               headers={})
        with pytest.raises(cls):
            ApiException.from_response(http_resp=resp, body=None, data=None)


def _ds(desired=2, updated=2, ready=2, generation=3, observed=3):
    return SimpleNamespace(
        metadata=SimpleNamespace(name="ds", generation=generation),
        status=SimpleNamespace(desired_number_scheduled=desired, updated_number_scheduled=updated,
                               number_ready=ready, observed_generation=observed))


@pytest.mark.parametrize("ds, done", [
    (_ds(), True),
    (_ds(ready=1), False),                    # a pod not Ready
    (_ds(updated=1), False),                  # a pod on the old template
    (_ds(observed=2), False),                 # the controller has not seen the new spec
    (_ds(desired=0, updated=0, ready=0), True),   # for no node, once seen
    (_ds(desired=0, updated=0, ready=0, observed=2), False),
])
def test_a_daemonset_is_rolled_out_only_when_every_pod_is_current_and_ready(ds, done):
    assert rollout.DaemonSetRollout.of(ds).done is done


@pytest.mark.parametrize("replicas, available, ok", [
    (1, 1, True), (1, 0, False), (None, 0, False), (None, 1, True), (3, 2, False)])
def test_a_deployment_is_available_with_as_many_replicas_as_asked(replicas, available, ok):
    d = SimpleNamespace(metadata=SimpleNamespace(name="d"), spec=SimpleNamespace(
        replicas=replicas), status=SimpleNamespace(available_replicas=available))
    assert rollout.deployment_available(d) is ok


def test_workloads_pending_names_what_is_not_rolled_out():
    ns = "n"
    apps = SimpleNamespace(
        list_namespaced_daemon_set=lambda _ns: SimpleNamespace(items=[_ds(ready=1)]),
        list_namespaced_deployment=lambda _ns: SimpleNamespace(items=[SimpleNamespace(
            metadata=SimpleNamespace(name="op"), spec=SimpleNamespace(replicas=1),
            status=SimpleNamespace(available_replicas=0))]))
    cluster = SimpleNamespace(apps=apps)
    assert rollout.workloads_pending(cluster, ns) == \
        "ds (1/2 ready, 2 updated), op (0/1 available)"
    apps.list_namespaced_daemon_set = lambda _ns: SimpleNamespace(items=[])
    assert rollout.workloads_pending(cluster, ns) == "no DaemonSet yet"
