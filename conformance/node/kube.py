"""What the control plane needs to accept a real kubelet, and the waits of a bring-up.

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
import time
from collections.abc import Callable
from pathlib import Path

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from conformance.cluster.logs import read_pod_log
from conformance.common.console import Progress
from conformance.common.errors import NotConverged
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


def api(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kubeconfig))


def _create(fn: Callable, *args) -> None:
    try:
        fn(*args)
    except ApiException as exc:
        if exc.status != 409:  # already there (a retried step)
            raise


def bootstrap_token(c: client.ApiClient) -> str:
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
    client.CoreV1Api(c).create_namespaced_secret("kube-system", secret)
    return f"{token_id}.{token_secret}"


def join_rbac(c: client.ApiClient) -> None:
    rbac = client.RbacAuthorizationV1Api(c)
    for name, (role, group) in BINDINGS.items():
        _create(rbac.create_cluster_role_binding, client.V1ClusterRoleBinding(
            metadata=client.V1ObjectMeta(name=name),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io",
                                      kind="ClusterRole", name=role),
            subjects=[client.RbacV1Subject(api_group="rbac.authorization.k8s.io",
                                           kind="Group", name=group)]))


def runtime_class(c: client.ApiClient) -> None:
    _create(client.NodeV1Api(c).create_runtime_class,
            client.V1RuntimeClass(metadata=client.V1ObjectMeta(name=RUNTIME_CLASS),
                                  handler=RUNTIME_CLASS))


def put_configmap(c: client.ApiClient, cm: client.V1ConfigMap) -> None:
    """Create ``cm`` (and its namespace), or replace the one there."""
    core, ns = client.CoreV1Api(c), cm.metadata.namespace
    _create(core.create_namespace, client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    try:
        core.create_namespaced_config_map(ns, cm)
    except ApiException as exc:
        if exc.status != 409:
            raise
        core.replace_namespaced_config_map(cm.metadata.name, ns, cm)


# ---- waits ----------------------------------------------------------------------------------
def wait(what: str, check: Callable[[], str | None], *, timeout: float, progress: Progress,
         interval: float = 0.5, alive: Callable[[], None] | None = None) -> float:
    """Poll ``check`` (None when done, else what is still missing) until done; a progress line
    after 5 s, then every 5 s while what is missing changes and every 30 s while it does not
    (a five-minute wait on one state is ten lines, not sixty); ``alive`` raises when a process
    the wait depends on died. Returns the seconds."""
    t0 = time.monotonic()
    said_at, said = t0, None
    last = "nothing checked yet"
    while True:
        if alive is not None:
            alive()
        try:
            missing = check()
        except ApiException as exc:
            missing = f"API error {exc.status} {exc.reason}"
        if missing is None:
            return time.monotonic() - t0
        last = missing
        now = time.monotonic()
        if now - t0 > timeout:
            raise NotConverged(f"{what}: not done within {timeout:.0f}s ({last})")
        if now >= said_at + (5.0 if last != said else 30.0):
            progress(f"waiting for {what} ({now - t0:.0f}s): {last}")
            said_at, said = now, last
        time.sleep(interval)


def node_ready(c: client.ApiClient, name: str) -> str | None:
    try:
        node = client.CoreV1Api(c).read_node(name)
    except ApiException as exc:
        if exc.status == 404:
            return "the node has not registered"
        raise
    for cond in node.status.conditions or []:
        if cond.type == "Ready":
            return None if cond.status == "True" else f"Ready={cond.status} ({cond.message})"
    return "no Ready condition yet"


def rolled_out(c: client.ApiClient, namespace: str) -> str | None:
    """None when every DaemonSet and Deployment in ``namespace`` is available and updated."""
    apps = client.AppsV1Api(c)
    pending = []
    daemonsets = apps.list_namespaced_daemon_set(namespace).items
    deployments = apps.list_namespaced_deployment(namespace).items
    if not daemonsets:
        return "no DaemonSet yet"
    for ds in daemonsets:
        s = ds.status
        want = s.desired_number_scheduled or 0
        ready = min(s.number_available or 0, s.updated_number_scheduled or 0)
        # a DaemonSet for no node (the chart's MPS daemon without MPS) is done once its
        # controller has looked at it
        seen = (s.observed_generation or 0) >= (ds.metadata.generation or 0)
        if (want == 0 and not seen) or ready < want:
            pending.append(f"{ds.metadata.name} {s.number_available or 0}/{want}")
    for d in deployments:
        want = d.spec.replicas or 0
        if (d.status.available_replicas or 0) < want:
            pending.append(f"{d.metadata.name} {d.status.available_replicas or 0}/{want}")
    return ", ".join(pending) if pending else None


def not_running_pods(c: client.ApiClient, namespace: str) -> str:
    """Pods of ``namespace`` that are not Ready, with the reason their containers give."""
    out = []
    for pod in client.CoreV1Api(c).list_namespaced_pod(namespace).items:
        statuses = (pod.status.container_statuses or []) + (pod.status.init_container_statuses
                                                           or [])
        reasons = [f"{s.name}: {s.state.waiting.reason}" for s in statuses
                   if s.state and s.state.waiting and s.state.waiting.reason]
        if pod.status.phase != "Running" or reasons:
            out.append(f"{pod.metadata.name} {pod.status.phase} {'; '.join(reasons)}".strip())
    return " | ".join(out)


def warning_events(c: client.ApiClient, namespace: str, limit: int = 3) -> str:
    """The latest distinct Warning events of ``namespace`` (why a pod does not start)."""
    events = client.CoreV1Api(c).list_namespaced_event(
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


def last_error_logged(c: client.ApiClient, namespace: str, container: str,
                      tail: int = 50) -> str:
    """The last error line ``container`` logged in the pods of ``namespace`` (klog's ``E``
    lines), e.g. why a running device plugin advertises nothing; empty when none."""
    core = client.CoreV1Api(c)
    for pod in core.list_namespaced_pod(namespace).items:
        if container not in {ct.name for ct in pod.spec.containers}:
            continue
        try:
            log = read_pod_log(core, pod.metadata.name, namespace,
                                               container=container, tail_lines=tail)
        except ApiException:
            continue
        errors = [line for line in (log or "").splitlines() if line.startswith("E")]
        if errors:
            return f"{pod.metadata.name}/{container}: {errors[-1][:300]}"
    return ""


def gpus_advertised(c: client.ApiClient, name: str, resource: str,
                    want: int | None) -> str | None:
    """None once the node advertises exactly ``want`` of ``resource`` (any amount when ``want``
    is None) and no other GPU resource: what the plugin's current config promises, not what
    its previous one left."""
    node = client.CoreV1Api(c).read_node(name)
    found = {k: v for k, v in gpu_resources(node.status.allocatable).items() if v}
    have = found.get(resource, 0)
    if have == 0 or (want is not None and have != want) or set(found) - {resource}:
        shown = ", ".join(f"{k}={v}" for k, v in found.items()) or f"{resource}=0"
        return f"allocatable {shown}, want {resource}={want if want is not None else '>0'}"
    return None


def gfd_labels(c: client.ApiClient, name: str) -> str | None:
    labels = client.CoreV1Api(c).read_node(name).metadata.labels or {}
    if L.PRODUCT not in labels:
        return f"no {L.PRODUCT} label (GFD through NFD)"
    return None
