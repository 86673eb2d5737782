"""Pods that run a command on a real GPU and report through their log.

A pod that never starts, is OOM-killed or crashes ends in a diagnosis, never a hang.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from conformance.cluster import pods
from conformance.cluster.client import Cluster
from conformance.cluster.pods import PodSpec
from conformance.cluster.waits import Announcer

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
    deadline = time.monotonic() + timeout
    start_deadline = time.monotonic() + START_TIMEOUT_S
    announcer = Announcer(f"pod {namespace}/{name} to finish", timeout)
    while True:
        pod = cluster.core.read_namespaced_pod(name, namespace)
        phase = pod.status.phase
        statuses = pod.status.container_statuses or []
        announcer.tick(f"{phase} on node {pod.spec.node_name or '(not scheduled)'}")
        if phase in ("Succeeded", "Failed"):
            return WorkloadResult(name, pod.spec.node_name, phase, _logs(cluster, namespace, name),
                                  _terminated_diagnosis(statuses, pod))
        waiting = [s.state.waiting.reason for s in statuses if s.state and s.state.waiting]
        stuck = [r for r in waiting if r in _STUCK_REASONS]
        now = time.monotonic()
        if stuck or (phase == "Pending" and now > start_deadline):
            detail = stuck[0] if stuck else pods.describe(cluster, namespace, name)
            return WorkloadResult(name, pod.spec.node_name, phase or "Pending", "",
                                  f"pod never started: {detail}")
        if now > deadline:
            logs = _logs(cluster, namespace, name)
            return WorkloadResult(name, pod.spec.node_name, phase, logs,
                                  f"still {phase} on node {pod.spec.node_name} after "
                                  f"{timeout:.0f}s" + ("" if logs.strip() else
                                                       " without printing anything"))
        time.sleep(1.0)


def _logs(cluster: Cluster, namespace: str, name: str) -> str:
    from conformance.cluster.evidence import pod_logs

    return pod_logs(cluster, namespace, name)


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
