"""A real Kubernetes node on this machine: the sim's control plane, a real kubelet, containerd,
runc and CNI, and NVIDIA's device plugin, GPU Feature Discovery and NFD from their upstream
chart; on a host without GPUs, NVIDIA's mock NVML stands in for the driver.

API for the CLI (``gpuconf node ...``) and ``--target node``::

    up(name, *, gpu_profile=None | "8xH100", driver_root=None, dev_root=None,
       nvidia_src=DIR, chart_values=None, progress=print) -> NodeState
    down(name, *, progress=print) -> bool
    status(name) -> dict
    reconfigure(name, *, chart_values, progress=print) -> NodeState   (helm upgrade, waits)

By hand: ``gpuconf node up|down|status|reconfigure|workload-image``
(``conformance/cli/node_commands.py``).
"""

from conformance.node.lifecycle import DEFAULT_GPU_PROFILE, down, reconfigure, status, up
from conformance.node.state import NodeState

__all__ = ["DEFAULT_GPU_PROFILE", "NodeState", "down", "reconfigure", "status", "up"]
