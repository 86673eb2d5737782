"""Kueue's manager (sigs.k8s.io/kueue v0.17.0 ``cmd/kueue``) as a process of the local control
plane, for the sim profiles that run gang scheduling (``conformance/sim/kueue.py``).

It runs as the other components do: on loopback, as its own user (``kueue.kubeconfig``, a
client certificate of the cluster's CA). Its webhook server listens on 127.0.0.1 with a serving
certificate of that CA (``pki.py``) and internal cert management is off: Kueue's own
(open-policy-agent cert-controller) writes its certificate into a Secret and waits for it to
appear as mounted files, and injects its CA into webhook configurations and conversion CRDs, none
of which a process on loopback has. No webhook configuration is registered with the API server,
so Kueue's admission webhooks never run: a Job is created suspended, as its Job webhook would
make it, and the CRDs' OpenAPI defaults stand in for its defaulting webhooks. Only the
``batch/job`` integration is on, so Kueue touches nothing but Jobs that name a queue. The
visibility server (VisibilityOnDemand, beta, on by default) is switched off: it would bind a
fixed port on every interface.

With internal cert management off, v0.17.0 reads its metrics certificate from the fixed path
/etc/kueue/metrics/certs; the build (build-controlplane.sh ``build_kueue``) makes it read
``KUEUE_METRICS_CERT_DIR`` first, which points at the same certificate.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

COMPONENT = "kueue"
WEBHOOK_PORT = "kueue-webhook"
PORT_NAMES = (COMPONENT, WEBHOOK_PORT)  # its health probe, its webhook server
NAMESPACE = "kueue-system"  # where Kueue keeps what it keeps in a namespace
USER = "gpuconf-kueue"
WEBHOOK_CERT = "kueue-webhook"  # pki/<name>.crt|key


def folder(cluster_folder: Path) -> Path:
    return cluster_folder / COMPONENT


def write_files(cluster_folder: Path, ports: dict[str, int]) -> Path:
    """Its certificate folder (tls.crt/tls.key, as controller-runtime names them) and its
    configuration file; the configuration's path."""
    home = folder(cluster_folder)
    certs = home / "certs"
    certs.mkdir(parents=True, exist_ok=True)
    pki = cluster_folder / "pki"
    shutil.copyfile(pki / f"{WEBHOOK_CERT}.crt", certs / "tls.crt")
    shutil.copyfile(pki / f"{WEBHOOK_CERT}.key", certs / "tls.key")
    (certs / "tls.key").chmod(0o600)
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports[COMPONENT]}"},
        "metrics": {"bindAddress": "0"},  # no metrics server: nothing scrapes the sim's Kueue
        "webhook": {"host": "127.0.0.1", "port": ports[WEBHOOK_PORT], "certDir": str(certs)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "integrations": {"frameworks": ["batch/job"]},
        "clientConnection": {"qps": 100, "burst": 200},
    }
    path = home / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def argv(binary: str, cluster_folder: Path, ports: dict[str, int]) -> list[str]:
    config = write_files(cluster_folder, ports)
    return [binary, f"--config={config}",
            f"--kubeconfig={cluster_folder / f'{COMPONENT}.kubeconfig'}",
            "--feature-gates=VisibilityOnDemand=false"]


def env(cluster_folder: Path) -> dict[str, str]:
    return {"KUEUE_METRICS_CERT_DIR": str(folder(cluster_folder) / "certs")}


def ready_url(ports: dict[str, int]) -> str:
    """Kueue's readiness: its webhook server has started (cmd/kueue setupProbeEndpoints)."""
    return f"http://127.0.0.1:{ports[COMPONENT]}/readyz"
