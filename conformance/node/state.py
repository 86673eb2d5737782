"""What ``node up`` created, written before it is created, so that ``down`` (or the cleanup of an
interrupted ``up``) can remove exactly that and nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from conformance.binaries import binaries
from conformance.controlplane.components import clusters_dir
from conformance.controlplane.statefile import StateFile

# Host paths the node needs at fixed places: the device plugin's chart and the kubelet's device
# manager agree on /var/lib/kubelet/device-plugins, the chart mounts /var/run/cdi, GFD and NFD
# share /etc/kubernetes/node-feature-discovery/features.d, the plugin's MPS root is /run/nvidia/mps.
# The kubelet writes pod logs to /var/log/pods and links them from /var/log/containers. Whatever
# of these did not exist before ``up`` is recorded in ``NodeState.created`` and removed by ``down``.
# Two more are side effects nobody configures away: containerd's CNI library caches its
# results in /var/lib/cni, and util-linux ``mount`` (run by the kubelet) keeps /run/mount/utab.
KUBELET_ROOT = Path("/var/lib/kubelet")
MPS_ROOT = Path("/run/nvidia/mps")  # the chart's mps.root (a shared mount: host.make_shared)
RUN_ROOT = Path("/run/gpuconf")  # sockets and runtime state (short paths: unix sockets <108 chars)
HOST_PATHS = (
    KUBELET_ROOT,
    Path("/var/log/pods"),
    Path("/var/log/containers"),
    Path("/var/run/cdi"),
    Path("/etc/kubernetes/node-feature-discovery/features.d"),
    MPS_ROOT / "shm",
    Path("/var/lib/cni"),
    Path("/run/mount"),
    RUN_ROOT,
)


def nodes_dir() -> Path:
    return binaries.cache_dir() / "nodes"


@dataclass
class NodeState(StateFile):
    """One node's bring-up record (``<cache>/nodes/<name>/state.json``)."""

    name: str
    folder: str
    run_dir: str
    node_name: str
    node_ip: str
    phase: str = "starting"  # starting -> ready; "failed" while an interrupted up is cleaned
    pids: dict[str, int] = field(default_factory=dict)
    binaries: dict[str, str] = field(default_factory=dict)  # component -> argv[0] it runs
    commands: dict[str, list[str]] = field(default_factory=dict)  # component -> argv
    environments: dict[str, dict[str, str]] = field(default_factory=dict)  # extra env
    created: list[str] = field(default_factory=list)  # host paths up created (down removes them)
    links: list[str] = field(default_factory=list)  # network links up created
    addresses: list[list[str]] = field(default_factory=list)  # [cidr, dev] added to existing links
    sysctls: dict[str, str] = field(default_factory=dict)  # values before up (down restores)
    cgroup_subtree: list[str] = field(default_factory=list)  # v2 controllers up enabled at root
    host: dict = field(default_factory=dict)  # facts preflight found (cgroup version, caps, ...)
    gpu: dict = field(default_factory=dict)  # source (mock-nvml|driver), profile, count, roots
    images: dict[str, str] = field(default_factory=dict)  # role -> image reference
    chart: dict = field(default_factory=dict)  # helm release, namespace, chart path
    timings: dict[str, float] = field(default_factory=dict)  # seconds from the start of up
    started: float = 0.0

    @classmethod
    def root(cls) -> Path:
        return nodes_dir()

    @property
    def path(self) -> Path:
        return Path(self.folder)

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig of the node's control plane."""
        return clusters_dir() / self.name / "kubeconfig"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def containerd_socket(self) -> Path:
        return Path(self.run_dir) / "containerd.sock"
