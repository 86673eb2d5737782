"""A cluster-wide lock (a coordination.k8s.io Lease) for checks that fill GPU nodes.

Two runs at once on one cluster, or xdist workers of one run, would otherwise take each
other's GPUs in the middle of a whole-allocation check. The holder renews the Lease while it
holds it and deletes it when done, but only while it is still the holder (a delete with a
resourceVersion precondition): a run that lost its Lease (paused past its duration, taken over)
never deletes another run's. A Lease whose holder died expires after ``LEASE_SECONDS`` and is
taken over.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import threading
from collections.abc import Iterator

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import Cluster, Conflict, NotFound, already_done, read_or_none
from conformance.cluster.waits import wait_for

LOCK_NAMESPACE = "gpuconf-system"
LEASE_SECONDS = 60        # a dead holder's Lease is taken over after this long
RENEW_EVERY_S = LEASE_SECONDS / 3  # two missed renewals still leave the Lease ours
ACQUIRE_TIMEOUT_S = 600.0  # another run's allocation checks take tens of seconds each


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _ensure_namespace(cluster: Cluster) -> None:
    with contextlib.suppress(ApiException):  # exists (RBAC manifest), or we may not create it
        cluster.core.create_namespace({"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": LOCK_NAMESPACE, "labels": {
                                           "app.kubernetes.io/part-of": "gpu-conformance"}}})


def _expired(lease) -> bool:
    renewed = lease.spec.renew_time or lease.metadata.creation_timestamp
    duration = lease.spec.lease_duration_seconds or LEASE_SECONDS
    return renewed is not None and (_now() - renewed).total_seconds() > duration


class _Holder:
    """One acquisition of the Lease ``name``: acquire, renew in the background, release."""

    def __init__(self, cluster: Cluster, name: str, identity: str) -> None:
        self.api = client.CoordinationV1Api(cluster.api_client)
        self.name = name
        self.identity = identity
        self.stop = threading.Event()
        self.renewer = threading.Thread(target=self._renew_loop, daemon=True,
                                        name=f"lease-{name}")

    def acquire(self) -> None:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": LOCK_NAMESPACE},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": LEASE_SECONDS,
                         "acquireTime": _now(), "renewTime": _now()}}
        holder = None

        def created() -> bool:
            with already_done(Conflict):
                self.api.create_namespaced_lease(LOCK_NAMESPACE, body)
                return True
            return False

        def taken() -> bool:
            nonlocal holder
            if created():
                return True
            lease = self._read()
            if lease is None:
                return False
            holder = lease.spec.holder_identity
            if not _expired(lease):
                return False
            self._delete_if_unchanged(lease)  # its holder died: take the Lease over, if still so
            return created()

        wait_for(f"lock {LOCK_NAMESPACE}/{self.name}", taken, timeout=ACQUIRE_TIMEOUT_S,
                 interval=1.0, tolerate_api_errors=False, describe_last=lambda: f"held by {holder}")
        self.renewer.start()

    def release(self) -> None:
        self.stop.set()
        if self.renewer.is_alive():
            self.renewer.join(timeout=10)
        lease = self._read()
        if lease is not None and lease.spec.holder_identity == self.identity:
            self._delete_if_unchanged(lease)

    def _renew_loop(self) -> None:
        while not self.stop.wait(RENEW_EVERY_S):
            with contextlib.suppress(ApiException):
                lease = self._read()
                if lease is None or lease.spec.holder_identity != self.identity:
                    return  # lost (taken over after an expiry): never renew another's Lease
                lease.spec.renew_time = _now()
                self.api.replace_namespaced_lease(self.name, LOCK_NAMESPACE, lease)

    def _read(self):
        return read_or_none(self.api.read_namespaced_lease, self.name, LOCK_NAMESPACE)

    def _delete_if_unchanged(self, lease) -> None:
        """Delete the Lease as read: a 409 means someone renewed or took it meanwhile."""
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(
            resource_version=lease.metadata.resource_version, uid=lease.metadata.uid))
        with already_done(NotFound, Conflict):
            self.api.delete_namespaced_lease(self.name, LOCK_NAMESPACE, body=options)


@contextlib.contextmanager
def held(cluster: Cluster, name: str, holder: str) -> Iterator[None]:
    """Hold Lease ``name`` for the block; ``holder`` (the run ID) names who holds it."""
    _ensure_namespace(cluster)
    lease = _Holder(cluster, name, f"{holder}/{os.getpid()}")
    lease.acquire()
    try:
        yield
    finally:
        lease.release()
