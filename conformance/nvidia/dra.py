"""The NVIDIA DRA driver (``gpu.nvidia.com``) as data: its DeviceClasses, the attributes each
release publishes, its feature gates, GpuConfig sharing, and the GPU Operator's GPUCluster.

Facts (../shared/research/dra.md, read from the upstream files named there):

- kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 (formerly NVIDIA/k8s-dra-driver-gpu). Its Helm
  chart renders the DeviceClasses of ``templates/deviceclass-*.yaml``; ``deviceclass-gpu.yaml``
  adds ``extendedResourceName: nvidia.com/gpu`` when it renders ``resource.k8s.io/v1``. The
  chart ``dra-driver-nvidia-gpu`` labels its pods ``app.kubernetes.io/name`` with its name; the
  older chart ``nvidia/nvidia-dra-driver-gpu`` and the GPU Operator's GPUCluster
  (``manifests/state-dra-driver``, v26.7.0) use their own names, so the kubelet plugin is found
  by any of them and its release read from its image tag.
- Attributes: ``cmd/gpu-kubelet-plugin/{deviceinfo,mig}.go`` and the bats lists
  ``tests/bats/test_gpu_{basic,mig}.bats`` (v0.4.1); the history (index/minor dropped in
  v25.8, pcieBusID replaced by ``resource.kubernetes.io/pciBusID`` and ``addressingMode`` added
  in v25.12) from dra.md §2.3. The calendar releases 25.3, 25.8, 25.12 and 26.4 are the
  semantic releases 0.1 to 0.4 (``pkg/featuregates`` comments).
- Version attributes are semver: the driver writes ``semver.MustParse(v).String()``
  (Masterminds, tolerant), so nvidia-smi's ``580.95.05`` is published as ``580.95.5`` and CUDA
  ``9.0`` as ``9.0.0``; the API server accepts only strict SemVer 2.0.0 and rejects the whole
  ResourceSlice otherwise (ROCm/k8s-gpu-dra-driver#56).
- GpuConfig sharing: ``api/nvidia.com/resource/v1beta1/{gpuconfig,sharing,validate}.go``
  (v0.4.1); TimeSlicing needs the driver's alpha gate ``TimeSlicingSettings``, MPS needs
  ``MPSSupport`` (``pkg/featuregates``; both off by default).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conformance.nvidia.gpu_models import sanitise

# --- the API and the driver ------------------------------------------------------------------
RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_VERSION = "v1"  # served by default since Kubernetes 1.34 (DRA GA)
RESOURCE_API = f"{RESOURCE_GROUP}/{RESOURCE_VERSION}"
DRIVER = "gpu.nvidia.com"
COMPUTE_DOMAIN_DRIVER = "compute-domain.nvidia.com"
EXTENDED_RESOURCE = "nvidia.com/gpu"
# The scheduler names the claim it creates for an extended-resource request so (KEP-5004).
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
UNSATISFIABLE_REASON = "cannot allocate all claims"  # the scheduler's FailedScheduling message

# The API server's feature gates that shape DRA (kube_features.go; dra.md §1.3), in the order
# the report lists them.
API_GATES = ("DynamicResourceAllocation", "DRAExtendedResource", "DRAPrioritizedList",
             "DRAAdminAccess", "DRAPartitionableDevices", "DRAConsumableCapacity",
             "DRADeviceTaints", "DRADeviceTaintRules", "DRADeviceBindingConditions",
             "DRAResourceClaimDeviceStatus", "DRASchedulerFilterTimeout")

TYPE_GPU, TYPE_MIG, TYPE_VFIO = "gpu", "mig", "vfio"


@dataclass(frozen=True)
class DeviceClass:
    """One DeviceClass of the driver's chart (``templates/deviceclass-*.yaml``, v0.4.1)."""

    name: str
    expression: str
    extended_resource: str | None = None  # rendered for resource.k8s.io/v1 only
    compute_domains: bool = False  # rendered only with resources.computeDomains.enabled

    def manifest(self, *, extended_resource: bool = True) -> dict[str, Any]:
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": self.expression}}]}
        if extended_resource and self.extended_resource:
            spec["extendedResourceName"] = self.extended_resource
        return {"apiVersion": RESOURCE_API, "kind": "DeviceClass",
                "metadata": {"name": self.name}, "spec": spec}


def _type_is(driver: str, device_type: str) -> str:
    return (f"device.driver == '{driver}' && "
            f"device.attributes['{driver}'].type == '{device_type}'")


GPU_CLASS = DeviceClass("gpu.nvidia.com", _type_is(DRIVER, TYPE_GPU), EXTENDED_RESOURCE)
MIG_CLASS = DeviceClass("mig.nvidia.com", _type_is(DRIVER, TYPE_MIG))
VFIO_CLASS = DeviceClass("vfio.gpu.nvidia.com", _type_is(DRIVER, TYPE_VFIO))
CD_DAEMON_CLASS = DeviceClass("compute-domain-daemon.nvidia.com",
                              _type_is(COMPUTE_DOMAIN_DRIVER, "daemon"), compute_domains=True)
CD_CHANNEL_CLASS = DeviceClass(
    "compute-domain-default-channel.nvidia.com",
    _type_is(COMPUTE_DOMAIN_DRIVER, "channel")
    + f" && device.attributes['{COMPUTE_DOMAIN_DRIVER}'].id == 0", compute_domains=True)
DEVICE_CLASSES: tuple[DeviceClass, ...] = (GPU_CLASS, MIG_CLASS, VFIO_CLASS, CD_DAEMON_CLASS,
                                           CD_CHANNEL_CLASS)
CLASS_BY_NAME: dict[str, DeviceClass] = {c.name: c for c in DEVICE_CLASSES}
# The classes a GPU driver install must have (gpus enabled); vfio and compute domains depend on
# values and gates, so they are checked only where present.
REQUIRED_CLASSES = (GPU_CLASS.name, MIG_CLASS.name)


def normalise_expression(expression: str) -> str:
    """A CEL expression compared without regard to whitespace and quote style."""
    return re.sub(r"\s+", "", expression).replace('"', "'")


# --- the kubelet plugin -----------------------------------------------------------------------
# app.kubernetes.io/name of the driver's pods: the chart (v0.4+), the older NVIDIA chart, and the
# GPU Operator's GPUCluster operands.
POD_NAMES = ("dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu", "nvidia-dra-driver")
POD_SELECTOR = f"app.kubernetes.io/name in ({','.join(POD_NAMES)})"
GPU_CONTAINER = "gpus"  # the gpu-kubelet-plugin container (compute-domains is the other)
FEATURE_GATES_ENV = "FEATURE_GATES"  # "Gate=true,Other=false," (chart kubeletplugin.yaml)
GATE_TIME_SLICING = "TimeSlicingSettings"
GATE_MPS = "MPSSupport"
# The GPU Operator's DRA deploy label: a node whose kubelet plugin the GPUCluster (or, in the
# sim, the chart's kubeletPlugin.nodeSelector) asks for.
DEPLOY_DRA_DRIVER = "nvidia.com/gpu.deploy.dra-driver"

# Calendar releases and the semantic release each became (pkg/featuregates comments).
_CALENDAR = {(25, 3): (0, 1), (25, 8): (0, 2), (25, 12): (0, 3), (26, 4): (0, 4)}
_RELEASE = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def release_of(image: str | None) -> tuple[int, int, int] | None:
    """The driver release an image tag names, on the semantic scale (``v25.8.1`` -> 0.2.1)."""
    if not image or ":" not in image.rsplit("/", 1)[-1]:
        return None
    match = _RELEASE.fullmatch(image.rsplit(":", 1)[-1].split("@")[0].split("-")[0])
    if not match:
        return None
    major, minor, patch = int(match[1]), int(match[2]), int(match[3] or 0)
    if major >= 25:  # a calendar release: the last one at or before it
        earlier = [v for k, v in sorted(_CALENDAR.items()) if k <= (major, minor)]
        return (*earlier[-1], patch) if earlier else (0, 0, patch)
    return major, minor, patch


def parse_feature_gates(value: str | None) -> dict[str, bool]:
    """``FEATURE_GATES`` (``A=true,B=false,``) as a dict; unset gates keep their defaults."""
    gates: dict[str, bool] = {}
    for item in (value or "").split(","):
        name, _, setting = item.strip().partition("=")
        if name:
            gates[name] = setting.strip().lower() in ("true", "1", "")
    return gates


# --- attributes -------------------------------------------------------------------------------
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
_COMMON = frozenset({"type", "uuid", "productName", "brand", "architecture",
                     "cudaComputeCapability", "driverVersion", "cudaDriverVersion"})


@dataclass(frozen=True)
class AttributeSet:
    """The attributes one range of driver releases publishes per device."""

    since: tuple[int, int, int]  # first release (semantic scale) that publishes this set
    label: str
    gpu: frozenset[str]  # every full GPU carries these
    mig: frozenset[str]  # every MIG device carries these
    optional: frozenset[str]  # present where resolvable (PCIe root, addressing mode, MIG uuid)
    exact: bool  # upstream's tests assert exactly gpu|mig (+ optional): extras are a defect

    def required(self, device_type: str) -> frozenset[str]:
        return self.mig if device_type == TYPE_MIG else self.gpu

    def allowed(self, device_type: str) -> frozenset[str]:
        return self.required(device_type) | self.optional


ATTRIBUTE_SETS: tuple[AttributeSet, ...] = (
    AttributeSet((0, 1, 0), "v25.3 (0.1)", _COMMON | {"index", "minor", "pcieBusID"},
                 _COMMON | {"parentUUID", "profile"},
                 frozenset({"index", "minor", "pcieBusID", "parentIndex", PCIE_ROOT}), False),
    AttributeSet((0, 2, 0), "v25.8 (0.2)", _COMMON | {"pcieBusID"},
                 _COMMON | {"parentUUID", "profile"}, frozenset({"pcieBusID", PCIE_ROOT}), False),
    # v25.12 and later: the bats reference lists of v0.4.1 (uuid only on static MIG devices).
    AttributeSet((0, 3, 0), "v25.12 (0.3) and later", _COMMON | {PCI_BUS_ID},
                 (_COMMON - {"uuid"}) | {PCI_BUS_ID, "parentUUID", "profile"},
                 frozenset({PCIE_ROOT, "addressingMode", "uuid"}), True),
)
# Attributes a release stopped publishing: still seeing one means stale slices or an old plugin.
DROPPED = {"index": "v25.8", "minor": "v25.8", "pcieBusID": "v25.12 (now resource.kubernetes.io/"
           "pciBusID)", "parentIndex": "v25.8"}


def attribute_set(release: tuple[int, int, int] | None) -> AttributeSet | None:
    """The attributes a release publishes; None when the release is not known."""
    if release is None:
        return None
    chosen = None
    for candidate in ATTRIBUTE_SETS:
        if release >= candidate.since:
            chosen = candidate
    return chosen


def release_text(release: tuple[int, int, int] | None) -> str:
    return "unknown" if release is None else "v" + ".".join(map(str, release))


# --- versions ---------------------------------------------------------------------------------
_STRICT_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")


def is_semver(text: str) -> bool:
    """Strict SemVer 2.0.0, as the API server validates a ``version`` attribute."""
    return bool(_STRICT_SEMVER.match(text))


def semver(version: str) -> str:
    """A dotted version as the driver publishes it: three parts, leading zeros dropped
    (``580.95.05`` -> ``580.95.5``, ``9.0`` -> ``9.0.0``). ValueError for anything else."""
    parts = version.strip().split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a dotted version: {version!r}")
    numbers = [int(p) for p in parts] + [0] * (3 - len(parts))
    return ".".join(map(str, numbers))


def same_version(published: str, reference: str) -> bool:
    """Whether a published version attribute names ``reference`` (compared at shared
    precision: ``13.0.0`` names CUDA ``13.0``)."""
    try:
        return semver(published) == semver(reference)
    except ValueError:
        return False


def product_label(product_name: str) -> str:
    """The ``nvidia.com/gpu.product`` GFD writes for the NVML name the driver publishes."""
    return sanitise(product_name)


# --- GpuConfig sharing ------------------------------------------------------------------------
CONFIG_API = "resource.nvidia.com/v1beta1"
GPU_CONFIG, MIG_CONFIG = "GpuConfig", "MigDeviceConfig"
STRATEGIES = ("TimeSlicing", "MPS")
STRATEGY_GATE = {"TimeSlicing": GATE_TIME_SLICING, "MPS": GATE_MPS}
INTERVALS = ("Default", "Short", "Medium", "Long")
_SHARING_FIELDS = {GPU_CONFIG: {"strategy", "timeSlicingConfig", "mpsConfig"},
                   MIG_CONFIG: {"strategy", "mpsConfig"}}
_MPS_FIELDS = {"defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit",
               "defaultPerDevicePinnedMemoryLimit"}


@dataclass(frozen=True)
class SharingVerdict:
    """What the driver would say about one opaque config: ``invalid`` (the config is wrong) and
    ``refused`` (valid, but the driver runs without the gate the strategy needs)."""

    strategy: str | None
    invalid: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()


def gate_refusal(strategy: str) -> str:
    """The driver's own error (validate.go ``gpuSharingFeatureGateError``)."""
    return (f'"{strategy}" is selected as the GPU sharing strategy, but the '
            f'"{STRATEGY_GATE[strategy]}" feature gate is not enabled')


def _quantity_bytes(value: Any) -> int | None:
    from kubernetes.utils import parse_quantity

    try:
        return int(parse_quantity(str(value)))
    except (ValueError, TypeError):
        return None


def validate_sharing(params: Mapping[str, Any], gates: Mapping[str, bool]) -> SharingVerdict:
    """Validate a GpuConfig / MigDeviceConfig as the driver's strict decoder and Validate() do.

    Configs of other kinds (VFIO, compute domains) have no sharing: an empty verdict.
    """
    kind = params.get("kind")
    if params.get("apiVersion") != CONFIG_API or kind not in _SHARING_FIELDS:
        return SharingVerdict(None)
    invalid: list[str] = []
    unknown = set(params) - {"apiVersion", "kind", "sharing"}
    if unknown:
        invalid.append(f"{kind}: unknown field(s) {', '.join(sorted(unknown))}")
    sharing = params.get("sharing")
    if sharing is None:
        return SharingVerdict(None, tuple(invalid))
    if not isinstance(sharing, Mapping):
        return SharingVerdict(None, (*invalid, f"{kind}.sharing must be an object"))
    unknown = set(sharing) - _SHARING_FIELDS[kind]
    if unknown:
        invalid.append(f"{kind}.sharing: unknown field(s) {', '.join(sorted(unknown))}")
    strategy = sharing.get("strategy")
    if strategy not in STRATEGIES:
        invalid.append(f"unknown GPU sharing strategy: {strategy}, supported GPU sharing "
                       f"strategies: {', '.join(STRATEGIES)}")
        return SharingVerdict(str(strategy) if strategy else None, tuple(invalid))
    ts, mps = sharing.get("timeSlicingConfig"), sharing.get("mpsConfig")
    if strategy == "TimeSlicing" and mps is not None:
        invalid.append("cannot use MpsConfig with the 'TimeSlicing' strategy")
    if strategy == "MPS" and ts is not None:
        invalid.append("cannot use TimeSlicingConfig with the 'MPS' strategy")
    if isinstance(ts, Mapping):
        extra = set(ts) - {"interval"}
        if extra:
            invalid.append(f"timeSlicingConfig: unknown field(s) {', '.join(sorted(extra))}")
        interval = ts.get("interval")
        if interval is not None and interval not in INTERVALS:
            invalid.append(f"unknown time-slice interval: {interval}, supported time-slice "
                           f"intervals: {', '.join(INTERVALS)}")
    if isinstance(mps, Mapping):
        invalid += _mps_problems(mps)
    refused = () if gates.get(STRATEGY_GATE[strategy]) else (gate_refusal(strategy),)
    return SharingVerdict(strategy, tuple(invalid), refused)


def _mps_problems(mps: Mapping[str, Any]) -> list[str]:
    out = []
    extra = set(mps) - _MPS_FIELDS
    if extra:
        out.append(f"mpsConfig: unknown field(s) {', '.join(sorted(extra))}")
    pct = mps.get("defaultActiveThreadPercentage")
    if pct is not None:
        if not isinstance(pct, int) or isinstance(pct, bool):
            out.append(f"defaultActiveThreadPercentage must be an integer, got {pct!r}")
        elif pct < 0:
            out.append("active thread percentage must not be negative")
        elif pct > 100:
            out.append("active thread percentage must not be greater than 100")
    limits = dict(mps.get("defaultPerDevicePinnedMemoryLimit") or {})
    if mps.get("defaultPinnedDeviceMemoryLimit") is not None:
        limits["(default)"] = mps["defaultPinnedDeviceMemoryLimit"]
    for device, value in limits.items():
        size = _quantity_bytes(value)
        if size is None:
            out.append(f"pinned memory limit of {device}: {value!r} is not a quantity")
        elif size // 2**20 <= 0:  # limit.Megabyte(): below 1 MiB is "set too low"
            out.append(f"invalid limit: value set too low: {device}: {value}")
    return out


def sharing_configs(claim_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``gpu.nvidia.com`` opaque parameters of a ResourceClaim spec
    (``spec.devices.config[].opaque``)."""
    devices = claim_spec.get("devices") or {}
    out = []
    for config in devices.get("config") or []:
        opaque = (config or {}).get("opaque") or {}
        if opaque.get("driver") == DRIVER and isinstance(opaque.get("parameters"), Mapping):
            out.append(dict(opaque["parameters"]))
    return out


def gpu_config(strategy: str, **settings: Any) -> dict[str, Any]:
    """A GpuConfig asking for ``strategy`` sharing (``interval=`` for TimeSlicing, MPS fields
    for MPS), as a claim's opaque parameters."""
    sharing: dict[str, Any] = {"strategy": strategy}
    if strategy == "TimeSlicing" and settings:
        sharing["timeSlicingConfig"] = dict(settings)
    elif strategy == "MPS" and settings:
        sharing["mpsConfig"] = dict(settings)
    return {"apiVersion": CONFIG_API, "kind": GPU_CONFIG, "sharing": sharing}


# --- the GPU Operator's GPUCluster (v26.7.0, tech preview) ------------------------------------
GPUCLUSTER_API = ("nvidia.com", "v1alpha1", "gpuclusters")
GPUCLUSTER_NAME = "gpu-cluster"  # a singleton (CRD x-kubernetes-validations)
GPUCLUSTER_READY = "ready"


@dataclass(frozen=True)
class GpuClusterOperand:
    """An operand the GPUCluster deploys (``manifests/state-dra-*``, golden test data)."""

    key: str
    kind: str  # DaemonSet | Deployment
    name: str
    app: str  # the pods' app label (the DRA validator's pods say nvidia-operator-validator)
    deploy_label: str | None  # nvidia.com/gpu.deploy.* of the nodes it runs on (DaemonSets)
    switch: str | None  # the spec field that enables it; None: always deployed
    default: bool = True  # when the switch is unset

    def enabled(self, spec: Mapping[str, Any]) -> bool:
        if self.switch is None:
            return True
        node: Any = spec
        for part in self.switch.split("."):
            node = (node or {}).get(part) if isinstance(node, Mapping) else None
        return self.default if node is None else bool(node)


GPUCLUSTER_OPERANDS: tuple[GpuClusterOperand, ...] = (
    GpuClusterOperand("dra-kubelet-plugin", "DaemonSet", "nvidia-dra-driver-kubelet-plugin",
                      "nvidia-dra-driver-kubelet-plugin", DEPLOY_DRA_DRIVER, None),
    GpuClusterOperand("dra-controller", "Deployment", "nvidia-dra-driver-controller",
                      "nvidia-dra-driver-controller", None,
                      "draDriver.computeDomains.enabled", default=False),
    GpuClusterOperand("dcgm", "DaemonSet", "nvidia-dcgm-dra", "nvidia-dcgm-dra",
                      "nvidia.com/gpu.deploy.dcgm-dra", "dcgm.enabled", default=False),
    GpuClusterOperand("dcgm-exporter", "DaemonSet", "nvidia-dcgm-exporter-dra",
                      "nvidia-dcgm-exporter-dra", "nvidia.com/gpu.deploy.dcgm-exporter-dra",
                      "dcgmExporter.enabled"),
    GpuClusterOperand("dra-validator", "DaemonSet", "nvidia-dra-validator",
                      "nvidia-operator-validator", "nvidia.com/gpu.deploy.dra-validator", None),
)
