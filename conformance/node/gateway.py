"""The node's Gateway API implementation: Traefik (built from its Go module by build-node.sh,
TRAEFIK_VERSION) as a host process with its ``kubernetesGateway`` provider, as the node's other
components, so ``ai_inference`` runs for real here; and the Gateway API CRDs it serves
(GATEWAY_API_VERSION, the standard channel) installed on the control plane.

Traefik reads the cluster with the control plane's kubeconfig (``KUBECONFIG``), takes the
Gateways of the GatewayClass :data:`CLASS` (its controller name :data:`CONTROLLER`), and
serves their HTTP listeners on its entry point :data:`PORT` (a Gateway listener's port must be
an entry point's) on the node's address, which it writes as each Gateway's status address.
It reaches the stand-ins at their pod IPs: the host is on the node's CNI bridge. Where the
Gateway is (``CLASS:PORT``) is annotated on the node (:data:`GATEWAY_ANNOTATION`); a run on
this node reads it there as its ``--gateway`` (``run/targets.py``).

Without the binary the node comes up without it, saying so: the suite then has no
GatewayClass and says ``not-applicable``.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from conformance.binaries import binaries
from conformance.checks import gateway as gw
from conformance.cluster.client import Cluster, Conflict, already_done
from conformance.cluster.waits import wait_for_process, wait_until_done
from conformance.common.console import Progress
from conformance.controlplane.components import ClusterState
from conformance.node import configs, procs
from conformance.node.state import NodeState

COMPONENT = "traefik"
PORT = 38080  # the entry point Gateways' listeners use; on the node's address only
PING_PORT = 38081  # Traefik's own entry point: /ping answers once it runs
CLASS = "gpuconf-traefik"
CONTROLLER = "traefik.io/gateway-controller"  # Traefik's kubernetesGateway controller name
GATEWAY_ANNOTATION = "node.gpuconf.io/gateway"  # CLASS:PORT, a run's --gateway on this node
READY_TIMEOUT_S = 30.0  # it answers /ping in ~1 s here
CRD_TIMEOUT_S = 30.0  # CRDs are Established within a second or two
# The Gateway API Inference Extension's InferencePool CRD (v1.6.2, vendored unchanged): served
# whether or not Traefik is here (INF-GW-003); Traefik refuses InferencePool backends
# (INF-GW-004 is not applicable on its GatewayClass).
INFERENCE_EXTENSION_CRDS = Path(__file__).parent / "crds"


def binary() -> Path | None:
    exe = binaries.locate_node().traefik_dir / "traefik"
    return exe if exe.is_file() else None


def argv(exe: str) -> list[str]:
    ip = configs.NODE_IP
    return [exe, f"--entryPoints.web.address={ip}:{PORT}",
            f"--entryPoints.traefik.address={ip}:{PING_PORT}", "--ping=true",
            "--providers.kubernetesGateway=true",
            f"--providers.kubernetesGateway.statusAddress.ip={ip}",
            "--providers.kubernetesGateway.throttleDuration=1s",
            "--global.checkNewVersion=false", "--global.sendAnonymousUsage=false",
            "--log.level=INFO"]


def start(state: NodeState, cp: ClusterState, c: Cluster, progress: Progress) -> None:
    """Install the CRDs and the GatewayClass, start Traefik (when the binary is here), wait
    until it answers, say on the node where the Gateway is."""
    install_crds(c, sorted(INFERENCE_EXTENSION_CRDS.glob("*.yaml")),
                 "Gateway API Inference Extension CRDs (v1.6.2)", progress)
    exe = binary()
    if exe is None:
        progress("no Traefik built (build-node.sh traefik): the node has no Gateway API "
                 "implementation, INF-GW-* (ai_inference) will be not-applicable")
        return
    install_crds(c, sorted((exe.parent / "crds").glob("*.yaml")), "Gateway API CRDs ("
                 f"{binaries.locate_node().versions['GATEWAY_API_VERSION']}, standard channel)",
                 progress)
    with already_done(Conflict):
        c.custom.create_cluster_custom_object(gw.GROUP, gw.VERSION, "gatewayclasses", {
            "apiVersion": f"{gw.GROUP}/{gw.VERSION}", "kind": "GatewayClass",
            "metadata": {"name": CLASS}, "spec": {"controllerName": CONTROLLER}})
    run(state, cp, progress)
    c.core.patch_node(state.node_name, {"metadata": {"annotations": {
        GATEWAY_ANNOTATION: str(gw.GatewaySpec(CLASS, PORT))}}})


def install_crds(c: Cluster, paths: list[Path], what: str, progress: Progress) -> None:
    """Create the CRDs of ``paths`` (those there already stay) and wait until Established."""
    names = []
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                with already_done(Conflict):
                    c.apiext.create_custom_resource_definition(doc)
                names.append(doc["metadata"]["name"])
    progress(f"{what}: {len(names)} installed")

    def pending() -> str | None:
        waiting = [n for n in names if not _established(c, n)]
        return ", ".join(waiting) or None
    wait_until_done(f"the {what} to be Established", pending, timeout=CRD_TIMEOUT_S,
                    progress=progress)


def _established(c: Cluster, name: str) -> bool:
    crd = c.apiext.read_custom_resource_definition(name)
    return any(x.type == "Established" and x.status == "True"
               for x in (crd.status.conditions or []))


def run(state: NodeState, cp: ClusterState, progress: Progress) -> None:
    """Start the recorded (or a new) Traefik process and wait until it answers /ping."""
    exe = binary()
    command = state.commands.get(COMPONENT) or argv(str(exe))
    progress(f"starting Traefik on {configs.NODE_IP}:{PORT} (GatewayClass {CLASS})")
    proc = procs.start(state, COMPONENT, command, env={"KUBECONFIG": str(cp.kubeconfig)})
    wait_for_process(COMPONENT, proc, state.logs / f"{COMPONENT}.log", ready,
                     timeout=READY_TIMEOUT_S, progress=progress, what="answering /ping")


def ready() -> bool:
    return procs.answers(f"http://{configs.NODE_IP}:{PING_PORT}/ping")
