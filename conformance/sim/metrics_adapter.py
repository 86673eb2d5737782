"""The custom metrics API in the sim (profiles with ``custom_metrics="test-adapter"``): the
test adapter of sigs.k8s.io/custom-metrics-apiserver as a process of the control plane
(``controlplane/metrics_adapter.py``), registered as upstream's test-adapter-deploy registers
it: Service ``custom-metrics/custom-metrics-apiserver`` (ports https and http) and the
APIServices v1beta2 and v1beta1 of custom.metrics.k8s.io, trusting the cluster's CA. The Service
has no selector: its Endpoints name the address the process listens on, and a Pod object
that stands for the process there (the API server's service proxy, the /write-metrics path,
only proxies to an address a Pod has: registry/core/service/storage isValidAddress); no
scheduler takes it, so it stays where the sim puts it, as KWOK's nodes stand for machines.

Fault: ``hpa-metrics-api-down`` leaves the APIServices and Service but no adapter process (the
API server marks the APIServices unavailable, as with a crashed adapter pod).
"""

from __future__ import annotations

import base64
from pathlib import Path

from conformance.binaries import binaries
from conformance.cluster.client import Cluster, Conflict, NotFound, already_done
from conformance.cluster.waits import wait_for
from conformance.common.console import Progress
from conformance.controlplane import metrics_adapter as adapter
from conformance.controlplane.components import ClusterState, ControlPlane
from conformance.sim import objects
from conformance.sim.operator_plan import SimState
from conformance.sim.profiles import Profile

TEST_ADAPTER = "test-adapter"
API_DOWN = "hpa-metrics-api-down"
_LABELS = {objects.STANDIN_LABEL: "true"}
NO_SCHEDULER = "gpuconf-sim-host-process"  # no scheduler answers to it: the pod stays unbound
# The API server's availability controller checks an APIService within a second or two of its
# backend answering; 30 s covers a loaded 2-core sim.
API_AVAILABLE_TIMEOUT_S = 30.0


def wanted(profile: Profile) -> bool:
    return profile.custom_metrics == TEST_ADAPTER


def ensure(cluster: Cluster, state: ClusterState, sim_state: SimState,
           progress: Progress) -> None:
    """The adapter registered and running where the profile wants it (stopped under
    ``hpa-metrics-api-down``); neither elsewhere. Its PID is the cluster state's, so ``sim
    down`` stops it too."""
    want = wanted(sim_state.resolve_profile())
    if want:
        _register(cluster, state)
    else:
        _unregister(cluster)
    run = want and not sim_state.has(API_DOWN)
    if ControlPlane(state.name).run_or_stop(state, adapter.COMPONENT, run,
                                            binaries.require_metrics_adapter, progress):
        _register(cluster, state)  # a port picked again moves its endpoints
    if want:  # the API server has seen the adapter come or go before anyone looks
        wait_for("the custom metrics API (APIServices of custom.metrics.k8s.io) to be "
                 + ("Available" if run else "unavailable"),
                 lambda: _available(cluster) == run, timeout=API_AVAILABLE_TIMEOUT_S,
                 progress=progress)


def _register(cluster: Cluster, state: ClusterState) -> None:
    objects.ensure_namespace(cluster, adapter.NAMESPACE, _LABELS)
    ports = {"https": state.ports[adapter.COMPONENT], "http": state.ports[adapter.WRITE_PORT]}
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": adapter.SERVICE, "labels": _LABELS},
               "spec": {"ports": [{"name": "https", "port": 443, "targetPort": ports["https"]},
                                  {"name": "http", "port": 80, "targetPort": ports["http"]}]}}
    with already_done(Conflict):
        cluster.core.create_namespaced_service(adapter.NAMESPACE, service)
    _ensure_process_pod(cluster)
    # Endpoints, not an EndpointSlice: the API server's service proxy (the /write-metrics path)
    # reads Endpoints; kube-controller-manager's EndpointSlice mirroring makes the slice the
    # aggregator reads from them, as for any Service without a selector.
    endpoints = {"apiVersion": "v1", "kind": "Endpoints",
                 "metadata": {"name": adapter.SERVICE, "labels": _LABELS},
                 "subsets": [{"addresses": [{"ip": adapter.host_ip(), "targetRef": {
                     "kind": "Pod", "namespace": adapter.NAMESPACE, "name": adapter.SERVICE}}],
                              "ports": [{"name": n, "port": p, "protocol": "TCP"}
                                        for n, p in ports.items()]}]}
    try:
        cluster.core.create_namespaced_endpoints(adapter.NAMESPACE, endpoints)
    except Conflict:
        cluster.core.replace_namespaced_endpoints(adapter.SERVICE, adapter.NAMESPACE, endpoints)
    ca = base64.b64encode((Path(state.folder) / "pki" / "ca.crt").read_bytes()).decode()
    for priority, version in enumerate(adapter.VERSIONS):
        body = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": f"{version}.{adapter.GROUP}", "labels": _LABELS},
                "spec": {"group": adapter.GROUP, "version": version, "caBundle": ca,
                         "service": {"name": adapter.SERVICE, "namespace": adapter.NAMESPACE,
                                     "port": 443},
                         "groupPriorityMinimum": 100, "versionPriority": 200 - 100 * priority}}
        with already_done(Conflict):
            cluster.apiregistration.create_api_service(body)


def _ensure_process_pod(cluster: Cluster) -> None:
    """The Pod that stands for the adapter process: Running at this host's address."""
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": adapter.SERVICE, "labels": {**_LABELS, "app": adapter.SERVICE}},
           "spec": {"schedulerName": NO_SCHEDULER, "automountServiceAccountToken": False,
                    "containers": [{"name": "test-adapter", "image": "test-adapter"}]}}
    with already_done(Conflict):
        cluster.core.create_namespaced_pod(adapter.NAMESPACE, pod)
    address = adapter.host_ip()
    cluster.core.patch_namespaced_pod_status(adapter.SERVICE, adapter.NAMESPACE, {"status": {
        "phase": "Running", "podIP": address, "podIPs": [{"ip": address}]}})


def _available(cluster: Cluster) -> bool:
    return all(any(c.type == "Available" and c.status == "True" for c in (
        cluster.apiregistration.read_api_service(f"{v}.{adapter.GROUP}").status.conditions
        or [])) for v in adapter.VERSIONS)


def _unregister(cluster: Cluster) -> None:
    for version in adapter.VERSIONS:
        with already_done(NotFound):
            cluster.apiregistration.delete_api_service(f"{version}.{adapter.GROUP}")
    with already_done(NotFound):
        cluster.core.delete_namespace(adapter.NAMESPACE)
