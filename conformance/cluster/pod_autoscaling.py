"""GPU Deployments scaled by the HPA on a custom metric: the custom metrics API the cluster
registers, the metric written through its adapter, and where the Deployment's pods run (the
decisions are ``checks/pod_autoscaling.py``'s).

The metric is an ``Object`` metric of the Deployment itself, written through the API server's
service proxy to the adapter's ``/write-metrics`` API (custom-metrics-apiserver's test adapter;
an adapter that takes no writes makes the checks not-run with the reason).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from conformance.checks import pod_autoscaling as hpa
from conformance.checks.gpu_nodes import GpuNode
from conformance.cluster.client import Cluster, NotFound, already_done
from conformance.cluster.evidence import to_yaml
from conformance.cluster.namespaces import run_labels
from conformance.cluster.pods import PodSpec
from conformance.cluster.waits import WaitTimeout, wait_for, wait_until_done

# The adapter serves a written value at once; the aggregator reaches it in well under a second.
METRIC_SERVED_TIMEOUT_S = 15.0
# The HPA controller acts every sync period (15 s upstream, 2 s on the sim) and scales up in
# one step: four periods of a default controller, plus slack.
SCALE_TIMEOUT_S = 90.0
# The scaled pods are bound at once and Run in seconds on the sim; on a real cluster they pull
# the image first.
PODS_RUNNING_TIMEOUT_S = 180.0
# A new pod that no node can take (Insufficient nvidia.com/gpu) this long means no GPU is
# coming for it (a cluster autoscaler adds a node in minutes: SCALED_POD_GRACE_S is not meant
# to wait for one; the check runs where GPUs are free).
SCALED_POD_GRACE_S = 20.0
# behavior.scaleDown.stabilizationWindowSeconds of the check's HPA (upstream default 300 s).
STABILIZATION_WINDOW_S = 10
SCALE_DOWN_TIMEOUT_S = STABILIZATION_WINDOW_S + SCALE_TIMEOUT_S
DEPLOYMENT = "gpu-hpa"


def metrics_apis(cluster: Cluster) -> list[hpa.MetricsApi]:
    """The cluster's APIServices of custom.metrics.k8s.io, as the checks read them."""
    found = []
    for name in hpa.api_service_names():
        try:
            obj = cluster.apiregistration.read_api_service(name)
        except NotFound:
            continue
        cond = next((c for c in (obj.status.conditions or []) if c.type == "Available"), None)
        svc = obj.spec.service
        found.append(hpa.MetricsApi(name, svc.namespace if svc else None,
                                    svc.name if svc else None,
                                    cond is not None and cond.status == "True",
                                    (cond.message or cond.reason or "") if cond else ""))
    return found


@dataclass(frozen=True)
class ScaledDeployment:
    """The check's Deployment and the metric it scales on."""

    namespace: str
    name: str
    metric: str

    @property
    def selector(self) -> str:
        return f"app={self.name}"

    def metric_path(self) -> str:
        return f"namespaces/{self.namespace}/deployments.apps/{self.name}/{self.metric}"


def create_deployment(cluster: Cluster, namespace: str, replicas: int, run_id: str, *,
                      image: str, metric: str) -> ScaledDeployment:
    """A Deployment of ``replicas`` pods of one GPU each that hold their GPU until deleted."""
    pod = PodSpec(DEPLOYMENT, gpus=1, image=image, command=["sleep", "infinity"],
                  restart_policy="Always").manifest(run_labels(run_id))
    labels = {**run_labels(run_id), "app": DEPLOYMENT}
    body = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": DEPLOYMENT, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": DEPLOYMENT}},
                     "template": {"metadata": {"labels": labels}, "spec": pod["spec"]}}}
    cluster.apps.create_namespaced_deployment(namespace, body)
    return ScaledDeployment(namespace, DEPLOYMENT, metric)


def has_write_port(cluster: Cluster, api: hpa.MetricsApi) -> bool:
    """Whether the adapter's Service has the port the test adapter serves /write-metrics on."""
    try:
        svc = cluster.core.read_namespaced_service(api.service_name, api.service_namespace)
    except NotFound:
        return False
    return any(p.name == hpa.WRITE_PORT for p in svc.spec.ports or [])


def write_metric(cluster: Cluster, api: hpa.MetricsApi, target: ScaledDeployment,
                 value: int) -> None:
    """Write the Deployment's metric through the adapter's /write-metrics API (service proxy)."""
    path = (f"/api/v1/namespaces/{api.service_namespace}/services/{api.service_name}:"
            f"{hpa.WRITE_PORT}/proxy/write-metrics/{target.metric_path()}")
    cluster.raw("POST", path, body=str(value))  # a JSON string: a quantity


def served_value(cluster: Cluster, api: hpa.MetricsApi, target: ScaledDeployment) -> str | None:
    """The metric's value as the custom metrics API serves it to the HPA; None while it serves
    none."""
    version = api.name.split(".", 1)[0]
    try:
        doc = json.loads(cluster.raw("GET", f"/apis/{hpa.GROUP}/{version}/"
                                            f"{target.metric_path()}"))
    except NotFound:
        return None
    items = doc.get("items") if doc.get("kind", "").endswith("List") else [doc]
    return str(items[0].get("value")) if items else None


def wait_served(cluster: Cluster, api: hpa.MetricsApi, target: ScaledDeployment,
                value: int) -> None:
    """Until the custom metrics API serves ``value`` for the Deployment (what the HPA reads)."""
    wait_for(f"the custom metrics API to serve {target.metric}={value} for Deployment "
             f"{target.name}", lambda: served_value(cluster, api, target) == str(value),
             timeout=METRIC_SERVED_TIMEOUT_S,
             describe_last=lambda: f"served: {served_value(cluster, api, target)}")


def create_hpa(cluster: Cluster, target: ScaledDeployment, max_replicas: int,
               run_id: str) -> str:
    """An HPA on the Deployment's Object metric (AverageValue TARGET_PER_POD), 1 to
    ``max_replicas`` replicas, scale-down stabilized for STABILIZATION_WINDOW_S."""
    body = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": target.name, "labels": run_labels(run_id)},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": target.name},
                     "minReplicas": 1, "maxReplicas": max_replicas,
                     "metrics": [{"type": "Object", "object": {
                         "describedObject": {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": target.name},
                         "metric": {"name": target.metric},
                         "target": {"type": "AverageValue",
                                    "averageValue": str(hpa.TARGET_PER_POD)}}}],
                     "behavior": {"scaleDown": {
                         "stabilizationWindowSeconds": STABILIZATION_WINDOW_S}}}}
    cluster.autoscaling.create_namespaced_horizontal_pod_autoscaler(target.namespace, body)
    return target.name


def delete(cluster: Cluster, target: ScaledDeployment) -> None:
    """The HPA first (it would scale the Deployment back), then the Deployment and its pods
    (at once: a simulated node's pods only go when forced)."""
    with already_done(NotFound):
        cluster.autoscaling.delete_namespaced_horizontal_pod_autoscaler(target.name,
                                                                        target.namespace)
    with already_done(NotFound):
        cluster.apps.delete_namespaced_deployment(target.name, target.namespace,
                                                  propagation_policy="Background")
    cluster.core.delete_collection_namespaced_pod(target.namespace,
                                                  label_selector=target.selector,
                                                  grace_period_seconds=0)


@dataclass(frozen=True)
class ScaleState:
    """The Deployment's wanted replicas and its pods: Running on a GPU node, and those no
    node could take (the scheduler's reason)."""

    wanted: int
    pods: int
    on_gpu_nodes: int
    unschedulable: tuple[str, ...]  # "pod: message" of pods the scheduler could not place

    def __str__(self) -> str:
        text = (f"{self.wanted} replicas wanted, {self.pods} pods, {self.on_gpu_nodes} Running "
                "on GPU nodes")
        return text + (f"; unschedulable: {'; '.join(self.unschedulable)}"
                       if self.unschedulable else "")


def scale_state(cluster: Cluster, target: ScaledDeployment,
                gpu_nodes: list[GpuNode]) -> ScaleState:
    names = {n.name for n in gpu_nodes}
    spec = cluster.apps.read_namespaced_deployment(target.name, target.namespace).spec
    found = [p for p in cluster.core.list_namespaced_pod(
        target.namespace, label_selector=target.selector).items
        if p.metadata.deletion_timestamp is None]
    unschedulable = tuple(
        f"{p.metadata.name}: {c.message}" for p in found for c in p.status.conditions or []
        if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable")
    return ScaleState(spec.replicas or 0, len(found),
                      sum(1 for p in found if p.status.phase == "Running"
                          and p.spec.node_name in names), unschedulable)


def wait_replicas(cluster: Cluster, target: ScaledDeployment, replicas: int,
                  timeout: float, gpu_nodes: list[GpuNode]) -> ScaleState:
    """Until the HPA has set the Deployment to ``replicas`` and it has that many pods."""
    last: list[ScaleState] = []

    def pending() -> str | None:
        now = scale_state(cluster, target, gpu_nodes)
        last[:] = [now]
        return None if now.wanted == replicas and now.pods == replicas else str(now)

    wait_until_done(f"the HPA to scale Deployment {target.name} to {replicas} replicas",
                    pending, timeout=timeout, interval=0.5)
    return last[0]


def wait_running_on_gpus(cluster: Cluster, target: ScaledDeployment, replicas: int,
                         gpu_nodes: list[GpuNode]) -> ScaleState:
    """Until all ``replicas`` pods Run on GPU nodes; an AssertionError naming the scheduler's
    reason once some have been unschedulable for SCALED_POD_GRACE_S (no GPU free for them)."""
    last: list[ScaleState] = []
    since: list[float] = []

    def pending() -> str | None:
        now = scale_state(cluster, target, gpu_nodes)
        last[:] = [now]
        if now.on_gpu_nodes == replicas:
            return None
        if now.unschedulable:
            since[:] = since or [time.monotonic()]
            if time.monotonic() - since[0] >= SCALED_POD_GRACE_S:
                return None
        return str(now)

    try:
        wait_until_done(f"all {replicas} pods of Deployment {target.name} to Run on GPU nodes",
                        pending, timeout=PODS_RUNNING_TIMEOUT_S, interval=0.5)
    except WaitTimeout as exc:
        raise AssertionError(f"the scaled pods did not all Run on GPU nodes: {exc}") from None
    return last[0]


def autoscaling_view(cluster: Cluster, target: ScaledDeployment) -> str:
    """The HPA (its status and conditions: what it read and decided) as YAML."""
    try:
        return to_yaml(cluster.autoscaling.read_namespaced_horizontal_pod_autoscaler(
            target.name, target.namespace))
    except NotFound:
        return "(no HPA)"
