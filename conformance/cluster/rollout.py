"""Rolled out, judged once from what the controllers report: a DaemonSet's or a Deployment's
status against its spec. The sim, the real node, the operator install, driver certification
and the reconcile suite all wait on these; the per-node operand rule over pods (the GPU
Operator e2e's) is the pure ``conformance.checks.rollout``.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.checks.rollout import pod_ready
from conformance.cluster.client import Cluster


@dataclass(frozen=True)
class DaemonSetRollout:
    """One DaemonSet's rollout as its controller reports it."""

    name: str
    desired: int
    updated: int   # pods on the current template
    ready: int     # pods Ready (numberReady)
    observed: bool  # the controller has seen the current generation

    @classmethod
    def of(cls, ds) -> DaemonSetRollout:
        s = ds.status
        return cls(ds.metadata.name, s.desired_number_scheduled or 0,
                   s.updated_number_scheduled or 0, s.number_ready or 0,
                   (s.observed_generation or 0) >= (ds.metadata.generation or 0))

    @property
    def templated(self) -> bool:
        """Every pod it wants runs the current template (Ready or not). A DaemonSet for no
        node (the chart's MPS daemon without MPS) is so once its controller has looked."""
        return self.observed and self.updated == self.desired

    @property
    def done(self) -> bool:
        """Templated, and every pod of the current template Ready."""
        return self.templated and min(self.ready, self.updated) >= self.desired

    def __str__(self) -> str:
        return f"{self.name} ({self.ready}/{self.desired} ready, {self.updated} updated)"


def daemonsets(cluster: Cluster, namespace: str) -> list[DaemonSetRollout]:
    return [DaemonSetRollout.of(ds)
            for ds in cluster.apps.list_namespaced_daemon_set(namespace).items]


def deployment_available(deployment) -> bool:
    """As many replicas available as the spec asks (the API's default: 1)."""
    want = deployment.spec.replicas if deployment.spec.replicas is not None else 1
    return (deployment.status.available_replicas or 0) >= want


def _deployment_words(deployment) -> str:
    want = deployment.spec.replicas if deployment.spec.replicas is not None else 1
    return f"{deployment.metadata.name} ({deployment.status.available_replicas or 0}/{want} " \
           "available)"


def daemonsets_not_done(cluster: Cluster, namespace: str) -> list[str]:
    """The DaemonSets of ``namespace`` not rolled out and Ready, each with its counts."""
    return [str(r) for r in daemonsets(cluster, namespace) if not r.done]


def workloads_pending(cluster: Cluster, namespace: str) -> str | None:
    """None once ``namespace`` has DaemonSets and every DaemonSet and Deployment in it is rolled
    out and available; else what is not (a chart's or the operator's namespace)."""
    rollouts = daemonsets(cluster, namespace)
    if not rollouts:
        return "no DaemonSet yet"
    pending = [str(r) for r in rollouts if not r.done]
    pending += [_deployment_words(d)
                for d in cluster.apps.list_namespaced_deployment(namespace).items
                if not deployment_available(d)]
    return ", ".join(pending) if pending else None


def deployments_pending(cluster: Cluster, namespace: str) -> str | None:
    """None once ``namespace`` has Deployments and all are available (an operator install)."""
    deployments = cluster.apps.list_namespaced_deployment(namespace).items
    ready = [d for d in deployments if deployment_available(d)]
    if deployments and len(ready) == len(deployments):
        return None
    return f"{len(ready)}/{len(deployments)} Deployments available in {namespace}"


def pods_on_version(cluster: Cluster, namespace: str, selector: str,
                          version: str) -> tuple[int, int]:
    """(pods matching ``selector`` that run image tag ``version`` and are Ready, all pods):
    an OnDelete DaemonSet's rollout (the driver's), which its status does not show."""
    pods = cluster.core.list_namespaced_pod(namespace, label_selector=selector).items
    done = [p for p in pods if p.spec.containers[0].image.endswith(f":{version}")
            and pod_ready(p)]
    return len(done), len(pods)
