"""What the control plane needs to accept a real kubelet, and what a bring-up waits on.

The kubelet joins the way kubeadm's nodes do: a bootstrap token (a Secret in kube-system)
authenticates it as ``system:bootstrappers``, which may create a client-certificate request;
the controller manager's csrapproving controller approves it (the ClusterRoleBinding to
``...:nodeclient``) and its csrsigning controller signs it with the cluster CA. From then on the
kubelet is ``system:node:<name>`` and renews its own certificate (``...:selfnodeclient``).
"""

from __future__ import annotations

import datetime as dt
import secrets
import string

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import (
    Cluster,
    Conflict,
    already_done,
    create_or_replace,
    read_or_none,
)
from conformance.cluster.logs import read_pod_log
from conformance.node.configs import RUNTIME_CLASS
from conformance.nvidia import labels as L
from conformance.nvidia.labels import gpu_resources

TOKEN_TTL = dt.timedelta(hours=1)  # only the first join uses it; renewals use the node's cert
BOOTSTRAP_GROUP = "system:bootstrappers:gpuconf"
BINDINGS = {
    # name -> (cluster role, group)
    "gpuconf:kubelet-bootstrap": ("system:node-bootstrapper", "system:bootstrappers"),
    "gpuconf:node-autoapprove-bootstrap": (
        "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        "system:bootstrappers"),
    "gpuconf:node-autoapprove-certificate-rotation": (
        "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"),
}


def bootstrap_token(c: Cluster) -> str:
    """A new bootstrap token (``<id>.<secret>``) stored as kube-system/bootstrap-token-<id>."""
    alphabet = string.ascii_lowercase + string.digits
    token_id = "".join(secrets.choice(alphabet) for _ in range(6))
    token_secret = "".join(secrets.choice(alphabet) for _ in range(16))
    expires = (dt.datetime.now(dt.UTC) + TOKEN_TTL).strftime("%Y-%m-%dT%H:%M:%SZ")
    secret = client.V1Secret(
        metadata=client.V1ObjectMeta(name=f"bootstrap-token-{token_id}",
                                     namespace="kube-system"),
        type="bootstrap.kubernetes.io/token",
        string_data={"token-id": token_id, "token-secret": token_secret,
                     "expiration": expires, "usage-bootstrap-authentication": "true",
                     "auth-extra-groups": BOOTSTRAP_GROUP,
                     "description": "gpuconf node up: the kubelet's first join"})
    c.core.create_namespaced_secret("kube-system", secret)
    return f"{token_id}.{token_secret}"


def join_rbac(c: Cluster) -> None:
    for name, (role, group) in BINDINGS.items():
        with already_done(Conflict):  # already there (a retried step)
            c.rbac.create_cluster_role_binding(client.V1ClusterRoleBinding(
                metadata=client.V1ObjectMeta(name=name),
                role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io",
                                          kind="ClusterRole", name=role),
                subjects=[client.RbacV1Subject(api_group="rbac.authorization.k8s.io",
                                               kind="Group", name=group)]))


def runtime_class(c: Cluster) -> None:
    with already_done(Conflict):
        client.NodeV1Api(c.api_client).create_runtime_class(
            client.V1RuntimeClass(metadata=client.V1ObjectMeta(name=RUNTIME_CLASS),
                                  handler=RUNTIME_CLASS))


def put_configmap(c: Cluster, cm: client.V1ConfigMap) -> None:
    """Create ``cm`` (and its namespace), or replace the one there."""
    ns = cm.metadata.namespace
    with already_done(Conflict):
        c.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    create_or_replace(lambda: c.core.create_namespaced_config_map(ns, cm),
                      lambda: c.core.replace_namespaced_config_map(cm.metadata.name, ns, cm))


# ---- what a bring-up waits on (None when done, else what is missing) --------------------
def node_ready(c: Cluster, name: str) -> str | None:
    node = read_or_none(c.core.read_node, name)
    if node is None:
        return "the node has not registered"
    for cond in node.status.conditions or []:
        if cond.type == "Ready":
            return None if cond.status == "True" else f"Ready={cond.status} ({cond.message})"
    return "no Ready condition yet"


def not_running_pods(c: Cluster, namespace: str) -> str:
    """Pods of ``namespace`` that are not Ready, with the reason their containers give."""
    out = []
    for pod in c.core.list_namespaced_pod(namespace).items:
        statuses = (pod.status.container_statuses or []) + (pod.status.init_container_statuses
                                                           or [])
        reasons = [f"{s.name}: {s.state.waiting.reason}" for s in statuses
                   if s.state and s.state.waiting and s.state.waiting.reason]
        if pod.status.phase != "Running" or reasons:
            out.append(f"{pod.metadata.name} {pod.status.phase} {'; '.join(reasons)}".strip())
    return " | ".join(out)


def warning_events(c: Cluster, namespace: str, limit: int = 3) -> str:
    """The latest distinct Warning events of ``namespace`` (why a pod does not start)."""
    events = c.core.list_namespaced_event(
        namespace, field_selector="type=Warning").items
    events.sort(key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)
    seen: list[str] = []
    for e in reversed(events):
        line = f"{e.involved_object.name}: {e.reason}: {(e.message or '')[:300]}"
        if line not in seen:
            seen.append(line)
        if len(seen) == limit:
            break
    return " | ".join(seen)


def last_error_logged(c: Cluster, namespace: str, container: str,
                      tail: int = 50) -> str:
    """The last error line ``container`` logged in the pods of ``namespace`` (klog's ``E``
    lines), e.g. why a running device plugin advertises nothing; empty when none."""
    core = c.core
    for pod in core.list_namespaced_pod(namespace).items:
        if container not in {ct.name for ct in pod.spec.containers}:
            continue
        try:
            log = read_pod_log(core, pod.metadata.name, namespace, container=container,
                               tail_lines=tail)
        except ApiException:
            continue
        errors = [line for line in (log or "").splitlines() if line.startswith("E")]
        if errors:
            return f"{pod.metadata.name}/{container}: {errors[-1][:300]}"
    return ""


def gpus_advertised(c: Cluster, name: str, resource: str,
                    want: int | None) -> str | None:
    """None once the node advertises exactly ``want`` of ``resource`` (any amount when ``want``
    is None) and no other GPU resource: what the plugin's current config promises, not what
    its previous one left."""
    node = c.core.read_node(name)
    found = {k: v for k, v in gpu_resources(node.status.allocatable).items() if v}
    have = found.get(resource, 0)
    if have == 0 or (want is not None and have != want) or set(found) - {resource}:
        shown = ", ".join(f"{k}={v}" for k, v in found.items()) or f"{resource}=0"
        return f"allocatable {shown}, want {resource}={want if want is not None else '>0'}"
    return None


def gfd_labels(c: Cluster, name: str) -> str | None:
    labels = c.core.read_node(name).metadata.labels or {}
    if L.PRODUCT not in labels:
        return f"no {L.PRODUCT} label (GFD through NFD)"
    return None
