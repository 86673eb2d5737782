"""The Gateway API Inference Extension as ``advanced_inference_ingress`` drives it: which
versions of its API the cluster serves (discovery), InferencePools written as a server-side dry
run (nothing stored) or for real in the test's namespace, the pool's endpoint picker deployed
there, and an HTTPRoute to the pool waited on until its implementation resolved it or refused
the kind (all deleted with the namespace).
"""

from __future__ import annotations

import json
from collections import Counter

from kubernetes import client as k8s

from conformance.checks import gateway as gw
from conformance.checks import inference_pool as ip
from conformance.cluster import gateway as gateways
from conformance.cluster import pods
from conformance.cluster.client import ApiException, Cluster, Invalid
from conformance.cluster.waits import wait_for, wait_until_done

EPP_READY_TIMEOUT_S = 120.0  # an image pull and a controller-runtime start


def served_versions(cluster: Cluster) -> list[str] | None:
    """The versions of the Inference Extension's group that serve InferencePools; None where
    the cluster does not serve the group at all (it has no Inference Extension)."""
    for group in k8s.ApisApi(cluster.api_client).get_api_versions().groups or []:
        if group.name == ip.GROUP:
            return [v.version for v in group.versions or []
                    if ip.PLURAL in _resources(cluster, v.version)]
    return None


def _resources(cluster: Cluster, version: str) -> set[str]:
    doc = json.loads(cluster.raw("GET", f"/apis/{ip.GROUP}/{version}"))
    return {r["name"] for r in doc.get("resources") or []}


def _refusal(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body or "{}").get("message") or exc.reason)
    except ValueError:
        return str(exc.reason)


def dry_run(cluster: Cluster, pool: dict) -> tuple[dict | None, str | None]:
    """(the pool as the API server would store it, None) or (None, why it refused it)."""
    try:
        return cluster.custom.create_namespaced_custom_object(
            ip.GROUP, ip.VERSION, pool["metadata"]["namespace"], ip.PLURAL, pool,
            dry_run="All"), None
    except Invalid as exc:
        return None, _refusal(exc)


def create_pool(cluster: Cluster, pool: dict) -> None:
    cluster.custom.create_namespaced_custom_object(ip.GROUP, ip.VERSION,
                                                   pool["metadata"]["namespace"], ip.PLURAL,
                                                   pool)


def deploy_epp(cluster: Cluster, namespace: str, image: str, labels: dict[str, str]) -> None:
    """The pool's endpoint picker (checks/inference_pool.epp_objects)."""
    create = {"ServiceAccount": cluster.core.create_namespaced_service_account,
              "Role": cluster.rbac.create_namespaced_role,
              "RoleBinding": cluster.rbac.create_namespaced_role_binding,
              "Deployment": cluster.apps.create_namespaced_deployment,
              "Service": cluster.core.create_namespaced_service}
    for doc in ip.epp_objects(namespace, image, labels):
        create[doc["kind"]](namespace, doc)


def wait_epp_ready(cluster: Cluster, namespace: str) -> None:
    """Until the picker's Deployment has a ready pod (its gRPC health answers)."""
    def ready() -> bool:
        d = cluster.apps.read_namespaced_deployment(ip.EPP_NAME, namespace)
        return bool(d.status and d.status.ready_replicas)
    def describe() -> str:
        found = cluster.core.list_namespaced_pod(
            namespace, label_selector=f"app.kubernetes.io/name={ip.EPP_NAME}").items
        return (pods.describe(cluster, namespace, found[0].metadata.name) if found
                else "no pod yet: " + pods.scheduling_events(cluster, namespace, ip.EPP_NAME))
    wait_for(f"the endpoint picker {namespace}/{ip.EPP_NAME} to be ready", ready,
             timeout=EPP_READY_TIMEOUT_S, describe_last=describe)


def route_outcome(cluster: Cluster, namespace: str, name: str) -> str | None:
    """Until the route is Accepted with its refs resolved (None) or its implementation refused
    the InferencePool kind (what it said)."""
    refused: list[str] = []

    def pending() -> str | None:
        route = cluster.custom.get_namespaced_custom_object(gw.GROUP, gw.VERSION, namespace,
                                                            "httproutes", name)
        why = ip.refuses_pools(route)
        if why:
            refused.append(why)
            return None
        states = [gw.route_condition(route, k) for k in ("Accepted", "ResolvedRefs")]
        return None if all(ok for ok, _ in states) else "; ".join(s for _, s in states)
    wait_until_done(f"HTTPRoute {namespace}/{name} to be Accepted with its {ip.KIND} "
                    "resolved (or the kind refused)", pending,
                    timeout=gateways.ACCEPT_TIMEOUT_S)
    return refused[-1] if refused else None


def members(cluster: Cluster, namespace: str, names: tuple[str, ...], port: int
            ) -> dict[str, str]:
    """The pool's endpoints (``IP:port``) -> the stand-in at each."""
    found = {}
    for name in names:
        pod = cluster.core.read_namespaced_pod(name, namespace)
        found[f"{pod.status.pod_ip}:{port}"] = name
    return found


def send_pinned(url: str, host: str, endpoints: list[str], n: int) -> dict[str, Counter]:
    """``n`` requests pinned to each endpoint: who answered them, by endpoint."""
    return {e: gateways.send(url, host, n, {ip.PIN_HEADER: e}) for e in endpoints}
