"""Least-privilege access for runs: apply the shipped RBAC, and a kubeconfig for its
ServiceAccount (a short-lived token from the TokenRequest API, never a Secret)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import yaml
from kubernetes import utils

from conformance.cluster.client import Cluster, Conflict, Forbidden, Invalid
from conformance.cluster.waits import wait_for

MANIFEST = Path(__file__).with_name("gpuconf-rbac.yaml")
NAMESPACE = "gpuconf-system"
SERVICE_ACCOUNT = "gpuconf"
TOKEN_SECONDS = 3600  # one run; the token expires by itself
USERNAME = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
POLICY_MESSAGE = "own labelled namespaces"  # in the policy's refusal (gpuconf-rbac.yaml)
IN_FORCE_TIMEOUT_S = 60.0


def documents() -> list[dict]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def apply(cluster: Cluster, progress: Callable[[str], None] = lambda _line: None) -> None:
    """Create (or leave as they are) the namespace, ServiceAccount, roles and policy, and
    return once the policy is in force; ``progress`` hears each step."""
    for doc in documents():
        try:
            utils.create_from_dict(cluster.api_client, doc)
        except utils.FailToCreateError as exc:
            if not all(isinstance(e, Conflict) for e in exc.api_exceptions):
                raise
        progress(f"applied {doc['kind']}/{doc['metadata']['name']}")
    progress(wait_until_in_force(cluster))


def wait_until_in_force(cluster: Cluster) -> str:
    """Wait until the API server enforces the shipped policy, and say so.

    The API server loads RBAC bindings and admission policies from its informers, a moment
    after they are created: a run started in that moment could write outside its namespaces.
    So the ServiceAccount is asked, by impersonation and as a dry run (nothing is written),
    to create a Pod in ``default`` until the policy refuses it. Where the caller may not
    impersonate, the check is skipped and said to be."""
    core = cluster.impersonating(USERNAME)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpuconf-policy-probe"},
           "spec": {"containers": [{"name": "c", "image": "x"}]}}
    could_not_check: list[str] = []

    def refused() -> bool:
        try:
            core.create_namespaced_pod("default", pod, dry_run="All")
        except (Forbidden, Invalid) as exc:
            if POLICY_MESSAGE in (exc.body or ""):
                return True
            if "impersonate" in (exc.body or ""):
                could_not_check.append("this identity may not impersonate the ServiceAccount")
                return True
        return False  # allowed, or refused by RBAC not yet loaded: not in force yet

    wait_for(f"the API server to enforce ValidatingAdmissionPolicy for {USERNAME}", refused,
             timeout=IN_FORCE_TIMEOUT_S, tolerate_api_errors=True)
    if could_not_check:
        return f"policy in force: not checked ({could_not_check[0]})"
    return "policy in force: a Pod outside its namespaces is refused"


def service_account_kubeconfig(cluster: Cluster, path: Path,
                               seconds: int = TOKEN_SECONDS) -> Path:
    """A kubeconfig that authenticates as gpuconf-system/gpuconf (file mode 0600)."""
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"expirationSeconds": seconds}}
    token = cluster.core.create_namespaced_service_account_token(
        SERVICE_ACCOUNT, NAMESPACE, request).status.token
    conf = cluster.api_client.configuration
    ca = Path(conf.ssl_ca_cert).read_text() if conf.ssl_ca_cert else None
    import base64

    cluster_entry = {"server": conf.host}
    if ca:
        cluster_entry["certificate-authority-data"] = base64.b64encode(ca.encode()).decode()
    doc = {"apiVersion": "v1", "kind": "Config",
           "clusters": [{"name": "target", "cluster": cluster_entry}],
           "users": [{"name": "gpuconf", "user": {"token": token}}],
           "contexts": [{"name": "gpuconf", "context": {"cluster": "target", "user": "gpuconf"}}],
           "current-context": "gpuconf"}
    # Created 0600: the token is never readable by others, not even for a moment.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(out.fileno(), 0o600)  # an existing file keeps its mode otherwise
        out.write(json.dumps(doc, indent=2))
    return path
