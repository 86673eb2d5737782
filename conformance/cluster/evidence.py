"""Failure evidence: the objects a check looked at, recent events, logs of failing pods.

Everything is redacted before it is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml
from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import Cluster
from conformance.cluster.logs import read_pod_log
from conformance.common.redact import redact_object, redact_text

MAX_EVENTS = 50
LOG_TAIL_LINES = 50
# libyaml's dumper where PyYAML has it: the same data for ~1/5 of the pure-Python dumper's CPU
# (a DaemonSet-sized object 0.8 ms, was 4.1; long quoted strings fold at other points)
YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass
class Evidence:
    name: str
    content: str
    mime: str = "text/plain"

    def as_dict(self) -> dict:
        return {"name": self.name, "mime": self.mime, "content": self.content}


def to_yaml(obj) -> str:
    """A Kubernetes model object or dict as redacted YAML."""
    if hasattr(obj, "to_dict"):
        obj = _api_dict(obj)
    return yaml.dump(redact_object(obj), Dumper=YAML_DUMPER, sort_keys=False,
                     default_flow_style=False)


def _api_dict(obj) -> dict:
    from kubernetes.client import ApiClient

    return ApiClient().sanitize_for_serialization(obj)


def events_text(cluster: Cluster, namespace: str | None = None,
                field_selector: str | None = None) -> str:
    try:
        if namespace:
            items = cluster.core.list_namespaced_event(namespace,
                                                       field_selector=field_selector).items
        else:
            items = cluster.core.list_event_for_all_namespaces(
                field_selector=field_selector).items
    except ApiException as exc:
        return f"(events unavailable: {exc.status} {exc.reason})"
    items.sort(key=lambda e: str(e.last_timestamp or e.event_time or e.metadata.creation_timestamp))
    lines = [
        f"{e.last_timestamp or e.event_time or ''}  {e.type:<8} {e.reason:<20} "
        f"{e.involved_object.kind}/{e.involved_object.name}: {e.message}"
        for e in items[-MAX_EVENTS:]
    ]
    return redact_text("\n".join(lines) or "(no events)")


def pod_log_text(cluster: Cluster, namespace: str, pod: str,
                 container: str | None = None) -> str:
    """The end of a pod's log, redacted; ``ApiException`` when it cannot be read."""
    return redact_text(read_pod_log(cluster.logs, pod, namespace, container=container,
                                    tail_lines=LOG_TAIL_LINES))


def pod_logs(cluster: Cluster, namespace: str, pod: str, container: str | None = None) -> str:
    try:
        text = pod_log_text(cluster, namespace, pod, container)
    except ApiException as exc:
        # KWOK pods have no kubelet to serve logs; say so rather than fail the dump.
        return f"(logs unavailable: {exc.status} {exc.reason})"
    return text or "(empty log)"


def nodes_text(cluster: Cluster) -> str:
    """One line per node: its name, what it can allocate and how many nvidia.com labels it has
    (what tells a GPU node, when none is found)."""
    lines = []
    for node in cluster.core.list_node().items:
        labels = node.metadata.labels or {}
        allocatable = ", ".join(f"{k}={v}" for k, v in sorted((node.status.allocatable or {})
                                                              .items()))
        nvidia = sum(1 for k in labels if "nvidia.com" in k)
        lines.append(f"{node.metadata.name}: allocatable {allocatable or 'none'}; "
                     f"{nvidia} nvidia.com label(s)")
    return "\n".join(lines) or "no nodes"


def namespace_dump(cluster: Cluster, namespace: str) -> list[Evidence]:
    """Events and pods of a test namespace, and logs of pods that are not healthy."""
    out = [Evidence(f"events-{namespace}.txt", events_text(cluster, namespace))]
    try:
        pods = cluster.core.list_namespaced_pod(namespace).items
    except ApiException as exc:
        return [*out, Evidence("pods.txt", f"(pods unavailable: {exc.status})")]
    out.append(Evidence(f"pods-{namespace}.yaml", to_yaml([_api_dict(p) for p in pods])))
    for pod in pods:
        if pod.status and pod.status.phase not in ("Running", "Succeeded"):
            out.append(Evidence(f"logs-{pod.metadata.name}.txt",
                                pod_logs(cluster, namespace, pod.metadata.name)))
    return out
