"""Label keys, resource names and selectors of the NVIDIA stack (GFD, operator, device plugin).

Facts from ../shared/research/anchors.md §1b, §1f, §2c and the upstream GFD README.
"""

from __future__ import annotations

GPU_PRESENT = "nvidia.com/gpu.present"
DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
DEPLOY_OPERANDS = "nvidia.com/gpu.deploy.operands"
PRODUCT = "nvidia.com/gpu.product"
COUNT = "nvidia.com/gpu.count"
MEMORY = "nvidia.com/gpu.memory"
FAMILY = "nvidia.com/gpu.family"
REPLICAS = "nvidia.com/gpu.replicas"
SHARING_STRATEGY = "nvidia.com/gpu.sharing-strategy"
COMPUTE_MAJOR = "nvidia.com/gpu.compute.major"
COMPUTE_MINOR = "nvidia.com/gpu.compute.minor"
DRIVER_FULL = "nvidia.com/cuda.driver-version.full"
DRIVER_MAJOR = "nvidia.com/cuda.driver-version.major"
RUNTIME_FULL = "nvidia.com/cuda.runtime-version.full"
MIG_CAPABLE = "nvidia.com/mig.capable"
MIG_STRATEGY = "nvidia.com/mig.strategy"
MIG_CONFIG = "nvidia.com/mig.config"
MPS_CAPABLE = "nvidia.com/mps.capable"
DEVICE_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
DRIVER_UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"  # the operator's upgrade controller
SHARED_SUFFIX = "-SHARED"

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_RESOURCE = "nvidia.com/gpu.shared"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"

# Node Feature Discovery's PCI vendor label: an NVIDIA device (vendor 0x10de) on the PCI bus.
# The device plugin chart schedules on it (values.yaml affinity), as does the GPU Operator's NFD.
NFD_PCI_NVIDIA = "feature.node.kubernetes.io/pci-10de.present"
GFD_TIMESTAMP = "nvidia.com/gfd.timestamp"

OPERATOR_SELECTOR = "app.kubernetes.io/component=gpu-operator"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def is_gpu_resource(name: str) -> bool:
    return name in (GPU_RESOURCE, SHARED_RESOURCE) or name.startswith(MIG_RESOURCE_PREFIX)


def gpu_resources(resources: dict[str, str] | None) -> dict[str, int]:
    """The NVIDIA GPU resources (whole, shared, MIG) in a capacity/allocatable map."""
    out: dict[str, int] = {}
    for name, value in (resources or {}).items():
        if is_gpu_resource(name):
            try:
                out[name] = int(str(value))
            except ValueError:
                out[name] = 0
    return out


def gpu_resource_of(resources: dict[str, str] | None) -> tuple[str | None, int]:
    """The main GPU resource a node advertises and its count: whole GPUs, else shared GPUs,
    else (mixed MIG) the MIG profile with the most devices."""
    found = gpu_resources(resources)
    for name in (GPU_RESOURCE, SHARED_RESOURCE):
        if found.get(name):
            return name, found[name]
    mig = sorted(((v, k) for k, v in found.items() if k.startswith(MIG_RESOURCE_PREFIX) and v),
                 reverse=True)
    if mig:
        return mig[0][1], mig[0][0]
    return None, 0
