"""The platform's monitoring system, as ``ai_service_metrics`` drives it: the inference
stand-in deployed and sent traffic through the API server's service proxy, the scrape
configuration that selects it, and the Prometheus query API read back (through the service
proxy, or at a URL with a bearer token).
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from kubernetes.client.exceptions import ApiException

from conformance.checks import service_metrics as sm
from conformance.checks.rollout import pod_ready
from conformance.cluster import pods
from conformance.cluster.client import Cluster, NotFound, already_done, get_text
from conformance.cluster.namespaces import run_labels
from conformance.cluster.waits import wait_for

READY_TIMEOUT_S = 180.0  # upstream's metricsReadyTimeout: an image pull on a real cluster
HEALTHZ_TIMEOUT_S = 60.0  # the Service answering through the proxy once the pod is Ready
QUERY_TIMEOUT_S = 30.0


# ---- the query API ---------------------------------------------------------------------------
def find_prometheus(cluster: Cluster) -> sm.QueryEndpoint | None:
    """The first Service of a commonly installed Prometheus (``sm.PROMETHEUS_SELECTORS``) with a
    query port, in any namespace."""
    for selector in sm.PROMETHEUS_SELECTORS:
        for svc in cluster.core.list_service_for_all_namespaces(label_selector=selector).items:
            port = sm.query_port([(p.name, p.port) for p in svc.spec.ports or []])
            if port:
                return sm.QueryEndpoint(svc.metadata.namespace, svc.metadata.name, port)
    return None


@dataclass
class Querier:
    """Instant queries against ``endpoint``'s ``/api/v1/query``."""

    cluster: Cluster
    endpoint: sm.QueryEndpoint
    token: str = ""

    def query(self, promql: str) -> str:
        """The answer's body; an OSError / ApiException when the API cannot be reached."""
        e = self.endpoint
        if not e.url:
            return get_text(self.cluster, f"/api/v1/namespaces/{e.namespace}/services/"
                            f"{e.name}:{e.port}/proxy/api/v1/query", [("query", promql)],
                            probe=True)
        request = urllib.request.Request(
            f"{e.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}",
            headers={"Authorization": f"Bearer {self.token}"} if self.token else {})
        with urllib.request.urlopen(request, timeout=QUERY_TIMEOUT_S) as r:
            return r.read(1 << 20).decode()

    def preflight(self) -> str | None:
        """Why the query API does not answer ``vector(1)`` with 1, or None."""
        try:
            value = sm.single_sample(self.query("vector(1)"))
        except (OSError, ApiException, sm.QueryError) as exc:
            return f"{self.endpoint}: {_short(exc)}"
        return None if value == 1 else f"{self.endpoint}: vector(1) returned {value}"


def _short(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason} (through the API server's service proxy)"
    return str(exc).splitlines()[0][:200]


# ---- the stand-in workload -------------------------------------------------------------------
def deploy_stand_in(cluster: Cluster, namespace: str, run_id: str, image: str,
                    name: str = sm.WORKLOAD) -> None:
    """The stand-in Pod ``name`` (restricted, never restarted: a restart resets its counters;
    it answers as backend ``name``) and its Service, annotated for annotation-based
    discovery."""
    labels = {**run_labels(run_id), sm.APP_LABEL: name}
    container = {
        "name": "server", "image": image, "command": ["python3", "-u", "-c", sm.STAND_IN],
        "env": [{"name": "RUN_ID", "value": run_id}, {"name": "PORT", "value": str(sm.PORT)},
                {"name": "BACKEND", "value": name}],
        "ports": [{"name": sm.PORT_NAME, "containerPort": sm.PORT}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": sm.PORT_NAME},
                           "periodSeconds": 1},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                      "limits": {"memory": "128Mi"}},
        "securityContext": dict(pods.RESTRICTED_CONTAINER_SECURITY)}
    cluster.core.create_namespaced_pod(namespace, {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [container], "restartPolicy": "Never",
                 "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0,
                 "securityContext": {"runAsNonRoot": True,
                                     "seccompProfile": {"type": "RuntimeDefault"}}}})
    cluster.core.create_namespaced_service(namespace, {
        "metadata": {"name": name, "labels": labels,
                     "annotations": dict(sm.SCRAPE_ANNOTATIONS)},
        "spec": {"selector": {sm.APP_LABEL: name},
                 "ports": [{"name": sm.PORT_NAME, "port": sm.PORT,
                            "targetPort": sm.PORT_NAME}]}})


def _proxy(namespace: str, path: str, name: str = sm.WORKLOAD) -> str:
    return f"/api/v1/namespaces/{namespace}/services/{name}:{sm.PORT_NAME}/proxy{path}"


def wait_stand_in(cluster: Cluster, namespace: str, name: str = sm.WORKLOAD) -> None:
    """Until the pod is Ready and ``/healthz`` answers through the service proxy."""
    wait_for(f"pod {namespace}/{name} to be Ready",
             lambda: pod_ready(cluster.core.read_namespaced_pod(name, namespace)),
             timeout=READY_TIMEOUT_S,
             describe_last=lambda: pods.describe(cluster, namespace, name))

    def healthy() -> bool:
        try:
            return get_text(cluster, _proxy(namespace, "/healthz", name), probe=True) == "ok"
        except ApiException:
            return False
    wait_for(f"service {namespace}/{name} to answer /healthz through the API server",
             healthy, timeout=HEALTHZ_TIMEOUT_S)


def send_requests(cluster: Cluster, namespace: str, n: int) -> None:
    """Exactly ``n`` inference requests through the service proxy (the first failure raises:
    the expected count would be ambiguous)."""
    for _ in range(n):
        get_text(cluster, _proxy(namespace, "/v1/infer"))


def intact(cluster: Cluster, namespace: str) -> str | None:
    """Why the stand-in's counters can no longer be trusted (stopped, restarted), or None."""
    pod = cluster.core.read_namespaced_pod(sm.WORKLOAD, namespace)
    if pod.status.phase != "Running":
        return f"the stand-in pod is {pod.status.phase}: its counters were lost"
    restarts = sum(c.restart_count for c in pod.status.container_statuses or [])
    return f"the stand-in restarted {restarts} time(s)" if restarts else None


# ---- the scrape configuration ------------------------------------------------------------------
@dataclass
class ScrapeObjects:
    """What the check created to have the workload scraped, to delete afterwards."""

    created: list[tuple[object, str, str, str | None]] = field(default_factory=list)

    def delete(self) -> None:
        from kubernetes.dynamic.exceptions import NotFoundError  # the dynamic client's 404

        for resource, _kind, name, namespace in reversed(self.created):
            with already_done(NotFound, NotFoundError):
                resource.delete(name=name, namespace=namespace)

    def __str__(self) -> str:
        return ", ".join(f"{kind} {name}" for _r, kind, name, _n in self.created) or "nothing"


def _resource(cluster: Cluster, api_version: str, kind: str):
    """The API resource of ``kind`` (discovery through the suite's client)."""
    from kubernetes.dynamic import DynamicClient

    return DynamicClient(cluster.api_client).resources.get(api_version=api_version, kind=kind)


def service_monitor_served(cluster: Cluster) -> bool:
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    try:
        _resource(cluster, "monitoring.coreos.com/v1", "ServiceMonitor")
    except (ResourceNotFoundError, ApiException):
        return False
    return True


def apply_scrape(cluster: Cluster, namespace: str, run_id: str, manifest: str | None,
                 labels: dict[str, str], made: ScrapeObjects) -> str:
    """Select the workload for scraping: the manifest template's objects, else a ServiceMonitor
    where its API is served, else the Service's ``prometheus.io/*`` annotations alone. What
    was done, in words; objects created are added to ``made``."""
    if manifest:
        docs = [d for d in yaml.safe_load_all(sm.render(Path(manifest).read_text(),
                                                        sm.template_fields(namespace, run_id)))
                if d]
    elif service_monitor_served(cluster):
        docs = [sm.service_monitor(namespace, labels)]
    else:
        return ("no ServiceMonitor API and no scrape manifest: the Service's prometheus.io/"
                "scrape annotations select it")
    for doc in docs:
        resource = _resource(cluster, doc["apiVersion"], doc["kind"])
        ns = (doc.get("metadata", {}).get("namespace") or namespace) if resource.namespaced \
            else None
        resource.create(body=doc, namespace=ns)
        made.created.append((resource, doc["kind"], doc["metadata"]["name"], ns))
    return f"created {made}"
