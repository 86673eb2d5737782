"""The device plugin's sharing config: its model, what it makes the plugin advertise, and the
rules the plugin applies when it loads one.

Facts: k8s-device-plugin v0.20.0 README "Shared Access to GPUs" and ``api/config/v1``
(``config.go``, ``replicas.go``, ``resources.go``, ``consts.go``). A config document is what one
key of the plugin's config ConfigMap holds::

    version: v1
    sharing:
      timeSlicing:            # or mps (mutually exclusive)
        renameByDefault: false
        failRequestsGreaterThanOne: false
        resources:
        - name: nvidia.com/gpu
          replicas: 4

Each device then counts ``replicas`` times (8 GPUs x 10 replicas advertise ``nvidia.com/gpu:
80``), under ``<name>.shared`` when ``renameByDefault`` is set; MPS always fails requests > 1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from conformance.nvidia import labels as L
from conformance.nvidia.labels import GPU_RESOURCE

RENAME_SUFFIX = ".shared"  # DefaultSharedResourceNameSuffix, api/config/v1/consts.go
SHARING_STRATEGIES = ("time-slicing", "mps")
CONFIG_KEYS = {"time-slicing": "timeSlicing", "mps": "mps"}  # strategy -> key under sharing:
# What the plugin's MPS control daemon does to the host's GPUs: at start it runs
# ``nvidia-smi -i <uuid> -c EXCLUSIVE_PROCESS`` on every GPU it serves, at stop ``-c DEFAULT``
# (cmd/mps-control-daemon/mps/daemon.go, Start and Stop, v0.20.0). A node-wide change to the
# GPUs' compute mode, made by whatever installs an MPS sharing config on a real GPU.
MPS_DAEMON_COMPUTE_MODE = "EXCLUSIVE_PROCESS"


def advertised_count(devices: int, replicas: int | None) -> int:
    """How many units of a resource the plugin advertises: each device ``replicas`` times.

    The one place the rule "allocatable = GPUs x replicas" is written (replicas 0 or missing
    count as 1: GFD labels MIG-enabled full GPUs with replicas 0).
    """
    return devices * max(replicas or 1, 1)


@dataclass(frozen=True)
class SharedResource:
    name: str  # e.g. nvidia.com/gpu or nvidia.com/mig-1g.5gb
    replicas: int


@dataclass(frozen=True)
class SharingConfig:
    """One device-plugin sharing configuration (``sharing.timeSlicing`` or ``sharing.mps``)."""

    strategy: str  # "time-slicing" | "mps"
    resources: tuple[SharedResource, ...]
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = False

    def __post_init__(self) -> None:
        if self.strategy not in SHARING_STRATEGIES:
            raise ValueError(f"sharing strategy {self.strategy!r} is not one of "
                             f"{', '.join(SHARING_STRATEGIES)}")
        if not self.resources:
            raise ValueError("a sharing config needs at least one resource")
        names = [r.name for r in self.resources]
        if len(set(names)) != len(names):
            raise ValueError(f"sharing config names a resource twice: {names}")
        for r in self.resources:
            if isinstance(r.replicas, bool) or not isinstance(r.replicas, int) or r.replicas < 2:
                raise ValueError(f"replicas of {r.name} must be an integer >= 2, "
                                 f"got {r.replicas!r}")
            if self.strategy == "mps" and r.name != GPU_RESOURCE:
                raise ValueError(f"MPS shares only {GPU_RESOURCE} on full GPUs, not {r.name}")

    @classmethod
    def time_slicing(cls, replicas: int, *, rename_by_default: bool = False,
                     fail_requests_greater_than_one: bool = False,
                     resources: Iterable[str] = (GPU_RESOURCE,)) -> SharingConfig:
        return cls("time-slicing", tuple(SharedResource(n, replicas) for n in resources),
                   rename_by_default, fail_requests_greater_than_one)

    @classmethod
    def mps(cls, replicas: int, *, rename_by_default: bool = False) -> SharingConfig:
        return cls("mps", (SharedResource(GPU_RESOURCE, replicas),), rename_by_default, True)

    @property
    def config_key(self) -> str:
        """The key under ``sharing:`` in the device plugin config (``timeSlicing`` | ``mps``)."""
        return "timeSlicing" if self.strategy == "time-slicing" else "mps"

    @property
    def fails_requests_greater_than_one(self) -> bool:
        """What the plugin enforces: MPS always fails requests > 1 (config.go NewConfig)."""
        return self.strategy == "mps" or self.fail_requests_greater_than_one

    def replicas_for(self, resource: str) -> int:
        """Replicas of ``resource`` (1 when the config does not share it)."""
        for r in self.resources:
            if r.name == resource:
                return r.replicas
        return 1

    def advertised_name(self, resource: str) -> str:
        """The name the plugin advertises ``resource`` under (``<name>.shared`` when renamed)."""
        if self.rename_by_default and self.replicas_for(resource) > 1:
            return resource + RENAME_SUFFIX
        return resource

    def document(self) -> dict[str, Any]:
        """The device plugin config document, as a key of its ConfigMap holds it.

        MPS has no ``failRequestsGreaterThanOne`` to set (the plugin forces it to true), so the
        document leaves it out, as the README's MPS examples do.
        """
        section: dict[str, Any] = {"renameByDefault": self.rename_by_default}
        if self.strategy == "time-slicing":
            section["failRequestsGreaterThanOne"] = self.fail_requests_greater_than_one
        section["resources"] = [{"name": r.name, "replicas": r.replicas} for r in self.resources]
        return {"version": "v1", "sharing": {self.config_key: section}}

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> SharingConfig | None:
        """The config a valid document describes, or None when it shares nothing.

        Call :func:`validate_sharing_config` first: this reads a document the plugin accepts.
        """
        sharing = doc.get("sharing") or {}
        for strategy, key in CONFIG_KEYS.items():
            section = sharing.get(key)
            if not section:
                continue
            resources = tuple(SharedResource(_full_name(r["name"]), int(r["replicas"]))
                              for r in section.get("resources") or [])
            return cls(strategy, resources, bool(section.get("renameByDefault")),
                       bool(section.get("failRequestsGreaterThanOne")))
        return None

    @property
    def strategy_label(self) -> str:
        """The value GFD writes to ``nvidia.com/gpu.sharing-strategy``."""
        return self.strategy

    def advertised(self, base_resources: Mapping[str, int]) -> dict[str, int]:
        """What the plugin advertises for devices ``base_resources`` (name -> devices)."""
        return {self.advertised_name(name): advertised_count(n, self.replicas_for(name))
                for name, n in base_resources.items()}


def _full_name(name: str) -> str:
    return name if name.startswith("nvidia.com/") else f"nvidia.com/{name}"


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
        default = f"{name}{RENAME_SUFFIX}" if rename_by_default else None
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


def gfd_sharing_labels(config: SharingConfig) -> dict[str, str]:
    """The labels GFD sets for whole GPUs under ``config`` (k8s-device-plugin internal/lm/
    resource.go): replicas, strategy, mps.capable, and the product's -SHARED suffix unless the
    resource is renamed. ``<product>`` stands for the GPU's own product name."""
    replicas = config.replicas_for(GPU_RESOURCE)
    shared = replicas > 1
    return {
        L.REPLICAS: str(replicas),
        L.SHARING_STRATEGY: config.strategy if shared else "none",
        L.PRODUCT: "<product>" + (L.SHARED_SUFFIX if shared and not
                                  config.rename_by_default else ""),
        L.MPS_CAPABLE: str(config.strategy == "mps").lower(),
    }


def capacity_lines(config: SharingConfig, gpus: int) -> list[str]:
    """What the plugin advertises, per shared resource: "nvidia.com/gpu: 10 per GPU; 8 GPUs
    -> 80"."""
    return [f"{config.advertised_name(r.name)}: {r.replicas} per "
            f"{'GPU' if r.name == GPU_RESOURCE else 'MIG device'}; {gpus} "
            f"{'GPUs' if r.name == GPU_RESOURCE else 'devices'} -> "
            f"{advertised_count(gpus, r.replicas)}"
            + (" (one request > 1 is refused)" if config.fails_requests_greater_than_one
               else "") for r in config.resources]
