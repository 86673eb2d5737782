"""Pods that run a command on a real GPU and report through their log.

A pod that never starts, is OOM-killed or crashes ends in a diagnosis, never a hang.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from kubernetes.client.exceptions import ApiException

from conformance.cluster import pods
from conformance.cluster.client import Cluster
from conformance.cluster.pods import PodSpec
from conformance.cluster.waits import WaitTimeout, wait_for

START_TIMEOUT_S = 300.0  # a CUDA image pull on a fresh GPU node
RUN_TIMEOUT_S = 600.0  # a kernel experiment: several points of seconds each, plus start-up
# nvidia-smi or an NVML inventory: a second of work, so a pod still silent after two minutes is
# reported with its state rather than waited on for ten.
QUICK_RUN_TIMEOUT_S = 120.0
_STUCK_REASONS = ("ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError",
                  "CreateContainerError", "InvalidImageName", "RunContainerError")


@dataclass
class WorkloadResult:
    pod: str
    node: str | None
    phase: str
    logs: str
    diagnosis: str | None = None
    # why the log could not be read (the kubelet did not serve it); None when it was read
    log_error: str | None = None

    def json_lines(self) -> list[dict]:
        """Every line of the log that parses as a JSON object, in order."""
        out = []
        for line in self.logs.strip().splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
        return out

    def json_line(self) -> dict | None:
        """The last line of the log that parses as a JSON object."""
        found = self.json_lines()
        return found[-1] if found else None

    def unread(self, result_found: bool) -> str | None:
        """Why this pod's result could not be read, or None when it was read or the pod has a
        diagnosis of its own (never started, OOM-killed, exited non-zero: those are findings).

        A log the kubelet did not serve, or a pod that Succeeded without the result line its
        command always prints (``result_found`` False: no line, or one that does not parse),
        says nothing about the GPU stack: the check was not run, it did not fail.
        """
        if self.diagnosis is not None:
            return None
        where = f"could not read the result of pod {self.pod} on node {self.node}"
        if self.log_error is not None:
            return f"{where}: {self.log_error}"
        if not result_found and self.phase == "Succeeded":
            return (f"{where}: it Succeeded without a result line that parses; its log: "
                    f"{self.logs.strip()[-300:] or '(empty)'}")
        return None


def run(cluster: Cluster, namespace: str, spec: PodSpec, run_id: str, *,
        timeout: float = RUN_TIMEOUT_S) -> WorkloadResult:
    name = pods.create(cluster, namespace, spec, run_id)
    return wait(cluster, namespace, name, timeout=timeout)


def run_manifest(cluster: Cluster, namespace: str, body: dict, *,
                 timeout: float = RUN_TIMEOUT_S) -> WorkloadResult:
    cluster.core.create_namespaced_pod(namespace, body)
    return wait(cluster, namespace, body["metadata"]["name"], timeout=timeout)


def wait(cluster: Cluster, namespace: str, name: str, *,
         timeout: float = RUN_TIMEOUT_S) -> WorkloadResult:
    """Until the pod ends, is stuck starting, or the timeout: never a hang. Waits longer than a
    few seconds say which pod, on which node, in which state, and for how long."""
    start_deadline = time.monotonic() + START_TIMEOUT_S
    seen = []  # the pod as last read

    def ended() -> WorkloadResult | None:
        pod = cluster.core.read_namespaced_pod(name, namespace)
        seen[:] = [pod]
        phase = pod.status.phase
        statuses = pod.status.container_statuses or []
        if phase in ("Succeeded", "Failed"):
            logs, log_error = _logs(cluster, namespace, name)
            return WorkloadResult(name, pod.spec.node_name, phase, logs,
                                  _terminated_diagnosis(statuses, pod), log_error)
        waiting = [s.state.waiting.reason for s in statuses if s.state and s.state.waiting]
        stuck = [r for r in waiting if r in _STUCK_REASONS]
        if stuck or (phase == "Pending" and time.monotonic() > start_deadline):
            detail = stuck[0] if stuck else pods.describe(cluster, namespace, name)
            return WorkloadResult(name, pod.spec.node_name, phase or "Pending", "",
                                  f"pod never started: {detail}")
        return None

    def where() -> str:
        pod = seen[0]
        return f"{pod.status.phase} on node {pod.spec.node_name or '(not scheduled)'}"

    try:
        return wait_for(f"pod {namespace}/{name} to finish", ended, timeout=timeout,
                        interval=1.0, tolerate_api_errors=False, state=where)
    except WaitTimeout:
        pod = seen[0]
        logs, _error = _logs(cluster, namespace, name)
        return WorkloadResult(name, pod.spec.node_name, pod.status.phase, logs,
                              f"still {pod.status.phase} on node {pod.spec.node_name} after "
                              f"{timeout:.0f}s" + ("" if logs.strip() else
                                                   " without printing anything"))


def _logs(cluster: Cluster, namespace: str, name: str) -> tuple[str, str | None]:
    """(the end of the pod's log, None), or ("", why it could not be read)."""
    from conformance.cluster import evidence

    try:
        return evidence.pod_log_text(cluster, namespace, name), None
    except ApiException as exc:
        return "", f"logs unavailable: {exc.status} {exc.reason}"


def _terminated_diagnosis(statuses, pod) -> str | None:
    for s in statuses:
        term = s.state.terminated if s.state else None
        if term is None:
            continue
        if term.reason == "OOMKilled":
            return "container was OOM-killed: raise its memory limit"
        if term.exit_code not in (0, None):
            why = f": {term.message.strip()[:300]}" if term.message else ""  # e.g. StartError's
            return f"container exited with {term.exit_code} ({term.reason}){why}"
    if pod.status.reason == "UnexpectedAdmissionError":
        return f"the kubelet refused the pod: {pod.status.message}"
    return None
