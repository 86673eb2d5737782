"""The one kubeconfig writer: the control plane's users (client certificates) and the real
node's kubelet bootstrap (a token) get their kubeconfigs from here."""

from __future__ import annotations

import base64
import json
from pathlib import Path


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig(server: str, ca: Path, user: str, *, cert: Path | None = None,
               key: Path | None = None, token: str | None = None,
               cluster: str = "gpuconf-sim", context: str = "gpuconf-sim") -> str:
    """A kubeconfig for ``user`` at ``server``, trusting ``ca``: with a client certificate
    (``cert`` and ``key``) or a bearer ``token``. JSON, which is valid YAML; client libraries
    read it as such."""
    if token is not None:
        credentials = {"token": token}
    elif cert is not None and key is not None:
        credentials = {"client-certificate-data": _b64(cert), "client-key-data": _b64(key)}
    else:
        raise ValueError("a kubeconfig needs a client certificate and key, or a token")
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {
            "server": server, "certificate-authority-data": _b64(ca)}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}],
        "current-context": context,
    }
    return json.dumps(doc, indent=2)
