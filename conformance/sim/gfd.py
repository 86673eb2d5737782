"""What the GPU Operator, the device plugin and GPU Feature Discovery write on a simulated node.

Pure functions of a :class:`~conformance.sim.profiles.NodeGroup`; the operator stand-in applies
them to the API server. Sources (k8s-device-plugin v0.20.0 unless said otherwise):

- GFD labels: ``docs/gpu-feature-discovery/README.md`` ("Generated Labels", MIG single/mixed),
  the contract ``tests/expected-output*.txt``, and the labelers in ``internal/lm``:
  ``resource.go`` (``<resource>.{product,count,replicas,sharing-strategy}``; ``-SHARED`` only when
  replicas > 1 and the resource is not renamed; MIG-enabled full GPUs are labelled without sharing,
  replicas 0), ``mig-strategy.go`` (``mig.strategy`` whenever the strategy is not ``none``; single
  overrides ``gpu.*`` with the MIG device's values; mixed adds ``mig-<profile>.*``), ``nvml.go``
  (driver/CUDA versions, ``mig.capable``), ``vgpu.go`` (``vgpu.present``, ``false`` on nodes
  without vGPU as real operator-managed nodes show it).
- Operator labels: gpu-operator ``controllers/state_manager.go`` as ../shared/research/anchors.md
  §1f records it (``gpu.present``, ``gpu.deploy.*``, ``mig-manager`` only where
  ``mig.capable=true``, ``gpu.workload.config``, ``mig.config`` default ``all-disabled``), the MIG
  manager's ``mig.config.state``, and the driver upgrade controller's ``gpu-driver-upgrade-state``
  (chart ``driver.upgradePolicy.autoUpgrade: true``; anchors.md §1a).
- Resources and the sharing config: the device plugin README, "Shared Access to GPUs".
"""

from __future__ import annotations

import functools

from conformance.nvidia import driver
from conformance.nvidia import labels as L
from conformance.nvidia.gpu_models import GPU_MODELS
from conformance.nvidia.labels import GPU_RESOURCE
from conformance.nvidia.sharing import SharingConfig
from conformance.sim.profiles import NodeGroup

DEFAULT_GENERATION = 1767225600  # 2026-01-01T00:00:00Z: a fixed gfd.timestamp for tests

# Operands the operator switches on per GPU node (container workload), state_manager.go.
DEPLOY_OPERANDS = ("driver", "gpu-feature-discovery", "container-toolkit", "device-plugin",
                   "dcgm", "dcgm-exporter", "node-status-exporter", "operator-validator")
NFD_PCI_LABEL = L.NFD_PCI_NVIDIA


# --- labels -------------------------------------------------------------------------------------


def node_labels(group: NodeGroup, index: int, *, generation: int = DEFAULT_GENERATION,
                driver_version: str | None = None, product_override: str | None = None,
                replicas_override: int | None = None, include_gfd: bool = True,
                operator: bool = True) -> dict[str, str]:
    """The full label set NFD, the operator and GFD put on node ``index`` of ``group``.

    ``generation`` is ``nvidia.com/gfd.timestamp`` (10 digits). The other keywords exist to play
    faults: ``driver_version`` replaces the group's driver in every driver label,
    ``product_override`` / ``replicas_override`` replace ``nvidia.com/gpu.product`` /
    ``nvidia.com/gpu.replicas``, and ``include_gfd=False`` leaves out everything GFD writes.
    ``operator=False``: no GPU Operator (the device plugin chart), so only NFD's PCI label
    besides GFD's. A CPU-only node gets no labels from any of them: ``{}``.
    """
    group.node_name(index)  # IndexError for an index outside the group
    return labels_of(group, generation=generation, driver_version=driver_version,
                     product_override=product_override, replicas_override=replicas_override,
                     include_gfd=include_gfd, operator=operator)


def labels_of(group: NodeGroup, *, generation: int = DEFAULT_GENERATION,
              driver_version: str | None = None, product_override: str | None = None,
              replicas_override: int | None = None, include_gfd: bool = True,
              operator: bool = True) -> dict[str, str]:
    """:func:`node_labels` of any node of ``group``, also one an autoscaler launched (a group
    of no nodes of its own)."""
    if not group.is_gpu:
        return {}
    labels = dict(_operator_labels(group)) if operator else {NFD_PCI_LABEL: "true"}
    if include_gfd:
        labels.update(_gfd_labels(group, generation, driver_version or group.driver_version))
        if product_override is not None:
            labels[L.PRODUCT] = product_override
        if replicas_override is not None:
            labels[L.REPLICAS] = str(replicas_override)
    return labels


def gfd_labels(group: NodeGroup, *, generation: int = DEFAULT_GENERATION,
               driver_version: str | None = None) -> dict[str, str]:
    """Only the labels GPU Feature Discovery writes (what the contract files describe)."""
    if not group.is_gpu:
        return {}
    return dict(_gfd_labels(group, generation, driver_version or group.driver_version))


def operator_labels(group: NodeGroup) -> dict[str, str]:
    """Only the labels NFD, the operator, the MIG manager and the upgrade controller write."""
    return dict(_operator_labels(group)) if group.is_gpu else {}


@functools.lru_cache(maxsize=64)
def _operator_labels(group: NodeGroup) -> tuple[tuple[str, str], ...]:
    labels = {NFD_PCI_LABEL: "true", L.GPU_PRESENT: "true",
              "nvidia.com/gpu.workload.config": "container",
              L.DRIVER_UPGRADE_STATE: "upgrade-done"}
    labels.update({f"{L.DEPLOY_PREFIX}{op}": "true" for op in DEPLOY_OPERANDS
                   if not (op == "device-plugin" and group.allocation == "dra")})

    if group.model.mig_capable:
        labels[f"{L.DEPLOY_PREFIX}mig-manager"] = "true"
        labels[L.MIG_CONFIG] = group.mig_config
        labels["nvidia.com/mig.config.state"] = "success"
    return tuple(labels.items())


@functools.lru_cache(maxsize=256)
def _gfd_labels(group: NodeGroup, generation: int,
                driver_version: str) -> tuple[tuple[str, str], ...]:
    if not 10**9 <= generation < 10**10:
        raise ValueError(f"gfd.timestamp must have 10 digits, got {generation}")
    model = group.model
    labels: dict[str, str] = {L.GFD_TIMESTAMP: str(generation),
                              "nvidia.com/gpu.machine": group.machine_type}
    labels.update(driver.version_labels(driver_version, group.cuda_version))
    labels[L.MIG_CAPABLE] = str(model.mig_capable).lower()
    sharing = group.sharing
    # Full GPUs (nvidia.com/gpu.*). MIG-enabled GPUs are labelled without sharing (replicas 0).
    labels.update(_resource_labels(GPU_RESOURCE, group.gpus_per_node, (model.product,),
                                   None if group.mig_enabled else sharing,
                                   sharing_disabled=group.mig_enabled))
    labels.update({L.MEMORY: str(model.memory_mib),
                   L.FAMILY: model.family,
                   L.COMPUTE_MAJOR: str(model.compute_major),
                   L.COMPUTE_MINOR: str(model.compute_minor)})
    if group.mig_strategy != "none":
        labels[L.MIG_STRATEGY] = group.mig_strategy
    for profile_name, count in group.mig_devices_per_node().items():
        profile = model.mig_profile(profile_name)
        resource = GPU_RESOURCE if group.mig_strategy == "single" else profile.resource_name
        labels.update(_resource_labels(resource, count, (model.product, "MIG", profile.name),
                                       sharing))
        labels.update({f"{resource}.{k}": str(v) for k, v in profile.attributes().items()})
    labels.update({"nvidia.com/gpu.mode": "compute",
                   L.MPS_CAPABLE: str(sharing is not None
                                      and sharing.strategy == "mps").lower(),
                   "nvidia.com/vgpu.present": "false"})
    return tuple(labels.items())


def _resource_labels(resource: str, count: int, parts: tuple[str, ...],
                     sharing: SharingConfig | None, *,
                     sharing_disabled: bool = False) -> dict[str, str]:
    """``resourceLabeler.baseLabeler`` of internal/lm/resource.go."""
    replicas = 1 if sharing is None else sharing.replicas_for(resource)
    if sharing_disabled:  # NewGPUResourceLabelerWithoutSharing: getReplicas() is 0
        replicas = 0
    shared = sharing is not None and replicas > 1
    product = "-".join(parts)
    if shared and not (sharing and sharing.rename_by_default):
        product += "-SHARED"
    return {f"{resource}.product": product, f"{resource}.count": str(count),
            f"{resource}.replicas": str(replicas),
            f"{resource}.sharing-strategy": sharing.strategy if shared and sharing else "none"}


def other_product(product: str) -> str:
    """A ``gpu.product`` naming a GPU of another generation, suffixes kept (wrong-type fault).

    ``NVIDIA-H100-80GB-HBM3-SHARED`` becomes ``NVIDIA-A100-SXM4-40GB-SHARED``: the first model
    of ``GPU_MODELS`` with another compute capability major than the one ``product`` names.
    """
    base = max((n for n in GPU_MODELS if product.startswith(n)), key=len, default=None)
    major = GPU_MODELS[base].compute_major if base else None
    for name, model in GPU_MODELS.items():
        if model.compute_major != major:
            return name + (product[len(base):] if base else "")
    raise AssertionError("GPU_MODELS needs two generations")  # pragma: no cover


# --- resources ----------------------------------------------------------------------------------


def gpu_resources(group: NodeGroup) -> dict[str, int]:
    """The extended resources the device plugin advertises on one node of ``group``.

    Each device counts ``replicas`` times when shared; a shared resource is advertised as
    ``<name>.shared`` instead of ``<name>`` when ``renameByDefault`` is set (README, "With CUDA
    Time-Slicing": 8 GPUs x 10 replicas advertise ``nvidia.com/gpu: 80``).
    """
    out: dict[str, int] = {}
    if group.allocation == "dra":  # the DRA driver offers them as devices, not resources
        return out
    for name, count in group.base_resources().items():

        if group.sharing is None:
            out[name] = count
        else:
            out[group.sharing.advertised_name(name)] = count * group.sharing.replicas_for(name)
    return out


def advertised_resources(group: NodeGroup) -> dict[str, str]:
    """Node ``status.capacity`` (= ``allocatable`` in the sim): cpu, memory, pods and GPUs."""
    out = {"cpu": str(group.cpu), "memory": f"{group.memory_gib * 1024 * 1024}Ki",
           "pods": str(group.pods)}
    out.update({k: str(v) for k, v in gpu_resources(group).items()})
    return out
