"""The custom metrics API server of sigs.k8s.io/custom-metrics-apiserver v1.37.0 (its test
adapter, ``test-adapter``) as a process of the local control plane, for the sim profiles that
run pod autoscaling (``conformance/sim/metrics_adapter.py`` registers it with the API server).

The API server reaches an aggregated API through a Service's endpoints (the sim has no
kube-proxy: ``--enable-aggregator-routing``), and an endpoint may not be a loopback address
(EndpointSlice validation), so the adapter listens on this host's own IPv4 address: its secure
port (custom.metrics.k8s.io, TLS with a serving certificate of the cluster's CA naming the
Service) and its /write-metrics port (plain HTTP, unauthenticated, as upstream serves it; the
checks write through the API server's service proxy, as the adapter's README does). It
authenticates the API server's front-proxy requests with the client CA the API server publishes
(kube-system/extension-apiserver-authentication) and authorizes through the API server, as its
own user (``metrics-adapter.kubeconfig``).
"""

from __future__ import annotations

import socket
from pathlib import Path

from conformance.common.errors import UsageError

COMPONENT = "metrics-adapter"
WRITE_PORT = "metrics-adapter-write"
PORT_NAMES = (COMPONENT, WRITE_PORT)  # its secure port, its /write-metrics port
USER = "gpuconf-metrics-adapter"
SERVING_CERT = "metrics-adapter-serving"  # pki/<name>.crt|key
# Where upstream's test-adapter-deploy/testing-adapter.yaml puts it (Service, namespace, ports)
NAMESPACE = "custom-metrics"
SERVICE = "custom-metrics-apiserver"
SERVICE_DNS = f"{SERVICE}.{NAMESPACE}.svc"  # the name the API server verifies its certificate for
GROUP = "custom.metrics.k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # what the test adapter serves; the HPA prefers v1beta2
PROBE_ADDRESS = ("192.0.2.1", 9)  # any routable address: a UDP connect sends nothing


def host_ip() -> str:
    """This host's IPv4 address on its default route (what the adapter listens on)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(PROBE_ADDRESS)
            address = s.getsockname()[0]
        except OSError:
            address = "0.0.0.0"
    if address.startswith("127.") or address == "0.0.0.0":
        raise UsageError("the custom metrics adapter needs a non-loopback IPv4 address on this "
                         "host (a default route): the API server reaches an aggregated API at an "
                         "endpoint, and an endpoint may not be a loopback address")
    return address


def serving_hosts() -> tuple[str, ...]:
    """The names its serving certificate carries: the Service's, and this host's address
    where it has one (without, only the profiles that run the adapter fail, saying why)."""
    names = (SERVICE_DNS, f"{SERVICE_DNS}.cluster.local")
    try:
        return (*names, host_ip())
    except UsageError:
        return names


def argv(binary: str, cluster_folder: Path, ports: dict[str, int], address: str) -> list[str]:
    pki = cluster_folder / "pki"
    kc = cluster_folder / f"{COMPONENT}.kubeconfig"
    return [binary, f"--bind-address={address}", f"--secure-port={ports[COMPONENT]}",
            f"--tls-cert-file={pki / f'{SERVING_CERT}.crt'}",
            f"--tls-private-key-file={pki / f'{SERVING_CERT}.key'}",
            f"--cert-dir={cluster_folder / COMPONENT}",
            f"--lister-kubeconfig={kc}", f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}", "--v=1"]


def env(ports: dict[str, int], address: str) -> dict[str, str]:
    """Where it serves /write-metrics (the build reads this: build-controlplane.sh)."""
    return {"TEST_ADAPTER_WRITE_ADDR": f"{address}:{ports[WRITE_PORT]}"}


def ready_url(ports: dict[str, int], address: str) -> str:
    return f"https://{address}:{ports[COMPONENT]}/readyz"
