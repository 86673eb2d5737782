"""The node's monitoring system: a real Prometheus (built from its Go module by build-node.sh,
PROMETHEUS_VERSION) as a host process, as the node's other components, so
``ai_service_metrics`` runs for real here. (Debian's ``prometheus`` package, 2.42, is built
without Kubernetes service discovery: it cannot discover a workload.)

It discovers workloads as a Prometheus installed by the community chart does (job
``kubernetes-service-endpoints``: Kubernetes service discovery through the API server, a
Service kept when annotated ``prometheus.io/scrape: "true"``, port and path from its
``prometheus.io/port`` / ``prometheus.io/path`` annotations) and scrapes what the node itself
exports: the kubelet's ``/metrics`` and ``/metrics/cadvisor`` (the API server's kubelet client
certificate; the node has no DCGM exporter, no DCGM libraries). Its query API's URL is
annotated on the node (:data:`QUERY_ANNOTATION`); a run on the node reads it there as its
``--metrics-query`` (``run/targets.py``), through the URL querier as for any monitoring system
outside the cluster.

Without the binary the node comes up without it, saying so: the suite then finds no
monitoring system and says ``not-run``.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import yaml

from conformance.binaries import binaries
from conformance.cluster.client import Cluster
from conformance.cluster.waits import wait_for_process
from conformance.common.console import Progress
from conformance.controlplane.components import ClusterState
from conformance.node import configs, procs
from conformance.node.state import NodeState

COMPONENT = "prometheus"
PORT = 39090  # on the node's address only; a port nothing else here uses
# on the node: the query API's URL, which a run on this node takes as its --metrics-query
QUERY_ANNOTATION = "node.gpuconf.io/metrics-query"
SCRAPE_INTERVAL = "2s"  # the suite waits for a scrape after its traffic: keep that short here
READY_TIMEOUT_S = 30.0  # it answers /-/ready in ~1 s here
SERVICE_JOB = "kubernetes-service-endpoints"
KUBELET_CLIENT = "apiserver-kubelet-client"  # the API server's identity towards the kubelet


def binary() -> str | None:
    exe = binaries.locate_node().prometheus
    return str(exe) if exe.is_file() else None


def scrape_config(kubeconfig: Path, pki: Path, *, keep_annotation: str = "true") -> dict:
    """The configuration: workloads by their Service's annotations, and the node's kubelet.
    ``keep_annotation``: the value of ``prometheus.io/scrape`` a Service needs to be kept."""
    kubelet_tls = {"cert_file": str(pki / f"{KUBELET_CLIENT}.crt"),
                   "key_file": str(pki / f"{KUBELET_CLIENT}.key"),
                   # the kubelet's serving certificate is its own self-signed one
                   "insecure_skip_verify": True}
    annotation = "__meta_kubernetes_service_annotation_prometheus_io_"
    return {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "scrape_timeout": SCRAPE_INTERVAL},
        "scrape_configs": [
            {"job_name": SERVICE_JOB,
             "kubernetes_sd_configs": [{"role": "endpointslice",
                                        "kubeconfig_file": str(kubeconfig)}],
             "relabel_configs": [
                 {"source_labels": [f"{annotation}scrape"], "action": "keep",
                  "regex": keep_annotation},
                 {"source_labels": [f"{annotation}path"], "target_label": "__metrics_path__",
                  "regex": "(.+)"},
                 {"source_labels": ["__address__", f"{annotation}port"],
                  "target_label": "__address__", "regex": r"([^:]+)(?::\d+)?;(\d+)",
                  "replacement": "$1:$2"},
                 {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                 {"source_labels": ["__meta_kubernetes_service_name"],
                  "target_label": "service"}]},
            *({"job_name": f"kubelet{path.replace('/', '-').removeprefix('-metrics')}",
               "scheme": "https", "metrics_path": path, "tls_config": kubelet_tls,
               "static_configs": [{"targets": [f"{configs.NODE_IP}:10250"]}]}
              for path in ("/metrics", "/metrics/cadvisor")),
        ]}


def config_path(state: NodeState) -> Path:
    return state.path / "prometheus.yml"


def write_config(state: NodeState, cp: ClusterState, *, keep_annotation: str = "true") -> None:
    config_path(state).write_text(yaml.safe_dump(scrape_config(
        cp.kubeconfig, Path(cp.folder) / "pki", keep_annotation=keep_annotation)))


def argv(state: NodeState, exe: str) -> list[str]:
    return [exe, f"--config.file={config_path(state)}",
            f"--storage.tsdb.path={state.path / 'prometheus'}",
            f"--web.listen-address={configs.NODE_IP}:{PORT}", "--web.enable-lifecycle",
            "--storage.tsdb.retention.time=1d"]


def start(state: NodeState, cp: ClusterState, c: Cluster, progress: Progress) -> None:
    """Start it (when the binary is here), wait until it answers, say where on the node."""
    exe = binary()
    if exe is None:
        progress("no Prometheus built (build-node.sh prometheus): the node has no monitoring "
                 "system, INF-MET-001 (ai_service_metrics) will not run")
        return
    write_config(state, cp)
    run(state, progress)
    publish(c, state.node_name)


def run(state: NodeState, progress: Progress) -> None:
    """Start the recorded (or a new) Prometheus process and wait until it is ready."""
    command = state.commands.get(COMPONENT) or argv(state, str(binaries.locate_node().prometheus))
    progress(f"starting Prometheus on {configs.NODE_IP}:{PORT} (scrapes every "
             f"{SCRAPE_INTERVAL}; Services annotated prometheus.io/scrape, the kubelet)")
    proc = procs.start(state, COMPONENT, command)
    wait_for_process(COMPONENT, proc, state.logs / f"{COMPONENT}.log", lambda: ready(),
                     timeout=READY_TIMEOUT_S, progress=progress, what="ready")


def ready() -> bool:
    return procs.answers(f"http://{configs.NODE_IP}:{PORT}/-/ready")


def stop(state: NodeState) -> None:
    procs.stop_component(state, COMPONENT)


def reload(state: NodeState) -> None:
    """Make the running Prometheus read its configuration again (SIGHUP)."""
    os.kill(state.pids[COMPONENT], signal.SIGHUP)


def publish(c: Cluster, node_name: str) -> None:
    """Say on the node where its query API is (:data:`QUERY_ANNOTATION`). Not a Service: the
    API server's service proxy reaches only addresses that are pods (``isValidAddress``), so a
    Service in front of a host process answers 503 "no endpoints available"."""
    c.core.patch_node(node_name, {"metadata": {"annotations": {QUERY_ANNOTATION: url()}}})


def url() -> str:
    return f"http://{configs.NODE_IP}:{PORT}"
