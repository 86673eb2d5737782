"""Simulated cluster profiles: the nodes of a sim cluster, their GPUs, MIG layout and sharing.

A profile is pure data. ``conformance/sim/gfd.py`` turns a node group into the labels and
resources the GPU Operator, the device plugin and GPU Feature Discovery would write; the operator
stand-in applies them through the API server.

Facts used here:

- ``mig_strategy`` is cluster-wide: it is ClusterPolicy ``spec.mig.strategy`` (chart default
  ``single``, gpu-operator-v26.7.0 ``chart/values.yaml`` ``mig.strategy``), passed to the device
  plugin and GFD as ``MIG_STRATEGY``. A profile therefore gives all its GPU groups one strategy.
- ``mig_config`` is the ``nvidia.com/mig.config`` label the MIG manager applies; its names and
  layouts come from ``default-mig-parted-config`` (see ``gpu_models.py``). Default ``all-disabled``
  is ``migManager.config.default`` in the chart's values.
- Sharing follows the device plugin README, "Shared Access to GPUs" (k8s-device-plugin v0.20.0):
  time-slicing and MPS are mutually exclusive, replicas must be >= 2, time-slicing applies to
  ``nvidia.com/gpu`` and the mixed-strategy MIG resources, MPS only to ``nvidia.com/gpu`` on full
  GPUs, ``renameByDefault`` advertises ``<name>.shared``, and MPS always fails requests > 1
  (``api/config/v1/config.go`` forces ``failRequestsGreaterThanOne``).
- GPU nodes carry the taint ``nvidia.com/gpu=present:NoSchedule``, which every operand tolerates
  (``daemonsets.tolerations`` in the chart's values: key ``nvidia.com/gpu``, ``Exists``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from conformance.common.errors import UsageError
from conformance.nvidia.gpu_models import (
    MIG_DISABLED,
    GpuModel,
    MigLayout,
    get_model,
    layout_counts,
)
from conformance.nvidia.labels import GPU_RESOURCE
from conformance.nvidia.sharing import SharingConfig

DEFAULT_DRIVER_VERSION = "580.105.08"
DEFAULT_CUDA_VERSION = "13.0"  # the CUDA version the R580 driver supports (cuda.runtime-version)
DEFAULT_MIG_STRATEGY = "single"  # chart values.yaml mig.strategy
MIG_STRATEGIES = ("none", "single", "mixed")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DRIVER_VERSION = re.compile(r"^[0-9]+\.[0-9]+(\.[0-9]+)?$")  # GFD: "X.Y[.Z]"
_CUDA_VERSION = re.compile(r"^[0-9]+\.[0-9]+$")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute

    def as_dict(self) -> dict[str, str]:
        """The taint as a Node ``spec.taints`` entry."""
        return {"key": self.key, "value": self.value, "effect": self.effect}

    def __iter__(self) -> Iterator[tuple[str, str]]:
        """Pairs, so that ``dict(taint)`` gives :meth:`as_dict`."""
        return iter(self.as_dict().items())


GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
ALLOCATIONS = ("device-plugin", "dra")

OPERATOR_STACK = "gpu-operator"  # the GPU Operator with a ClusterPolicy
STACKS = (OPERATOR_STACK, "device-plugin-chart", "gpu-cluster")
GANG_SCHEDULERS = (None, "kueue")
AUTOSCALERS = (None, "karpenter")
CUSTOM_METRICS_ADAPTERS = (None, "test-adapter")


@dataclass(frozen=True)
class NodeGroup:
    """``count`` identical nodes named ``<name_prefix>-<i>``; a CPU group has no ``gpu_model``."""

    name: str
    count: int
    name_prefix: str
    machine_type: str  # nvidia.com/gpu.machine (GFD reads the DMI product name: instance type)
    cpu: int
    memory_gib: int
    gpu_model: str | None = None  # a GPU_MODELS key (GFD product name)
    gpus_per_node: int = 0
    driver_version: str = DEFAULT_DRIVER_VERSION
    cuda_version: str = DEFAULT_CUDA_VERSION
    mig_strategy: str = DEFAULT_MIG_STRATEGY
    mig_config: str = MIG_DISABLED
    sharing: SharingConfig | None = None
    taints: tuple[Taint, ...] = ()
    pods: int = 110
    # How the node hands out its GPUs: the device plugin (nvidia.com/gpu in its capacity) or
    # the NVIDIA DRA driver (a gpu.nvidia.com ResourceSlice pool; sim/dra.py plays it).
    allocation: str = "device-plugin"


    def __post_init__(self) -> None:
        where = f"node group {self.name!r}"
        if self.count < 0:
            raise ValueError(f"{where}: count must be >= 0")
        if not _DNS_LABEL.match(self.name_prefix) or len(self.name_prefix) > 50:
            raise ValueError(f"{where}: name prefix {self.name_prefix!r} is not a DNS label")
        if not _LABEL_VALUE.match(self.machine_type) or len(self.machine_type) > 63:
            raise ValueError(f"{where}: machine type {self.machine_type!r} is not a label value")
        if self.cpu < 1 or self.memory_gib < 1 or self.pods < 1:
            raise ValueError(f"{where}: cpu, memory and pods must be positive")
        if self.allocation not in ALLOCATIONS:
            raise ValueError(f"{where}: allocation {self.allocation!r} is not one of "
                             f"{', '.join(ALLOCATIONS)}")
        if self.allocation == "dra" and (self.gpu_model is None or self.sharing is not None):
            raise ValueError(f"{where}: a DRA group has GPUs and no device plugin sharing "
                             "config (DRA shares through claims)")

        if self.gpu_model is None:
            self._check_cpu_group(where)
        else:
            self._check_gpu_group(where)

    def _check_cpu_group(self, where: str) -> None:
        if self.gpus_per_node or self.sharing or self.mig_config != MIG_DISABLED:
            raise ValueError(f"{where}: a CPU-only group has no GPUs, MIG or sharing")

    def _check_gpu_group(self, where: str) -> None:
        model = get_model(self.gpu_model or "")
        if self.gpus_per_node < 1:
            raise ValueError(f"{where}: a GPU group needs gpus_per_node >= 1")
        if not _DRIVER_VERSION.match(self.driver_version):
            raise ValueError(f"{where}: driver version {self.driver_version!r} is not X.Y[.Z]")
        if not _CUDA_VERSION.match(self.cuda_version):
            raise ValueError(f"{where}: CUDA version {self.cuda_version!r} is not X.Y")
        if self.mig_strategy not in MIG_STRATEGIES:
            raise ValueError(f"{where}: MIG strategy {self.mig_strategy!r} is not one of "
                             f"{', '.join(MIG_STRATEGIES)}")
        if self.mig_config != MIG_DISABLED and not model.mig_capable:
            raise ValueError(f"{where}: {model.product} is not MIG-capable")
        layout = model.mig_layout(self.mig_config)
        if layout:
            _check_layout(where, model, layout, self.mig_strategy)
        if self.sharing is not None:
            self._check_sharing(where, self.sharing)

    def _check_sharing(self, where: str, sharing: SharingConfig) -> None:
        if sharing.strategy == "mps" and self.mig_enabled:
            raise ValueError(f"{where}: MPS is not supported on devices with MIG enabled")
        shareable = set(self.base_resources())
        if not any(r.name in shareable for r in sharing.resources):
            raise ValueError(f"{where}: sharing names none of the resources this group "
                             f"advertises ({', '.join(sorted(shareable))})")

    # --- derived facts --------------------------------------------------------------------------

    @property
    def is_gpu(self) -> bool:
        return self.gpu_model is not None

    @property
    def model(self) -> GpuModel:
        if self.gpu_model is None:
            raise ValueError(f"node group {self.name!r} has no GPUs")
        return get_model(self.gpu_model)

    @property
    def mig_layout(self) -> MigLayout:
        """MIG devices per GPU (empty when MIG is disabled)."""
        return self.model.mig_layout(self.mig_config) if self.is_gpu else ()

    @property
    def mig_enabled(self) -> bool:
        return bool(self.mig_layout)

    def mig_devices_per_node(self) -> dict[str, int]:
        """MIG devices per node by profile name, e.g. {"1g.5gb": 56}."""
        return {p: n * self.gpus_per_node for p, n in layout_counts(self.mig_layout).items()}

    def base_resources(self) -> dict[str, int]:
        """GPU resources per node before sharing: what the device plugin's devices are."""
        if not self.is_gpu:
            return {}
        if not self.mig_enabled:
            return {GPU_RESOURCE: self.gpus_per_node}
        migs = self.mig_devices_per_node()
        if self.mig_strategy == "single":
            return {GPU_RESOURCE: sum(migs.values())}
        return {self.model.mig_profile(p).resource_name: n for p, n in migs.items()}

    def node_name(self, index: int) -> str:
        if not 0 <= index < self.count:
            raise IndexError(f"node group {self.name!r} has {self.count} nodes, no index {index}")
        return f"{self.name_prefix}-{index}"

    def node_names(self) -> list[str]:
        return [f"{self.name_prefix}-{i}" for i in range(self.count)]


def _check_layout(where: str, model: GpuModel, layout: MigLayout, strategy: str) -> None:
    if strategy == "none":
        raise ValueError(f"{where}: a MIG layout needs MIG strategy single or mixed")
    counts = layout_counts(layout)
    if strategy == "single" and len(counts) != 1:
        raise ValueError(f"{where}: MIG strategy single needs one MIG profile per node, "
                         f"got {', '.join(counts)}")
    slices = 0
    for name, n in counts.items():
        profile = model.mig_profile(name)
        if n > profile.max_instances:
            raise ValueError(f"{where}: at most {profile.max_instances} x {name} fit on a GPU")
        slices += n * profile.gi_slices
    if slices > model.mig_slices:
        raise ValueError(f"{where}: the layout needs {slices} slices, a GPU has {model.mig_slices}")


def gpu_group(name: str, count: int, model: str, gpus_per_node: int, machine_type: str, *,
              cpu: int, memory_gib: int, name_prefix: str | None = None,
              **kwargs: object) -> NodeGroup:
    """A GPU node group (untainted, as the GPU Operator leaves nodes, unless given ``taints``)."""
    return NodeGroup(name=name, count=count, name_prefix=name_prefix or f"gpu-{name}",
                     machine_type=machine_type, cpu=cpu, memory_gib=memory_gib, gpu_model=model,
                     gpus_per_node=gpus_per_node, **kwargs)  # type: ignore[arg-type]


def cpu_group(count: int = 1, *, name: str = "cpu", machine_type: str = "m7i.4xlarge",
              cpu: int = 16, memory_gib: int = 64) -> NodeGroup:
    return NodeGroup(name=name, count=count, name_prefix=name, machine_type=machine_type,
                     cpu=cpu, memory_gib=memory_gib)


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    groups: tuple[NodeGroup, ...] = field(default_factory=tuple)
    # Who runs the NVIDIA stack: the GPU Operator (ClusterPolicy, operands), the device
    # plugin Helm chart with GFD and NFD and no operator (nvidia.device_plugin_chart), or the
    # GPU Operator's GPUCluster (the DRA stack, sim/gpucluster.py).
    stack: str = OPERATOR_STACK
    # Who places gangs all-or-nothing: None (nobody), or "kueue" (Kueue's manager runs as a
    # process of the control plane, with one ClusterQueue: sim/kueue.py).
    gang: str | None = None
    # Who adds and removes nodes for pending pods: None (nobody), or "karpenter" (Karpenter's
    # KWOK provider runs as a process of the control plane with one NodePool:
    # sim/karpenter.py); ``autoscaled`` are the instance types it may launch, one per group
    # (a group of 0 nodes: the autoscaler makes them), GPU nodes as the stand-in writes them.
    autoscaler: str | None = None
    autoscaled: tuple[NodeGroup, ...] = ()
    # Who serves the custom metrics API (custom.metrics.k8s.io) the HPA scales on: None
    # (nobody), or "test-adapter" (custom-metrics-apiserver's test adapter runs as a process of
    # the control plane, registered as an APIService: sim/metrics_adapter.py).
    custom_metrics: str | None = None

    def __post_init__(self) -> None:
        if self.autoscaler not in AUTOSCALERS or bool(self.autoscaler) != bool(self.autoscaled):
            raise ValueError(f"profile {self.name!r}: autoscaler {self.autoscaler!r} is one of "
                             f"{AUTOSCALERS}, with the instance types it launches")
        if any(g.count for g in self.autoscaled):
            raise ValueError(f"profile {self.name!r}: autoscaled groups start with 0 nodes")
        if self.custom_metrics not in CUSTOM_METRICS_ADAPTERS:
            raise ValueError(f"profile {self.name!r}: custom_metrics {self.custom_metrics!r} "
                             f"is not one of {CUSTOM_METRICS_ADAPTERS}")
        if self.gang not in GANG_SCHEDULERS:
            raise ValueError(f"profile {self.name!r}: gang {self.gang!r} is not one of "
                             f"{GANG_SCHEDULERS}")
        if not self.groups:
            raise ValueError(f"profile {self.name!r} has no node groups")
        if self.stack not in STACKS:
            raise ValueError(f"profile {self.name!r}: stack {self.stack!r} is not one of "
                             f"{', '.join(STACKS)}")
        if not self.runs_cluster_policy and any(g.mig_enabled for g in self.gpu_groups):
            raise ValueError(f"profile {self.name!r}: MIG layouts need the operator's MIG "
                             "manager")
        for attr in ("name", "name_prefix"):
            values = [getattr(g, attr) for g in self.groups]
            if len(set(values)) != len(values):
                raise ValueError(f"profile {self.name!r}: node group {attr} values repeat: "
                                 f"{values}")
        # What one ClusterPolicy sets for every GPU node: spec.mig.strategy, spec.driver.version
        # and the device plugin's default config (spec.devicePlugin.config.default).
        for attr, where in (("mig_strategy", "spec.mig.strategy"),
                            ("driver_version", "spec.driver.version"),
                            ("sharing", "spec.devicePlugin.config")):
            values = {getattr(g, attr) for g in self.gpu_groups}
            if len(values) > 1:
                raise ValueError(f"profile {self.name!r}: {attr} is cluster-wide ({where}), "
                                 f"but the GPU groups differ: {sorted(map(str, values))}")

    @property
    def runs_cluster_policy(self) -> bool:
        """The GPU Operator runs the stack through a ClusterPolicy (not a chart, no GPUCluster)."""
        return self.stack == OPERATOR_STACK

    @property
    def gpu_groups(self) -> tuple[NodeGroup, ...]:
        return tuple(g for g in self.groups if g.is_gpu)

    @property
    def cpu_groups(self) -> tuple[NodeGroup, ...]:
        return tuple(g for g in self.groups if not g.is_gpu)

    @property
    def node_groups(self) -> tuple[NodeGroup, ...]:
        """All node groups (an alias of ``groups``)."""
        return self.groups

    @property
    def mig_strategy(self) -> str:
        """ClusterPolicy ``spec.mig.strategy`` for this cluster."""
        return self.gpu_groups[0].mig_strategy if self.gpu_groups else DEFAULT_MIG_STRATEGY

    @property
    def driver_version(self) -> str:
        """ClusterPolicy ``spec.driver.version``: the driver every GPU node runs."""
        return self.gpu_groups[0].driver_version if self.gpu_groups else DEFAULT_DRIVER_VERSION

    @property
    def sharing(self) -> SharingConfig | None:
        """The cluster's sharing config (the device plugin's default config), if any."""
        return self.gpu_groups[0].sharing if self.gpu_groups else None

    def sharing_config(self) -> dict[str, Any] | None:
        """The device plugin config document of :attr:`sharing`, or ``None`` without sharing."""
        return self.sharing.document() if self.sharing else None

    @property
    def node_count(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def gpu_node_count(self) -> int:
        return sum(g.count for g in self.gpu_groups)

    @property
    def physical_gpus(self) -> int:
        return sum(g.count * g.gpus_per_node for g in self.gpu_groups)

    def group(self, name: str) -> NodeGroup:
        for g in self.groups:
            if g.name == name:
                return g
        raise ValueError(f"profile {self.name!r} has no node group {name!r} "
                         f"(groups: {', '.join(g.name for g in self.groups)})")

    def iter_nodes(self) -> Iterator[tuple[NodeGroup, int, str]]:
        """Every node as (group, index in group, node name)."""
        for g in self.groups:
            for i in range(g.count):
                yield g, i, f"{g.name_prefix}-{i}"


# Machine shapes (vCPU, GiB) of the cloud instances whose DMI product name GFD would report.
_P5 = {"machine_type": "p5.48xlarge", "cpu": 192, "memory_gib": 2048}  # 8x H100 80GB HBM3
_P5EN = {"machine_type": "p5en.48xlarge", "cpu": 192, "memory_gib": 2048}  # 8x H200
_P4D = {"machine_type": "p4d.24xlarge", "cpu": 96, "memory_gib": 1152}  # 8x A100-SXM4-40GB
_A3_2G = {"machine_type": "a3-highgpu-2g", "cpu": 52, "memory_gib": 468}  # 2x H100 80GB HBM3
_A3_1G = {"machine_type": "a3-highgpu-1g", "cpu": 26, "memory_gib": 234}  # 1x H100 80GB HBM3

H100 = "NVIDIA-H100-80GB-HBM3"
H200 = "NVIDIA-H200"
A100_40GB = "NVIDIA-A100-SXM4-40GB"


def _profiles() -> dict[str, Profile]:
    ts4 = SharingConfig.time_slicing(4)
    profiles = (
        Profile("healthy", "2 nodes x 8 H100 80GB, no sharing, plus a CPU node",
                (gpu_group("h100", 2, H100, 8, **_P5), cpu_group())),
        Profile("heterogeneous", "A100-40GB nodes (compute 8.0) and H200 nodes (compute 9.0)",
                (gpu_group("a100", 3, A100_40GB, 8, **_P4D),
                 gpu_group("h200", 2, H200, 8, **_P5EN), cpu_group())),
        Profile("time-slicing", "2 nodes x 2 H100, time-slicing 4 replicas, not renamed",
                (gpu_group("h100", 2, H100, 2, sharing=ts4, **_A3_2G), cpu_group())),
        Profile("time-slicing-renamed",
                "as time-slicing, with renameByDefault (advertises nvidia.com/gpu.shared) and "
                "failRequestsGreaterThanOne",
                (gpu_group("h100", 2, H100, 2, **_A3_2G,
                           sharing=SharingConfig.time_slicing(
                               4, rename_by_default=True, fail_requests_greater_than_one=True)),
                 cpu_group())),
        Profile("time-slicing-e2e",
                "NVIDIA's own e2e sharing config (gpu-operator tests/plugin-config.yaml, "
                "key time-slicing): 10 replicas on 2 x 8 H100, 80 nvidia.com/gpu a node",
                (gpu_group("h100", 2, H100, 8, sharing=SharingConfig.time_slicing(10), **_P5),
                 cpu_group())),
        Profile("mig-single", "MIG strategy single: A100 all-1g.5gb and H100 all-1g.10gb",
                (gpu_group("a100", 2, A100_40GB, 8, mig_config="all-1g.5gb", **_P4D),
                 gpu_group("h100", 1, H100, 8, mig_config="all-1g.10gb", **_P5), cpu_group())),
        Profile("mig-mixed", "MIG strategy mixed: A100 and H100 nodes in all-balanced",
                (gpu_group("a100", 2, A100_40GB, 8, mig_strategy="mixed",
                           mig_config="all-balanced", **_P4D),
                 gpu_group("h100", 1, H100, 8, mig_strategy="mixed", mig_config="all-balanced",
                           **_P5), cpu_group())),
        Profile("large", "500 nodes x 8 H100 (list/watch scale), plus a CPU node",
                (gpu_group("h100", 500, H100, 8, **_P5), cpu_group())),
        Profile("managed-tainted",
                "a managed node pool: GPU nodes tainted nvidia.com/gpu=present:NoSchedule, GPU "
                "pods tolerated by the API server's ExtendedResourceToleration",
                (gpu_group("h100", 2, H100, 8, taints=(GPU_TAINT,), **_P5), cpu_group())),
        Profile("device-plugin-chart",
                "no GPU Operator: the device plugin chart with GFD and NFD on 2 x 8 H100",
                (gpu_group("h100", 2, H100, 8, mig_strategy="none", **_P5), cpu_group()),
                stack="device-plugin-chart"),
        Profile("device-plugin-chart-time-slicing",
                "no GPU Operator: the device plugin chart, time-slicing 4 replicas from its "
                "config.map", (gpu_group("h100", 2, H100, 2, mig_strategy="none", sharing=ts4,
                                         **_A3_2G), cpu_group()),
                stack="device-plugin-chart"),
        Profile("gang-kueue", "Kueue v0.17.0 places gangs all-or-nothing: one ClusterQueue "
                "with quota for the 4 GPUs of 2 x 2 H100",
                (gpu_group("h100", 2, H100, 2, **_A3_2G), cpu_group()), gang="kueue"),
        Profile("autoscaling-karpenter", "Karpenter v1.15.0 (KWOK provider) grows and shrinks "
                "one GPU NodePool of 1 x H100 nodes (none at first) beside 2 x 2 H100",
                (gpu_group("h100", 2, H100, 2, **_A3_2G), cpu_group()),
                autoscaler="karpenter",
                autoscaled=(gpu_group("pool-h100", 0, H100, 1, **_A3_1G),
                            cpu_group(0, name="pool-cpu", machine_type="n2-standard-16"))),
        Profile("pod-autoscaling", "custom-metrics-apiserver v1.37.0's test adapter serves "
                "custom.metrics.k8s.io; the HPA scales GPU Deployments on 2 x 2 H100",
                (gpu_group("h100", 2, H100, 2, **_A3_2G), cpu_group()),
                custom_metrics="test-adapter"),
        # --- DRA: the NVIDIA DRA driver (gpu.nvidia.com) hands out the GPUs (sim/dra.py) ---
        Profile("dra", "DRA only: 1 x 8 A100-40GB (compute 8.0) and 2 x 8 H100 (9.0) publish "
                "gpu.nvidia.com pools; no nvidia.com/gpu in their capacity",
                (gpu_group("a100", 1, A100_40GB, 8, name_prefix="dra-a100", allocation="dra",
                           **_P4D),
                 gpu_group("h100", 2, H100, 8, name_prefix="dra-h100", allocation="dra", **_P5),
                 cpu_group())),
        Profile("dra-mig", "DRA with static MIG devices: A100 all-balanced and H100 "
                "all-1g.10gb, announced as mig.nvidia.com devices",
                (gpu_group("a100", 1, A100_40GB, 8, name_prefix="dra-mig-a100",
                           mig_strategy="mixed", mig_config="all-balanced", allocation="dra",
                           **_P4D),
                 gpu_group("h100", 1, H100, 8, name_prefix="dra-mig-h100", mig_strategy="mixed",
                           mig_config="all-1g.10gb", allocation="dra", **_P5), cpu_group())),
        Profile("dra-mixed", "device plugin on 2 x 8 H100, the DRA driver on 2 x 8 H200",
                (gpu_group("h100", 2, H100, 8, **_P5),
                 gpu_group("h200", 2, H200, 8, name_prefix="dra-h200", allocation="dra",
                           **_P5EN), cpu_group())),
        Profile("dra-gpucluster", "the GPU Operator's GPUCluster (no ClusterPolicy) runs the "
                "DRA driver, DCGM exporter and DRA validator on 1 x 8 A100-40GB and 1 x 8 H100",
                (gpu_group("a100", 1, A100_40GB, 8, name_prefix="gc-a100", allocation="dra",
                           **_P4D),
                 gpu_group("h100", 1, H100, 8, name_prefix="gc-h100", allocation="dra", **_P5),
                 cpu_group()), stack="gpu-cluster"),
        Profile("dra-large", "500 DRA nodes x 8 H100 (list/watch scale of the DRA suite), plus "
                "a CPU node", (gpu_group("h100", 500, H100, 8, name_prefix="dra-h100",
                                         allocation="dra", **_P5), cpu_group())),
    )
    return {p.name: p for p in profiles}


PROFILES: dict[str, Profile] = _profiles()


class UnknownProfile(UsageError, ValueError):
    """An unknown profile name (a ValueError, and a UsageError so the CLI exits cleanly)."""


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UnknownProfile(f"unknown sim profile {name!r}; valid profiles: "
                             + ", ".join(PROFILES)) from None
