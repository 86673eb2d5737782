"""advanced_inference_ingress (CNCF Kubernetes AI Conformance, a SHOULD): the Gateway API
Inference Extension (GAIE) on the platform. Where the cluster has it (its API group served):

- INF-GW-003: its InferencePool API is served at ``inference.networking.k8s.io/v1`` and its
  schema is in force: a pool the suite writes (server-side dry run: nothing is stored) comes
  back with the schema's defaults (``appProtocol: http``, the endpoint picker's ``kind:
  Service`` and ``failureMode: FailClose``), and a pool whose endpoint picker Service has no
  port is refused (the CRD's CEL rule). A CRD installed without its schema admits anything.
- INF-GW-004: an HTTPRoute whose backend is an InferencePool of the two inference stand-ins
  routes through the pool's endpoint picker (the Inference Extension's own lightweight one,
  ``lwepp``): each request pinned to one pool member with the picker's test header
  (:data:`PIN_HEADER`, as the Inference Extension's conformance tests pin theirs) is answered
  by that member. Not applicable where the GatewayClass's implementation refuses InferencePool
  backends (the route's ResolvedRefs False, reason InvalidKind: it implements the Gateway API,
  not the Inference Extension).

Pure: manifests and verdicts from what the API server and the answers said. The objects are
written and the traffic sent by ``cluster/inference_pool.py``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from conformance.checks import gateway as gw

GROUP = "inference.networking.k8s.io"
VERSION = "v1"
PLURAL = "inferencepools"
KIND = "InferencePool"
POOL_NAME = "inference-pool"
# The schema's defaults a stored pool carries (v1.6.2's CRD).
DEFAULTS = {"appProtocol": "http", "endpointPickerRef.kind": "Service",
            "endpointPickerRef.failureMode": "FailClose"}
# The endpoint picker: the Inference Extension's lightweight reference one (cmd/lwepp of
# sigs.k8s.io/gateway-api-inference-extension), ext-proc over gRPC with TLS, health on its own
# port; it watches the pool and its pods in the pool's namespace only.
EPP_NAME = "inference-pool-epp"
EPP_GRPC_PORT = 9002
EPP_HEALTH_PORT = 9003
# The lwepp's test header: the candidate endpoints (IP:port) the request may go to.
PIN_HEADER = "test-epp-endpoint-selection"
PINNED_REQUESTS = 10  # per pool member: a pool that routes sends every pinned one there


# ---- INF-GW-003: the API and its schema ------------------------------------------------------
def pool(name: str, namespace: str, selector: Mapping[str, str], port: int,
         labels: Mapping[str, str], picker_port: int | None = EPP_GRPC_PORT) -> dict:
    """An InferencePool of the pods ``selector`` matches on ``port``, its endpoint picker the
    Service :data:`EPP_NAME` (on ``picker_port``; None: no port, which the schema refuses)."""
    picker: dict = {"name": EPP_NAME}
    if picker_port is not None:
        picker["port"] = {"number": picker_port}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {"selector": {"matchLabels": dict(selector)},
                     "targetPorts": [{"number": port}], "endpointPickerRef": picker}}


def _at(doc: Mapping, dotted: str) -> object:
    for key in dotted.split("."):
        doc = doc.get(key) if isinstance(doc, Mapping) else None  # type: ignore[assignment]
    return doc


def api_verdict(served_versions: list[str], admitted: dict | None, admit_error: str | None,
                portless_error: str | None) -> tuple[bool, str]:
    """(the InferencePool API is served at v1 with its schema in force, a line saying what
    was seen): the versions the group serves, the valid pool as the API server admitted it (or
    why it was refused), and why the portless pool was refused (None: it was admitted)."""
    versions = ", ".join(served_versions) or "none"
    if VERSION not in served_versions:
        return False, f"{GROUP} serves {versions}, not {VERSION}"
    if admitted is None:
        return False, f"a valid {KIND} was refused: {admit_error}"
    spec = admitted.get("spec") or {}
    missing = {k: _at(spec, k) for k, want in DEFAULTS.items() if _at(spec, k) != want}
    if missing:
        got = ", ".join(f"{k}={v!r} (want {DEFAULTS[k]!r})" for k, v in missing.items())
        return False, f"the {KIND} schema's defaults were not applied: {got}"
    if portless_error is None:
        return False, (f"a {KIND} whose endpoint picker Service has no port was admitted: the "
                       "CRD's validation is not in force")
    return True, (f"{GROUP} serves {versions}; a valid {KIND} admitted with the schema's "
                  f"defaults ({', '.join(f'{k}={v}' for k, v in DEFAULTS.items())}); one "
                  f"without the picker's port refused ({portless_error})")


# ---- INF-GW-004: a route through the pool -------------------------------------------------------
def pool_route(name: str, namespace: str, gateway_name: str, host: str,
               labels: Mapping[str, str], pool_name: str = POOL_NAME) -> dict:
    """One rule: every request to the InferencePool ``pool_name``."""
    ref = {"group": GROUP, "kind": KIND, "name": pool_name}
    return {"apiVersion": f"{gw.GROUP}/{gw.VERSION}", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {"parentRefs": [{"name": gateway_name}], "hostnames": [host],
                     "rules": [{"backendRefs": [ref]}]}}


def refuses_pools(route: dict) -> str | None:
    """What the route's status says when its implementation does not take InferencePool
    backends (ResolvedRefs False, InvalidKind); None otherwise."""
    for parent in (route.get("status") or {}).get("parents") or []:
        for c in parent.get("conditions") or []:
            if (c.get("type") == "ResolvedRefs" and c.get("status") == "False"
                    and c.get("reason") == "InvalidKind"):
                return f"ResolvedRefs=False (InvalidKind: {c.get('message', '')})"
    return None


def epp_objects(namespace: str, image: str, labels: Mapping[str, str],
                pool_name: str = POOL_NAME) -> list[dict]:
    """The endpoint picker of ``pool_name``: its ServiceAccount, a Role reading the pool and
    the pods of this namespace only, the binding, the Deployment and its Service."""
    meta = {"name": EPP_NAME, "namespace": namespace, "labels": dict(labels)}
    select = {"app.kubernetes.io/name": EPP_NAME}
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
             {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "watch"]}]
    container = {
        "name": "epp", "image": image,
        "args": [f"--pool-name={pool_name}", f"--pool-namespace={namespace}",
                 f"--grpc-port={EPP_GRPC_PORT}", f"--grpc-health-port={EPP_HEALTH_PORT}"],
        "ports": [{"name": "grpc", "containerPort": EPP_GRPC_PORT}],
        "readinessProbe": {"grpc": {"port": EPP_HEALTH_PORT}, "periodSeconds": 2},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                      "limits": {"memory": "256Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                            "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}}}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
         "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": EPP_NAME},
         "subjects": [{"kind": "ServiceAccount", "name": EPP_NAME, "namespace": namespace}]},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
         "spec": {"replicas": 1, "selector": {"matchLabels": select},
                  "template": {"metadata": {"labels": {**labels, **select}},
                               "spec": {"serviceAccountName": EPP_NAME,
                                        "terminationGracePeriodSeconds": 0,
                                        "containers": [container]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"selector": select,
                  "ports": [{"name": "grpc", "port": EPP_GRPC_PORT,
                             "targetPort": EPP_GRPC_PORT, "appProtocol": "http2"}]}},
    ]


def pinned_verdict(answers: Mapping[str, Counter], members: Mapping[str, str]
                   ) -> tuple[bool, str]:
    """(every request pinned to a member was answered by it, a line per member): ``answers``
    by the endpoint (IP:port) pinned, ``members`` that endpoint -> the stand-in there."""
    return gw.routed_verdict(answers, members, PIN_HEADER)
