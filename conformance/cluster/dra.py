"""DRA reads and writes: the resource.k8s.io API, ResourceSlices, DeviceClasses, claims.

Reads are list calls whatever the node count: one for the API groups, one for the API server's
metrics (feature gates, where this identity may read them), one each for DeviceClasses,
gpu.nvidia.com ResourceSlices, the DRA driver's pods and the GPUCluster. DRA objects go through
``CustomObjectsApi`` as plain dicts: the same code works with every client version (the typed
``ResourceV1Api`` exists only in recent ones) and sees fields the client does not model yet
(``extendedResourceName``, ``consumesCounters``).

Writes are the checks' own ResourceClaims, ResourceClaimTemplates and pods, in the test's
labelled namespace.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from conformance.checks import dra as rules
from conformance.checks.gpu_nodes import GpuNode
from conformance.checks.rollout import pod_ready
from conformance.cluster import pods
from conformance.cluster.client import Cluster, Forbidden, NotFound
from conformance.cluster.namespaces import run_labels
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.nvidia import dra

GROUP, VERSION = dra.RESOURCE_GROUP, dra.RESOURCE_VERSION
# A claim is allocated in the scheduling cycle that binds its pod: the pod's own scheduling
# timeout covers it (pods.SCHEDULE_TIMEOUT_S).
ALLOCATION_TIMEOUT_S = pods.SCHEDULE_TIMEOUT_S
# The resourceclaim controller deletes a template's claim once its pod is gone; the scheduler
# then forgets the allocation. Seconds on a loaded 2-core sim.
RELEASE_TIMEOUT_S = 60.0
_GATE_LINE = re.compile(r'^kubernetes_feature_enabled\{name="([^"]+)"[^}]*\}\s+([0-9.]+)')


# --- reads ------------------------------------------------------------------------------------
@dataclass
class DraView:
    """Everything the DRA suite reads once per session."""

    api_versions: list[str]  # served versions of resource.k8s.io
    gates: dict[str, bool] | None  # the API server's feature gates; None: not readable
    gates_note: str
    classes: list[dict]
    slices: list[rules.Slice]
    plugin_pods: list[rules.PluginPod]
    gpucluster: dict | None = None
    gpucluster_crd: bool = False
    unreadable: list[str] = field(default_factory=list)  # reads this identity may not make
    pools: list[rules.Pool] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pools = rules.pools(self.slices)

    @property
    def served(self) -> bool:
        return VERSION in self.api_versions

    @property
    def nvidia_classes(self) -> list[dict]:
        return [c for c in self.classes
                if (c.get("metadata") or {}).get("name") in dra.CLASS_BY_NAME]

    @property
    def driver_present(self) -> bool:
        """Whether the NVIDIA DRA driver is here at all (a class, a slice or its plugin)."""
        return bool(self.nvidia_classes or self.pools or self.plugin_pods)

    def absent_reason(self) -> str:
        served = (f"{dra.RESOURCE_API} is served" if self.served else
                  f"{dra.RESOURCE_API} is not served (served: "
                  f"{', '.join(self.api_versions) or 'none'})")
        return (f"no NVIDIA DRA driver in this cluster (no DeviceClass {dra.GPU_CLASS.name}, no "
                f"{dra.DRIVER} ResourceSlice, no kubelet plugin pod); {served}")

    def pools_by_node(self) -> dict[str, list[rules.Pool]]:
        out: dict[str, list[rules.Pool]] = {}
        for pool in self.pools:
            if pool.node:
                out.setdefault(pool.node, []).append(pool)
        return out

    def plugin_by_node(self) -> dict[str, rules.PluginPod]:
        out: dict[str, rules.PluginPod] = {}
        for pod in self.plugin_pods:
            if pod.node and (pod.node not in out or pod.ready):
                out[pod.node] = pod
        return out

    def paths(self, nodes: Iterable[GpuNode]) -> dict[str, str]:
        """The allocation path of every GPU node (device-plugin, dra, both, none)."""
        by_node, plugins = self.pools_by_node(), self.plugin_by_node()
        return {n.name: rules.allocation_path(n, bool(by_node.get(n.name)), n.name in plugins)
                for n in nodes}

    def stacks(self, nodes: Iterable[GpuNode], *, cluster_policy: bool) -> dict[str, str]:
        """Which GPU Operator resource serves each GPU node (ClusterPolicy, GPUCluster, none)."""
        return {n.name: rules.serving_stack(n, cluster_policy=cluster_policy,
                                            gpu_cluster=self.gpucluster is not None)
                for n in nodes}

    def class_hint(self) -> str:
        """What DRA-API-001 finds wrong, for a claim that was not allocated ("" if nothing)."""
        problems = rules.class_problems(self.classes)
        return ("; DeviceClass problems (DRA-API-001): " + "; ".join(problems)) if problems else ""

    def gates_text(self) -> str:
        if self.gates is None:
            return f"feature gates not readable ({self.gates_note})"
        on = [g for g in dra.API_GATES if self.gates.get(g)]
        off = [g for g in dra.API_GATES if g in self.gates and not self.gates[g]]
        return f"gates on: {', '.join(on) or 'none'}; off: {', '.join(off) or 'none'}"


def read_view(cluster: Cluster, *, gpucluster: bool = True) -> DraView:
    """One list call per kind. A read this identity is refused (403) is recorded, not raised:
    the device plugin checks still run on what could be read, the DRA checks say what not."""
    unreadable: list[str] = []

    def read(what: str, call, default):
        try:
            return call()
        except Forbidden as exc:
            unreadable.append(f"{what}: {exc.status} {exc.reason}")
            return default

    versions = served_versions(cluster)
    gates, note = api_feature_gates(cluster)
    classes, slices = [], []
    if VERSION in versions:
        classes = read("list deviceclasses", lambda: _list(cluster, "deviceclasses"), [])
        slices = [rules.slice_from_api(s) for s in read(
            "list resourceslices", lambda: _list(cluster, "resourceslices",
                                                 field_selector=f"spec.driver={dra.DRIVER}"),
            [])]
    plugin_pods = read("list pods", lambda: read_plugin_pods(cluster), [])
    found, crd = (read("list gpuclusters", lambda: read_gpucluster(cluster), (None, False))
                  if gpucluster else (None, False))
    return DraView(versions, gates, note, classes, slices, plugin_pods, found, crd, unreadable)


def served_versions(cluster: Cluster) -> list[str]:
    for group in k8s.ApisApi(cluster.api_client).get_api_versions().groups or []:
        if group.name == GROUP:
            return [v.version for v in group.versions or []]
    return []


def api_feature_gates(cluster: Cluster) -> tuple[dict[str, bool] | None, str]:
    """The API server's ``kubernetes_feature_enabled`` metric, where this identity may read
    ``/metrics``; (None, why) otherwise."""
    try:
        text = get_text(cluster, "/metrics")
    except ApiException as exc:
        return None, f"GET /metrics: {exc.status} {exc.reason}"
    gates = {m[1]: float(m[2]) == 1.0 for m in map(_GATE_LINE.match, text.splitlines()) if m}
    return (gates, "") if gates else (None, "no kubernetes_feature_enabled metric")


def get_text(cluster: Cluster, path: str) -> str:
    """A raw GET through the suite's client (counted and retried like every other call)."""
    return cluster.raw("GET", path)


def _list(cluster: Cluster, plural: str, namespace: str | None = None, **kwargs) -> list[dict]:
    if namespace:
        doc = cluster.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural,
                                                           **kwargs)
    else:
        doc = cluster.custom.list_cluster_custom_object(GROUP, VERSION, plural, **kwargs)
    return list(doc.get("items") or [])


def read_plugin_pods(cluster: Cluster) -> list[rules.PluginPod]:
    """The DRA driver's kubelet plugin pods (DaemonSet pods carrying the gpus container)."""
    out = []
    for pod in cluster.core.list_pod_for_all_namespaces(label_selector=dra.POD_SELECTOR).items:
        if not any(o.kind == "DaemonSet" for o in pod.metadata.owner_references or []):
            continue
        container = next((c for c in pod.spec.containers if c.name == dra.GPU_CONTAINER), None)
        if container is None:
            continue
        env = {e.name: e.value for e in container.env or []}
        out.append(rules.PluginPod(pod.metadata.name, pod.metadata.namespace, pod.spec.node_name,
                                   pod_ready(pod), container.image,
                                   dra.parse_feature_gates(env.get(dra.FEATURE_GATES_ENV))))
    return out


def read_gpucluster(cluster: Cluster) -> tuple[dict | None, bool]:
    """(the GPU Operator's GPUCluster or None, whether its CRD is served)."""
    try:
        items = cluster.custom.list_cluster_custom_object(*dra.GPUCLUSTER_API).get("items", [])
    except NotFound:
        return None, False
    return (items[0] if items else None), True


def list_claims(cluster: Cluster, namespace: str | None = None) -> list[dict]:
    return _list(cluster, "resourceclaims", namespace)


def list_templates(cluster: Cluster) -> list[dict]:
    return _list(cluster, "resourceclaimtemplates")


def allocated_devices(claims: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """(pool, device) of every gpu.nvidia.com device the claims hold."""
    return {(r.get("pool"), r.get("device")) for c in claims for r in results(c)
            if r.get("driver") == dra.DRIVER}


def results(claim: Mapping[str, Any]) -> list[dict]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


def reserved_for(claim: Mapping[str, Any]) -> list[str]:
    return [r.get("name") for r in (claim.get("status") or {}).get("reservedFor") or []]


# --- writes: the checks' own claims and pods --------------------------------------------------
def request(name: str = "gpu", *, count: int | None = 1, selectors: Iterable[str] = (),
            device_class: str = dra.GPU_CLASS.name, all_devices: bool = False) -> dict:
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if all_devices:
        exactly["allocationMode"] = "All"
    elif count is not None:
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exactly}


def claim_spec(*requests: dict, config: Mapping[str, Any] | None = None) -> dict:
    devices: dict[str, Any] = {"requests": list(requests) or [request()]}
    if config is not None:
        devices["config"] = [{"opaque": {"driver": dra.DRIVER, "parameters": dict(config)}}]
    return {"devices": devices}


def create_template(cluster: Cluster, namespace: str, prefix: str, spec: dict,
                    run_id: str) -> str:
    name = f"{prefix}-{secrets.token_hex(3)}"
    cluster.custom.create_namespaced_custom_object(GROUP, VERSION, namespace,
                                                   "resourceclaimtemplates", {
        "apiVersion": dra.RESOURCE_API, "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "labels": run_labels(run_id)}, "spec": {"spec": spec}})
    return name


def create_claim(cluster: Cluster, namespace: str, prefix: str, spec: dict, run_id: str) -> str:
    name = f"{prefix}-{secrets.token_hex(3)}"
    cluster.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", {
        "apiVersion": dra.RESOURCE_API, "kind": "ResourceClaim",
        "metadata": {"name": name, "labels": run_labels(run_id)}, "spec": spec})
    return name


def claim_pod_manifest(prefix: str, run_id: str, *, template: str | None = None,
                       claim: str | None = None, node: str | None = None,
                       gpus: int | None = None, image: str = pods.DEFAULT_IMAGE,
                       command: list[str] | None = None) -> dict:
    """A restricted pod that uses one ResourceClaim (from ``template``, or the shared
    ``claim``), or with ``gpus`` asks for nvidia.com/gpu (the extended-resource path)."""
    spec = pods.PodSpec(prefix, gpus=gpus, image=image, command=command,
                        node_selector={"kubernetes.io/hostname": node} if node else {})
    body = spec.manifest(run_labels(run_id))
    if template or claim:
        ref = {"name": "gpu", **({"resourceClaimTemplateName": template} if template
                                 else {"resourceClaimName": claim})}
        body["spec"]["resourceClaims"] = [ref]
        body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return body


def create_claim_pod(cluster: Cluster, namespace: str, prefix: str, run_id: str,
                     **kwargs: Any) -> str:
    body = claim_pod_manifest(prefix, run_id, **kwargs)
    cluster.core.create_namespaced_pod(namespace, body)
    return body["metadata"]["name"]


def claims_of_pod(cluster: Cluster, namespace: str, pod: str) -> list[dict]:
    """The claims a pod uses: made for it (owned by it) or reserved for it."""
    return [c for c in list_claims(cluster, namespace)
            if pod in reserved_for(c) or any(
                o.get("kind") == "Pod" and o.get("name") == pod
                for o in (c.get("metadata") or {}).get("ownerReferences") or [])]


def place(cluster: Cluster, namespace: str, pod: str, *,
          expect: bool = True) -> tuple[str | None, str | None]:
    """(node, None) once bound, (None, the scheduler's reason) once refused. A refusal that is
    not about claims (their creation still in flight) gets a second look when a bind is due."""
    node, reason = pods.wait_placement(cluster, namespace, pod)
    if node is None and expect and dra.UNSATISFIABLE_REASON not in (reason or ""):
        try:
            return pods.wait_scheduled(cluster, namespace, pod), None
        except WaitTimeout:
            pass
    return node, reason


def wait_allocated(cluster: Cluster, namespace: str, pod: str,
                   timeout: float = ALLOCATION_TIMEOUT_S) -> list[dict]:
    """The pod's claims once each is allocated and reserved for it."""
    def ready() -> list[dict] | None:
        claims = claims_of_pod(cluster, namespace, pod)
        done = claims and all(results(c) and pod in reserved_for(c) for c in claims)
        return claims if done else None

    return wait_for(f"the ResourceClaim(s) of pod {namespace}/{pod} to be allocated and "
                    "reserved for it", ready, timeout=timeout, interval=0.2,
                    describe_last=lambda: describe_claims(cluster, namespace, pod))


def describe_claims(cluster: Cluster, namespace: str, pod: str) -> str:
    claims = claims_of_pod(cluster, namespace, pod)
    lines = [f"claim {(c.get('metadata') or {}).get('name')}: allocated="
             f"{[(r.get('pool'), r.get('device')) for r in results(c)]} reservedFor="
             f"{reserved_for(c)}" for c in claims] or ["(no claim for the pod yet)"]
    return "\n".join(lines) + "\n" + pods.scheduling_events(cluster, namespace, pod)


def wait_claims_gone(cluster: Cluster, namespace: str, names: Iterable[str],
                     timeout: float = RELEASE_TIMEOUT_S) -> None:
    names = set(names)
    wait_for(f"ResourceClaims {', '.join(sorted(names))} in {namespace} to be deleted",
             lambda: not names & {(c.get("metadata") or {}).get("name")
                                  for c in list_claims(cluster, namespace)},
             timeout=timeout, interval=0.25)


def devices_of(claims: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(pool, device) of the gpu.nvidia.com devices allocated to ``claims``, in order."""
    return [(r.get("pool"), r.get("device")) for c in claims for r in results(c)
            if r.get("driver") == dra.DRIVER]
