"""Karpenter (sigs.k8s.io/karpenter v1.15.0, its KWOK cloud provider ``kwok/``) as a process of
the local control plane, for the sim profiles that autoscale GPU nodes
(``conformance/sim/karpenter.py``).

It runs as the other components do: as its own user (``karpenter.kubeconfig``, a client
certificate of the cluster's CA, read through ``KUBECONFIG`` as controller-runtime does). Its
KWOK provider "launches" an instance by creating the Node object a kubelet would register; the
sim's KWOK plays that node like every other one (Ready, pods Running). The instance types it
offers are the file ``instance_types_file`` names (the provider's ``--instance-types-file-path``),
written by the sim from the profile before the process starts.

Karpenter binds its metrics and health-probe servers to ``:PORT`` on every interface (v1.15.0
``pkg/operator/operator.go`` has no address option): both on free ports picked with the
others. Leader election is off (one replica), and the provisioner's batching window is short
(``--batch-idle-duration``/``--batch-max-duration``: 1 s/3 s instead of 1 s/10 s) so a
pending pod gets its node in seconds on a 2-core machine.
"""

from __future__ import annotations

from pathlib import Path

COMPONENT = "karpenter"
METRICS_PORT = "karpenter-metrics"
PORT_NAMES = (COMPONENT, METRICS_PORT)  # its health probe, its metrics server
USER = "gpuconf-karpenter"
BATCH_IDLE = "1s"
BATCH_MAX = "3s"


def folder(cluster_folder: Path) -> Path:
    return cluster_folder / COMPONENT


def instance_types_file(cluster_folder: Path) -> Path:
    """Where the sim writes the instance types the KWOK provider offers (JSON)."""
    return folder(cluster_folder) / "instance-types.json"


def argv(binary: str, cluster_folder: Path, ports: dict[str, int]) -> list[str]:
    return [binary, f"--instance-types-file-path={instance_types_file(cluster_folder)}",
            f"--health-probe-port={ports[COMPONENT]}", f"--metrics-port={ports[METRICS_PORT]}",
            "--disable-leader-election=true", f"--batch-idle-duration={BATCH_IDLE}",
            f"--batch-max-duration={BATCH_MAX}", "--log-level=info"]


def env(cluster_folder: Path) -> dict[str, str]:
    return {"KUBECONFIG": str(cluster_folder / f"{COMPONENT}.kubeconfig")}


def ready_url(ports: dict[str, int]) -> str:
    """Karpenter's readiness: its manager has started and its CRDs are served."""
    return f"http://127.0.0.1:{ports[COMPONENT]}/readyz"
