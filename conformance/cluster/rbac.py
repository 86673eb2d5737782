"""Least-privilege access for runs: apply the shipped RBAC, and a kubeconfig for its
ServiceAccount (a short-lived token from the TokenRequest API, never a Secret)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from kubernetes import utils

from conformance.cluster.client import Cluster, Conflict

MANIFEST = Path(__file__).with_name("gpuconf-rbac.yaml")
NAMESPACE = "gpuconf-system"
SERVICE_ACCOUNT = "gpuconf"
TOKEN_SECONDS = 3600  # one run; the token expires by itself


def documents() -> list[dict]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def apply(cluster: Cluster) -> list[str]:
    """Create (or leave as they are) the namespace, ServiceAccount, roles and policy."""
    done = []
    for doc in documents():
        try:
            utils.create_from_dict(cluster.api_client, doc)
        except utils.FailToCreateError as exc:
            if not all(isinstance(e, Conflict) for e in exc.api_exceptions):
                raise
        done.append(f"{doc['kind']}/{doc['metadata']['name']}")
    return done


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
