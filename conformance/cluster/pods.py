"""GPU test pods: built to the restricted Pod Security profile, created with the run labels,
and waited on with a description and a timeout.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from conformance.cluster.client import Cluster, NotFound, already_done
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.nvidia import labels as L

# The real scheduler binds a pod in well under a second; 30 s covers a loaded 2-core sim and a
# busy production scheduler. Image pulls on real clusters get their own, longer timeout.
SCHEDULE_TIMEOUT_S = 30.0
PENDING_SETTLE_TIMEOUT_S = 20.0  # long enough for the scheduler to try and record its reason
POD_RUNNING_TIMEOUT_S = 300.0    # image pull of a CUDA image on a real GPU node
# A kubelet refuses a pod at admission, before it runs; a simulated node may show it Running
# first and report the device plugin's refusal a moment later (the stand-in's 1 s loop).
ADMISSION_SETTLE_S = 3.0
DEFAULT_IMAGE = "registry.k8s.io/pause:3.10"
RESTRICTED_CONTAINER_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 65534,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


@dataclass
class PodSpec:
    """What a GPU test pod asks for; ``manifest`` turns it into a Pod."""

    prefix: str
    gpus: int | str | None = 1
    resource: str = L.GPU_RESOURCE
    requests: int | str | None = None  # None: only limits (requests default to limits)
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: dict | None = None
    tolerate_gpu_taint: bool = True
    tolerations: list[dict] = field(default_factory=list)  # beyond the GPU taint's
    image: str = DEFAULT_IMAGE
    command: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)
    # None: Never for a pod that runs a command to completion, Always for a placeholder that
    # only holds its GPUs (a completed pod frees them, as the sim plays it too)
    restart_policy: str | None = None
    annotations: dict[str, str] = field(default_factory=dict)

    def manifest(self, run_labels: dict[str, str]) -> dict:
        resources: dict = {}
        if self.gpus is not None:
            resources["limits"] = {self.resource: str(self.gpus)}
        if self.requests is not None:
            resources["requests"] = {self.resource: str(self.requests)}
        container = {"name": "main", "image": self.image, "resources": resources,
                     "securityContext": dict(RESTRICTED_CONTAINER_SECURITY)}
        if self.command:
            container["command"] = self.command
        if self.env:
            container["env"] = [{"name": k, "value": v} for k, v in self.env.items()]
        restart = self.restart_policy or ("Never" if self.command else "Always")
        spec: dict = {"containers": [container], "restartPolicy": restart,
                      "automountServiceAccountToken": False,
                      "terminationGracePeriodSeconds": 0,
                      "securityContext": {"runAsNonRoot": True,
                                          "seccompProfile": {"type": "RuntimeDefault"}}}
        if self.node_selector:
            spec["nodeSelector"] = self.node_selector
        if self.affinity:
            spec["affinity"] = self.affinity
        tolerations = ([dict(L.GPU_TOLERATION)] if self.tolerate_gpu_taint else []) + [
            dict(t) for t in self.tolerations]
        if tolerations:
            spec["tolerations"] = tolerations
        name = f"{self.prefix}-{secrets.token_hex(3)}"
        metadata: dict = {"name": name, "labels": {**run_labels, "app": self.prefix}}
        if self.annotations:
            metadata["annotations"] = dict(self.annotations)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def create(cluster: Cluster, namespace: str, spec: PodSpec, run_id: str) -> str:
    from conformance.cluster.namespaces import run_labels

    body = spec.manifest(run_labels(run_id))
    cluster.core.create_namespaced_pod(namespace, body)
    return body["metadata"]["name"]


def node_of(cluster: Cluster, namespace: str, name: str) -> str | None:
    return cluster.core.read_namespaced_pod(name, namespace).spec.node_name


def wait_scheduled(cluster: Cluster, namespace: str, name: str,
                   timeout: float = SCHEDULE_TIMEOUT_S) -> str:
    """Wait until the scheduler binds the pod; returns the node name."""
    return wait_for(f"pod {namespace}/{name} to be scheduled",
                    lambda: node_of(cluster, namespace, name), timeout=timeout, interval=0.1,
                    describe_last=lambda: scheduling_events(cluster, namespace, name))


def wait_phase(cluster: Cluster, namespace: str, name: str, phases: tuple[str, ...],
               timeout: float = POD_RUNNING_TIMEOUT_S) -> str:
    def phase() -> str | None:
        p = cluster.core.read_namespaced_pod(name, namespace).status.phase
        return p if p in phases else None

    return wait_for(f"pod {namespace}/{name} to reach {'/'.join(phases)}", phase,
                    timeout=timeout, describe_last=lambda: describe(cluster, namespace, name))


def wait_placement(cluster: Cluster, namespace: str, name: str,
                   timeout: float = PENDING_SETTLE_TIMEOUT_S) -> tuple[str | None, str | None]:
    """(node, None) once the pod is bound, or (None, reason) once the scheduler says why not."""
    def outcome() -> tuple[str | None, str | None] | None:
        node = node_of(cluster, namespace, name)
        if node:
            return node, None
        reason = failed_scheduling_message(cluster, namespace, name)
        return (None, reason) if reason else None

    return wait_for(f"pod {namespace}/{name} to be scheduled or refused by the scheduler",
                    outcome, timeout=timeout, interval=0.1,
                    describe_last=lambda: scheduling_events(cluster, namespace, name))


def wait_admitted(cluster: Cluster, namespace: str, name: str,
                  timeout: float = POD_RUNNING_TIMEOUT_S, settle: float = ADMISSION_SETTLE_S):
    """The pod once its node has admitted it (Running) or refused it (Failed, with a reason)."""
    wait_phase(cluster, namespace, name, ("Running", "Succeeded", "Failed"), timeout=timeout)

    def refused():
        pod = cluster.core.read_namespaced_pod(name, namespace)
        return pod if pod.status.phase == "Failed" else None

    try:
        return wait_for(f"pod {namespace}/{name} to be refused at admission", refused,
                        timeout=settle, interval=0.25)
    except WaitTimeout:  # still running once the settle time is over: admitted
        return cluster.core.read_namespaced_pod(name, namespace)


def failed_scheduling_message(cluster: Cluster, namespace: str, name: str) -> str | None:
    events = cluster.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name},reason=FailedScheduling").items
    return events[-1].message if events else None


def wait_unschedulable(cluster: Cluster, namespace: str, name: str,
                       timeout: float = PENDING_SETTLE_TIMEOUT_S) -> str:
    """Wait for the scheduler's FailedScheduling event; returns its message.

    Fails (with the node) if the pod gets scheduled instead.
    """
    node, reason = wait_placement(cluster, namespace, name, timeout)
    if node:
        raise AssertionError(f"pod {name} was scheduled onto {node}, expected it to stay "
                             "Pending")
    return reason


def scheduling_events(cluster: Cluster, namespace: str, name: str) -> str:
    events = cluster.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}").items
    return "\n".join(f"{e.reason}: {e.message}" for e in events) or "(no events)"


def describe(cluster: Cluster, namespace: str, name: str) -> str:
    pod = cluster.core.read_namespaced_pod(name, namespace)
    statuses = [
        f"{c.name}: ready={c.ready} restarts={c.restart_count} "
        f"state={(c.state.waiting and c.state.waiting.reason) or (c.state.terminated and c.state.terminated.reason) or 'running'}"  # noqa: E501
        for c in (pod.status.container_statuses or [])]
    return (f"phase={pod.status.phase} node={pod.spec.node_name} reason={pod.status.reason} "
            f"message={pod.status.message}\n" + "\n".join(statuses) + "\n"
            + scheduling_events(cluster, namespace, name))


def delete(cluster: Cluster, namespace: str, name: str) -> None:
    with already_done(NotFound):
        cluster.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)



UNFINISHED = "status.phase!=Succeeded,status.phase!=Failed"
TERMINATING_TIMEOUT_S = 60.0  # pods of a deleted test namespace; grace period 0


def _gpu_units(pod) -> dict[str, int]:
    units: dict[str, int] = {}
    for c in pod.spec.containers:
        for name, value in ((c.resources.limits or {}) if c.resources else {}).items():
            if L.is_gpu_resource(name):
                units[name] = units.get(name, 0) + int(value)
    return units


def _add_units(total: dict[str, int], pod) -> None:
    for name, n in _gpu_units(pod).items():
        total[name] = total.get(name, 0) + n


def gpus_in_use_by_node(cluster: Cluster) -> dict[str, dict[str, int]]:
    """GPU units requested by unfinished pods, per node and resource (one list request)."""
    used: dict[str, dict[str, int]] = {}
    for pod in cluster.core.list_pod_for_all_namespaces(field_selector=UNFINISHED).items:
        if pod.spec.node_name:
            _add_units(used.setdefault(pod.spec.node_name, {}), pod)
    return used


def settled_gpus_in_use(cluster: Cluster, node: str) -> dict[str, int]:
    """GPU units in use on ``node`` once no GPU pod there is still terminating.

    A terminating pod holds its GPUs until it is gone and then frees them: counting it would
    make a check that fills the node leave room it did not expect.
    """
    def settled() -> list | None:
        pods = cluster.core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={node},{UNFINISHED}").items
        if any(p.metadata.deletion_timestamp and _gpu_units(p) for p in pods):
            return None
        return pods or [None]  # truthy: an idle node is settled too

    used: dict[str, int] = {}
    for pod in wait_for(f"GPU pods terminating on node {node} to be gone", settled,
                        timeout=TERMINATING_TIMEOUT_S):
        if pod is not None:
            _add_units(used, pod)
    return used
