"""Labelled test namespaces: created per test, deleted at teardown, swept on interrupt.

Every object the suite creates carries the run labels, so ``gpuconf cleanup`` and the
interrupt handler can find leftovers without guessing by name.
"""

from __future__ import annotations

import re
import secrets
import time

from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import Cluster, NotFound, already_done, read_or_none
from conformance.cluster.waits import wait_for
from conformance.common.errors import NotConverged

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "gpu-conformance"
RUN_LABEL = "gpuconf.io/run-id"
NAMESPACE_PREFIX = "gpuconf-"
NAMESPACE_DELETE_TIMEOUT_S = 60.0  # namespace GC on a busy 2-core sim takes seconds, not minutes
# Pods are refused until the controller manager has made the namespace's default
# ServiceAccount (the e2e framework waits for it too); that takes milliseconds to seconds.
SERVICE_ACCOUNT_TIMEOUT_S = 30.0


def run_labels(run_id: str) -> dict[str, str]:
    return {MANAGED_BY: MANAGER, RUN_LABEL: run_id}


def namespace_name(test_name: str) -> str:
    """``gpuconf-<test>-<random>``: DNS-1123 clean and cut to the 63-character limit."""
    base = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")
    suffix = secrets.token_hex(3)
    base = base[: 63 - len(NAMESPACE_PREFIX) - len(suffix) - 1].rstrip("-")
    return f"{NAMESPACE_PREFIX}{base}-{suffix}"


def create_namespace(cluster: Cluster, test_name: str, run_id: str) -> str:
    name = namespace_name(test_name)
    labels = {
        **run_labels(run_id),
        # The suite's own pods follow the restricted profile; the API server enforces it.
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }
    cluster.core.create_namespace({"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": name, "labels": labels}})
    wait_for_default_service_account(cluster, name)
    return name


def wait_for_default_service_account(cluster: Cluster, namespace: str) -> None:
    def exists() -> bool:
        return read_or_none(cluster.core.read_namespaced_service_account, "default",
                            namespace) is not None

    wait_for(f"the default ServiceAccount of namespace {namespace}", exists,
             timeout=SERVICE_ACCOUNT_TIMEOUT_S, interval=0.1)


def delete_namespace(cluster: Cluster, name: str, *, wait: bool = False,
                     timeout: float = NAMESPACE_DELETE_TIMEOUT_S) -> None:
    try:
        cluster.core.delete_namespace(name, grace_period_seconds=0,
                                      propagation_policy="Background")
    except NotFound:
        return
    force_delete_pods(cluster, name)
    if wait:
        wait_until_deleted(cluster, name, timeout=timeout)


def wait_until_deleted(cluster: Cluster, name: str, *, description: str | None = None,
                       timeout: float = NAMESPACE_DELETE_TIMEOUT_S) -> None:
    """Until namespace ``name`` (already deleted) is gone. The pods left in it are forced on
    every poll: a pod created just before the namespace went Terminating (a DaemonSet's last
    one) is missed by an earlier forcing and, on a KWOK node, would hold it for 30 s."""
    def gone() -> bool:
        if _gone(cluster, name):
            return True
        force_delete_pods(cluster, name)
        return False

    wait_for(description or f"namespace {name} to be deleted", gone, timeout=timeout)


def force_delete_pods(cluster: Cluster, name: str) -> None:
    """Pods on KWOK nodes only go once their deletion is played out (the namespace controller
    deletes them with their 30 s grace period and comes back after it): force them now."""
    with already_done(NotFound):
        for pod in cluster.core.list_namespaced_pod(name).items:
            with already_done(NotFound):
                cluster.core.delete_namespaced_pod(pod.metadata.name, name,
                                                   grace_period_seconds=0)


def _gone(cluster: Cluster, name: str) -> bool:
    try:
        cluster.core.read_namespace(name)
    except NotFound:
        return True
    except ApiException:
        return False
    return False



def leftover_namespaces(cluster: Cluster, run_id: str | None = None) -> list[str]:
    selector = f"{MANAGED_BY}={MANAGER}" + (f",{RUN_LABEL}={run_id}" if run_id else "")
    items = cluster.core.list_namespace(label_selector=selector).items
    return [ns.metadata.name for ns in items]


class DeletionStalled(NotConverged):
    """A namespace the namespace controller cannot finish deleting: it cannot discover every
    API (an aggregated API, such as custom.metrics.k8s.io, is unavailable), so waiting longer
    does not help until that API is back."""


def _gone_unless_stalled(cluster: Cluster, name: str) -> bool:
    try:
        ns = cluster.core.read_namespace(name)
    except NotFound:
        return True
    for cond in ns.status.conditions or []:
        if cond.type == "NamespaceDeletionDiscoveryFailure" and cond.status == "True":
            raise DeletionStalled(f"namespace {name} stays Terminating: {cond.message}")
    return False


def sweep(cluster: Cluster, run_id: str | None = None, *, wait: bool = True) -> list[str]:
    """Delete every namespace of this run (or of every run) and wait until they are gone;
    DeletionStalled at once where the namespace controller reports it cannot finish one."""
    names = leftover_namespaces(cluster, run_id)
    for name in names:
        delete_namespace(cluster, name)
    deadline = time.monotonic() + NAMESPACE_DELETE_TIMEOUT_S
    if wait:
        for name in names:
            wait_for(f"namespace {name} to be deleted",
                     lambda n=name: _gone_unless_stalled(cluster, n),
                     timeout=max(1.0, deadline - time.monotonic()))
    return names
