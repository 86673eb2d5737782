"""A cluster-wide lock (a coordination.k8s.io Lease) for checks that fill GPU nodes.

Two runs at once on one cluster, or xdist workers of one run, would otherwise take each
other's GPUs in the middle of a whole-allocation check. The holder deletes the Lease when
done; a Lease whose holder died expires after ``LEASE_SECONDS`` and is taken over.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from collections.abc import Iterator

from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import Cluster
from conformance.cluster.waits import WaitTimeout

LOCK_NAMESPACE = "gpuconf-system"
LEASE_SECONDS = 300       # far longer than any one allocation check holds it
ACQUIRE_TIMEOUT_S = 600.0  # another run's allocation checks take tens of seconds each


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _ensure_namespace(cluster: Cluster) -> None:
    with contextlib.suppress(ApiException):  # exists (RBAC manifest), or we may not create it
        cluster.core.create_namespace({"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": LOCK_NAMESPACE, "labels": {
                                           "app.kubernetes.io/part-of": "gpu-conformance"}}})


@contextlib.contextmanager
def held(cluster: Cluster, name: str, holder: str) -> Iterator[None]:
    from kubernetes import client

    api = client.CoordinationV1Api(cluster.api_client)
    _ensure_namespace(cluster)
    holder = f"{holder}/{os.getpid()}"
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": LOCK_NAMESPACE},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": LEASE_SECONDS,
                     "acquireTime": _now(), "renewTime": _now()}}
    deadline = time.monotonic() + ACQUIRE_TIMEOUT_S
    last_holder = None
    while True:
        try:
            api.create_namespaced_lease(LOCK_NAMESPACE, body)
            break
        except ApiException as exc:
            if exc.status != 409:
                raise
        try:
            lease = api.read_namespaced_lease(name, LOCK_NAMESPACE)
            last_holder = lease.spec.holder_identity
            renewed = lease.spec.renew_time or lease.metadata.creation_timestamp
            if renewed and (_now() - renewed).total_seconds() > (
                    lease.spec.lease_duration_seconds or LEASE_SECONDS):
                api.delete_namespaced_lease(name, LOCK_NAMESPACE)  # its holder died
                continue
        except ApiException as exc:
            if exc.status != 404:
                raise
            continue
        if time.monotonic() > deadline:
            raise WaitTimeout(f"timed out after {ACQUIRE_TIMEOUT_S:.0f}s waiting for lock "
                              f"{LOCK_NAMESPACE}/{name}, held by {last_holder}")
        time.sleep(1.0)
    try:
        yield
    finally:
        with contextlib.suppress(ApiException):
            api.delete_namespaced_lease(name, LOCK_NAMESPACE)
