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
import re
from collections.abc import Mapping
from typing import Any

import yaml

from conformance.sim.gpu_models import GPU_MODELS
from conformance.sim.profiles import GPU_RESOURCE, SHARED_SUFFIX, NodeGroup, SharingConfig

DEFAULT_GENERATION = 1767225600  # 2026-01-01T00:00:00Z: a fixed gfd.timestamp for tests

# Operands the operator switches on per GPU node (container workload), state_manager.go.
DEPLOY_OPERANDS = ("driver", "gpu-feature-discovery", "container-toolkit", "device-plugin",
                   "dcgm", "dcgm-exporter", "node-status-exporter", "operator-validator")
NFD_PCI_LABEL = "feature.node.kubernetes.io/pci-10de.present"


# --- labels -------------------------------------------------------------------------------------


def node_labels(group: NodeGroup, index: int, *, generation: int = DEFAULT_GENERATION,
                driver_version: str | None = None, product_override: str | None = None,
                replicas_override: int | None = None, include_gfd: bool = True) -> dict[str, str]:
    """The full label set NFD, the operator and GFD put on node ``index`` of ``group``.

    ``generation`` is ``nvidia.com/gfd.timestamp`` (10 digits). The other keywords exist to play
    faults: ``driver_version`` replaces the group's driver in every driver label,
    ``product_override`` / ``replicas_override`` replace ``nvidia.com/gpu.product`` /
    ``nvidia.com/gpu.replicas``, and ``include_gfd=False`` leaves out everything GFD writes.
    A CPU-only node gets no labels from any of them: ``{}``.
    """
    group.node_name(index)  # IndexError for an index outside the group
    if not group.is_gpu:
        return {}
    labels = dict(_operator_labels(group))
    if include_gfd:
        labels.update(_gfd_labels(group, generation, driver_version or group.driver_version))
        if product_override is not None:
            labels["nvidia.com/gpu.product"] = product_override
        if replicas_override is not None:
            labels["nvidia.com/gpu.replicas"] = str(replicas_override)
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
    labels = {NFD_PCI_LABEL: "true", "nvidia.com/gpu.present": "true",
              "nvidia.com/gpu.workload.config": "container",
              "nvidia.com/gpu-driver-upgrade-state": "upgrade-done"}
    labels.update({f"nvidia.com/gpu.deploy.{op}": "true" for op in DEPLOY_OPERANDS})
    if group.model.mig_capable:
        labels["nvidia.com/gpu.deploy.mig-manager"] = "true"
        labels["nvidia.com/mig.config"] = group.mig_config
        labels["nvidia.com/mig.config.state"] = "success"
    return tuple(labels.items())


@functools.lru_cache(maxsize=256)
def _gfd_labels(group: NodeGroup, generation: int,
                driver_version: str) -> tuple[tuple[str, str], ...]:
    if not 10**9 <= generation < 10**10:
        raise ValueError(f"gfd.timestamp must have 10 digits, got {generation}")
    model = group.model
    labels: dict[str, str] = {"nvidia.com/gfd.timestamp": str(generation),
                              "nvidia.com/gpu.machine": group.machine_type}
    labels.update(_version_labels(driver_version, group.cuda_version))
    labels["nvidia.com/mig.capable"] = str(model.mig_capable).lower()
    sharing = group.sharing
    # Full GPUs (nvidia.com/gpu.*). MIG-enabled GPUs are labelled without sharing (replicas 0).
    labels.update(_resource_labels(GPU_RESOURCE, group.gpus_per_node, (model.product,),
                                   None if group.mig_enabled else sharing,
                                   sharing_disabled=group.mig_enabled))
    labels.update({"nvidia.com/gpu.memory": str(model.memory_mib),
                   "nvidia.com/gpu.family": model.family,
                   "nvidia.com/gpu.compute.major": str(model.compute_major),
                   "nvidia.com/gpu.compute.minor": str(model.compute_minor)})
    if group.mig_strategy != "none":
        labels["nvidia.com/mig.strategy"] = group.mig_strategy
    for profile_name, count in group.mig_devices_per_node().items():
        profile = model.mig_profile(profile_name)
        resource = GPU_RESOURCE if group.mig_strategy == "single" else profile.resource_name
        labels.update(_resource_labels(resource, count, (model.product, "MIG", profile.name),
                                       sharing))
        labels.update({f"{resource}.{k}": str(v) for k, v in profile.attributes().items()})
    labels.update({"nvidia.com/gpu.mode": "compute",
                   "nvidia.com/mps.capable": str(sharing is not None
                                                 and sharing.strategy == "mps").lower(),
                   "nvidia.com/vgpu.present": "false"})
    return tuple(labels.items())


def _version_labels(driver_version: str, cuda_version: str) -> dict[str, str]:
    parts = driver_version.split(".")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f'driver version "{driver_version}" does not match format "X.Y[.Z]"')
    major, minor, rev = parts[0], parts[1], (parts[2] if len(parts) == 3 else "")
    cuda_major, cuda_minor = cuda_version.split(".")
    return {
        "nvidia.com/cuda.driver.major": major, "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
        "nvidia.com/cuda.driver-version.full": driver_version,
        "nvidia.com/cuda.runtime.major": cuda_major, "nvidia.com/cuda.runtime.minor": cuda_minor,
        "nvidia.com/cuda.runtime-version.major": cuda_major,
        "nvidia.com/cuda.runtime-version.minor": cuda_minor,
        "nvidia.com/cuda.runtime-version.full": f"{cuda_major}.{cuda_minor}",
    }


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


# --- the device plugin sharing config -----------------------------------------------------------


def sharing_config(group: NodeGroup) -> dict[str, Any] | None:
    """The device plugin config document for ``group``'s sharing, as its ConfigMap key holds it.

    ``None`` when the group does not share GPUs. See :meth:`SharingConfig.document`.
    """
    return group.sharing.document() if group.sharing else None


_TOP_KEYS = ("version", "flags", "resources", "sharing", "imex")
_STRATEGY_KEYS = ("renameByDefault", "failRequestsGreaterThanOne", "resources")
_RESOURCE_KEYS = ("name", "rename", "devices", "replicas")
_MIG_STRATEGIES = ("none", "single", "mixed")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-([0-9]+c\.)?[0-9]+g\.[0-9]+gb$")
_GPU_UUID = r"GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_DEVICE_REF = re.compile(rf"^([0-9]+|[0-9]+:[0-9]+|{_GPU_UUID}|MIG-{_GPU_UUID[4:]}"
                         rf"|MIG-{_GPU_UUID}/[0-9]+/[0-9]+)$")


def validate_sharing_config(doc: Mapping[str, Any] | str, *,
                            require_version: bool = True) -> list[str]:
    """Errors in a device plugin sharing config (a parsed document or its YAML text).

    An empty list means the device plugin would accept ``doc`` and share GPUs as it says. The rules,
    from the device plugin README ("Shared Access to GPUs", v0.20.0) and the config API it cites
    (``api/config/v1/{config,replicas,resources,consts}.go``, ``cmd/nvidia-device-plugin/main.go``):

    1. The document is a YAML/JSON mapping with the top-level fields ``version``, ``flags``,
       ``resources``, ``sharing``, ``imex``. Any other field is an error: upstream parses with
       non-strict ``sigs.k8s.io/yaml``, so a misspelt field is dropped silently and the sharing it
       meant never happens. (Fields under ``flags`` are not checked, except ``migStrategy``.)
    2. ``version`` is ``v1`` ("unknown version" otherwise). Upstream treats a missing version as
       ``v1``; every README example states it, and so does this check unless
       ``require_version=False``.
    3. ``sharing`` holds exactly one of ``timeSlicing`` and ``mps``: "Time-slicing and MPS are
       mutually exclusive" (with both set the plugin silently uses MPS only).
    4. That section has only ``renameByDefault`` and ``failRequestsGreaterThanOne`` (booleans)
       and ``resources``, a non-empty list ("no resources specified").
    5. Each resource has a ``name`` ("no resource name specified"): ``nvidia.com/`` is prepended
       when missing, the result is at most 63 characters and its name part a DNS-1123 subdomain.
       Time-slicing supports only ``nvidia.com/gpu`` and the resources of the mixed MIG strategy,
       ``nvidia.com/mig-<g>g.<mem>gb``; MPS only ``nvidia.com/gpu`` ("only with full GPUs";
       "Sharing with MPS is currently not supported on devices with MIG enabled").
    6. Each resource has ``replicas`` ("no replicas specified"), an integer >= 2 ("number of
       replicas must be >= 2").
    7. ``devices``, when given, is ``all``, a count > 0, or a list of GPU/MIG indices or UUIDs.
    8. MPS with ``flags.migStrategy: mixed`` is refused ("using --mig-strategy=mixed is not
       supported with MPS"); ``flags.migStrategy`` is one of none, single, mixed.

    What upstream accepts but ignores is a warning, not an error; see
    :func:`sharing_config_warnings`: ``rename`` and ``devices`` (sharing always applies to all GPUs
    under the default name), top-level ``resources``, ``failRequestsGreaterThanOne: false`` under
    MPS (forced to true), and a resource named twice (only the first counts).
    """
    return _check_sharing_config(doc, require_version)[0]


def sharing_config_warnings(doc: Mapping[str, Any] | str) -> list[str]:
    """Fields the device plugin accepts but ignores (it logs "... Ignoring..." for them)."""
    return _check_sharing_config(doc, require_version=False)[1]


def _check_sharing_config(doc: Mapping[str, Any] | str,
                          require_version: bool) -> tuple[list[str], list[str]]:
    errors: list[str] = []
    warnings: list[str] = []
    if isinstance(doc, str):
        try:
            doc = yaml.safe_load(doc)
        except yaml.YAMLError as e:
            return [f"not valid YAML: {e}"], []
    if not isinstance(doc, Mapping):
        return [f"the config must be a mapping, got {type(doc).__name__}"], []
    errors += _unknown(doc, _TOP_KEYS, "")
    if "version" not in doc:
        if require_version:
            errors.append("version: missing (must be v1)")
    elif doc["version"] != "v1":
        errors.append(f"version: unknown version {doc['version']!r} (must be v1)")
    if doc.get("resources"):
        warnings.append("resources: customizing the 'resources' field is not supported; ignored")
    mig_strategy = _flag_mig_strategy(doc.get("flags"), errors)
    sharing = doc.get("sharing")
    if not isinstance(sharing, Mapping):
        errors.append("sharing: missing (needs timeSlicing or mps)" if sharing is None
                      else "sharing: must be a mapping")
        return errors, warnings
    errors += _unknown(sharing, ("timeSlicing", "mps"), "sharing.")
    present = [k for k in ("timeSlicing", "mps") if k in sharing]
    if len(present) != 1:
        errors.append("sharing: exactly one of timeSlicing and mps must be set "
                      f"(they are mutually exclusive), got {present or 'neither'}")
    for key in present:
        _check_strategy(key, sharing[key], errors, warnings)
    if "mps" in sharing and mig_strategy == "mixed":
        errors.append("flags.migStrategy: mixed is not supported with MPS")
    return errors, warnings


def _unknown(mapping: Mapping[str, Any], known: tuple[str, ...], where: str) -> list[str]:
    return [f"{where}{k}: unknown field (known: {', '.join(known)})"
            for k in mapping if k not in known]


def _flag_mig_strategy(flags: Any, errors: list[str]) -> str | None:
    if flags is None:
        return None
    if not isinstance(flags, Mapping):
        errors.append("flags: must be a mapping")
        return None
    value = flags.get("migStrategy")
    if value is not None and value not in _MIG_STRATEGIES:
        errors.append(f"flags.migStrategy: {value!r} is not one of {', '.join(_MIG_STRATEGIES)}")
    return value


def _check_strategy(key: str, section: Any, errors: list[str], warnings: list[str]) -> None:
    where = f"sharing.{key}"
    if not isinstance(section, Mapping):
        errors.append(f"{where}: must be a mapping")
        return
    errors += _unknown(section, _STRATEGY_KEYS, where + ".")
    for flag in ("renameByDefault", "failRequestsGreaterThanOne"):
        if flag in section and not isinstance(section[flag], bool):
            errors.append(f"{where}.{flag}: must be true or false, got {section[flag]!r}")
    if key == "mps" and section.get("failRequestsGreaterThanOne") is False:
        warnings.append(f"{where}.failRequestsGreaterThanOne: MPS always fails requests > 1; "
                        "false is ignored")
    resources = section.get("resources")
    if not isinstance(resources, list) or not resources:
        errors.append(f"{where}.resources: no resources specified (needs a non-empty list)")
        return
    rename_by_default = section.get("renameByDefault") is True
    seen: set[str] = set()
    for i, resource in enumerate(resources):
        name = _check_resource(key, f"{where}.resources[{i}]", resource, rename_by_default,
                               errors, warnings)
        if name in seen:
            warnings.append(f"{where}.resources[{i}]: {name} is named twice; only the first "
                            "entry counts")
        if name:
            seen.add(name)


def _check_resource(key: str, where: str, resource: Any, rename_by_default: bool,
                    errors: list[str], warnings: list[str]) -> str | None:
    if not isinstance(resource, Mapping):
        errors.append(f"{where}: must be a mapping with name and replicas")
        return None
    errors += _unknown(resource, _RESOURCE_KEYS, where + ".")
    name = _resource_name(resource.get("name"), where, errors)
    if name is not None:
        if key == "mps" and name != GPU_RESOURCE:
            errors.append(f"{where}.name: MPS supports only {GPU_RESOURCE} on full GPUs "
                          f"(not MIG devices), got {name}")
        elif key == "timeSlicing" and name != GPU_RESOURCE and not _MIG_RESOURCE.match(name):
            errors.append(f"{where}.name: {name} cannot be time-sliced (only {GPU_RESOURCE} "
                          "and the mixed-strategy MIG resources nvidia.com/mig-<g>g.<mem>gb)")
    replicas = resource.get("replicas")
    if "replicas" not in resource:
        errors.append(f"{where}.replicas: no replicas specified")
    elif isinstance(replicas, bool) or not isinstance(replicas, int):
        errors.append(f"{where}.replicas: must be an integer, got {replicas!r}")
    elif replicas < 2:
        errors.append(f"{where}.replicas: number of replicas must be >= 2, got {replicas}")
    if "rename" in resource:
        rename = resource["rename"]
        default = f"{name}{SHARED_SUFFIX}" if rename_by_default else None
        if not isinstance(rename, str):
            errors.append(f"{where}.rename: must be a resource name, got {rename!r}")
        elif rename != default:
            warnings.append(f"{where}.rename: setting 'rename' is not supported; ignored "
                            f"(advertised as {default or name})")
    if "devices" in resource:
        _check_devices(where, resource["devices"], errors, warnings)
    return name


def _resource_name(raw: Any, where: str, errors: list[str]) -> str | None:
    if raw is None:
        errors.append(f"{where}.name: no resource name specified")
        return None
    if not isinstance(raw, str) or not raw:
        errors.append(f"{where}.name: must be a non-empty string, got {raw!r}")
        return None
    name = raw if raw.startswith("nvidia.com/") else f"nvidia.com/{raw}"
    if len(name) > 63:
        errors.append(f"{where}.name: {name} is longer than 63 characters")
        return None
    if not _DNS_SUBDOMAIN.match(name.split("/", 1)[1]):
        errors.append(f"{where}.name: incorrect format for resource name {name!r} "
                      "(not a DNS-1123 subdomain)")
        return None
    return name


def _check_devices(where: str, devices: Any, errors: list[str], warnings: list[str]) -> None:
    if devices == "all":
        return
    if isinstance(devices, bool):
        ok = False
    elif isinstance(devices, int):
        ok = devices > 0
    elif isinstance(devices, list):
        ok = all((isinstance(d, int) and not isinstance(d, bool) and d >= 0)
                 or (isinstance(d, str) and _DEVICE_REF.match(d)) for d in devices)
    else:
        ok = False
    if not ok:
        errors.append(f"{where}.devices: must be 'all', a count > 0 or a list of GPU/MIG indices "
                      f"or UUIDs, got {devices!r}")
    else:
        warnings.append(f"{where}.devices: customizing 'devices' is not supported; ignored "
                        "(sharing applies to all GPUs)")

