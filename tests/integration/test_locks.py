"""The GPU-allocation Lease: renewed while held, and released only by its holder."""

from __future__ import annotations

import time

from kubernetes import client

from conformance.cluster import locks


def _lease(cluster, name):
    return client.CoordinationV1Api(cluster.api_client).read_namespaced_lease(
        name, locks.LOCK_NAMESPACE)


def test_release_never_deletes_another_runs_lease(sim_cluster):
    name = "gpuconf-itest-takeover"
    api = client.CoordinationV1Api(sim_cluster.api_client)
    with locks.held(sim_cluster, name, "run-a"):
        # run-a paused past its duration; run-b took the Lease over
        lease = _lease(sim_cluster, name)
        lease.spec.holder_identity = "run-b/1"
        api.replace_namespaced_lease(name, locks.LOCK_NAMESPACE, lease)
    try:
        assert _lease(sim_cluster, name).spec.holder_identity == "run-b/1"
    finally:
        api.delete_namespaced_lease(name, locks.LOCK_NAMESPACE)


def test_lease_is_renewed_while_held_and_gone_after(sim_cluster, monkeypatch):
    monkeypatch.setattr(locks, "RENEW_EVERY_S", 0.5)
    name = "gpuconf-itest-renew"
    with locks.held(sim_cluster, name, "run-a"):
        first = _lease(sim_cluster, name).spec.renew_time
        time.sleep(2.0)
        assert _lease(sim_cluster, name).spec.renew_time > first
    api = client.CoordinationV1Api(sim_cluster.api_client)
    assert name not in {item.metadata.name for item in
                        api.list_namespaced_lease(locks.LOCK_NAMESPACE).items}
