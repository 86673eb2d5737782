"""The GPU Operator's operands as data: DaemonSets, labels, node selectors, ClusterPolicy switches.

Facts from gpu-operator v26.7.0 (``../shared/upstream/gpu-operator-v26.7.0/``); each operand names
the asset its DaemonSet comes from (``asset``, relative to that directory). Defaults come from the
chart: ``chart/values.yaml`` (``<component>.enabled``, images, ``daemonsets.*``) as
``chart/templates/clusterpolicy.yaml`` renders them into the ClusterPolicy spec. The operator
gives every operand the toleration of ``daemonsets.tolerations`` (``nvidia.com/gpu`` Exists
NoSchedule; every asset carries it too), priority class ``system-node-critical`` and update
strategy ``daemonsets.updateStrategy`` (RollingUpdate), except the driver, which is always
OnDelete (``assets/state-driver/0500_daemonset.yaml``; values.yaml comment on updateStrategy).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conformance.nvidia.labels import DEPLOY_PREFIX

OPERATOR_VERSION = "v26.7.0"  # default tag of the operator's own images (validator, exporter)
OPERATOR_IMAGE = "nvcr.io/nvidia/gpu-operator"  # the operator's and the validator's image
PRIORITY_CLASS = "system-node-critical"

# chart/values.yaml daemonsets.tolerations
DEFAULT_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)


@dataclass(frozen=True)
class Service:
    name: str
    port: int
    port_name: str
    annotations: tuple[tuple[str, str], ...] = ()
    internal_traffic_policy: str | None = None
    asset: str = ""


@dataclass(frozen=True)
class Operand:
    key: str  # catalogue key, e.g. "device-plugin"
    name: str  # the DaemonSet name (= its app label, except where noted)
    app: str
    labels: tuple[tuple[str, str], ...]  # labels besides app, on the DaemonSet and its pods
    node_selector_pairs: tuple[tuple[str, str], ...]  # the asset's pod nodeSelector
    deploy_key: str  # nvidia.com/gpu.deploy.<deploy_key> selects the nodes it runs on
    spec_section: str | None  # ClusterPolicy spec section whose .enabled switches it
    default_enabled: bool  # chart default of <spec_section>.enabled
    per_node_switch: bool  # the operator writes its own deploy label on each GPU node
    container: str  # main container
    init_containers: tuple[str, ...]
    image_section: str  # spec section whose repository/image/version give the image
    asset: str
    update_strategy: str = "RollingUpdate"
    mig_strategy_env: bool = False  # gets MIG_STRATEGY from spec.mig.strategy
    service: Service | None = None
    # The operator labels only MIG-capable nodes nvidia.com/gpu.deploy.mig-manager=true, and
    # deploys the MIG manager only while MIG is on (spec.mig.strategy is not none).
    mig_only: bool = False
    service_account: str = ""  # the asset's 0100_service_account.yaml, created by the operator

    @property
    def extra_labels(self) -> dict[str, str]:
        return dict(self.labels)

    @property
    def node_selector(self) -> dict[str, str]:
        """The full pod nodeSelector (the MPS control daemon also needs mps.capable=true)."""
        return dict(self.node_selector_pairs)

    @property
    def node_selector_key(self) -> str:
        """The ``nvidia.com/gpu.deploy.*`` label of the nodes it runs on."""
        return DEPLOY_PREFIX + self.deploy_key

    @property
    def spec_path(self) -> str | None:
        """The ClusterPolicy field that enables it, e.g. ``dcgmExporter.enabled``."""
        return f"{self.spec_section}.enabled" if self.spec_section else None

    def enabled(self, spec: Mapping[str, Any] | None) -> bool:
        """Whether a ClusterPolicy ``spec`` deploys it (unset fields take the chart default)."""
        if self.spec_section is None:
            return True  # the validator has no switch: the operator always deploys it
        section = (spec or {}).get(self.spec_section) or {}
        value = section.get("enabled")
        return self.default_enabled if value is None else bool(value)

    def image(self, spec: Mapping[str, Any] | None = None) -> str:
        """``<repository>/<image>:<version>`` from ``spec`` (chart defaults for unset fields)."""
        defaults = _DEFAULT_SPEC[self.image_section]
        section = {**defaults, **((spec or {}).get(self.image_section) or {})}
        version = section.get("version") or OPERATOR_VERSION
        return f"{section['repository']}/{section['image']}:{version}"

    def selects(self, node_labels: Mapping[str, str]) -> bool:
        """Whether the DaemonSet's nodeSelector matches a node with ``node_labels``."""
        return all(node_labels.get(k) == v for k, v in self.node_selector_pairs)


def _sel(*keys: str) -> tuple[tuple[str, str], ...]:
    return tuple((k if "/" in k else DEPLOY_PREFIX + k, "true") for k in keys)


_TV = ("toolkit-validation",)
OPERANDS: tuple[Operand, ...] = (
    Operand("driver", "nvidia-driver-daemonset", "nvidia-driver-daemonset",
            (("nvidia.com/precompiled", "false"), ("app.kubernetes.io/component", "nvidia-driver")),
            _sel("driver"), "driver", "driver", True, True, "nvidia-driver-ctr",
            ("k8s-driver-manager",), "driver", "state-driver/0500_daemonset.yaml",
            service_account="nvidia-driver",
            update_strategy="OnDelete"),
    Operand("container-toolkit", "nvidia-container-toolkit-daemonset",
            "nvidia-container-toolkit-daemonset", (), _sel("container-toolkit"),
            "container-toolkit", "toolkit", True, True, "nvidia-container-toolkit-ctr",
            ("driver-validation",), "toolkit", "state-container-toolkit/0500_daemonset.yaml",
            service_account="nvidia-container-toolkit"),
    Operand("device-plugin", "nvidia-device-plugin-daemonset", "nvidia-device-plugin-daemonset",
            (), _sel("device-plugin"), "device-plugin", "devicePlugin", True, True,
            "nvidia-device-plugin", ("toolkit-validation", "config-manager-init"), "devicePlugin",
            "state-device-plugin/0500_daemonset.yaml",
            service_account="nvidia-device-plugin", mig_strategy_env=True),
    Operand("mps-control-daemon", "nvidia-device-plugin-mps-control-daemon",
            "nvidia-device-plugin-mps-control-daemon", (),
            _sel("device-plugin", "nvidia.com/mps.capable"), "device-plugin", "devicePlugin",
            True, False, "mps-control-daemon-ctr",
            ("toolkit-validation", "mps-control-daemon-mounts", "config-manager-init"),
            "devicePlugin", "state-mps-control-daemon/0400_daemonset.yaml",
            service_account="nvidia-device-plugin"),
    Operand("gpu-feature-discovery", "gpu-feature-discovery", "gpu-feature-discovery",
            (("app.kubernetes.io/part-of", "nvidia-gpu"),), _sel("gpu-feature-discovery"),
            "gpu-feature-discovery", "gfd", True, True, "gpu-feature-discovery",
            ("toolkit-validation", "config-manager-init"), "gfd",
            "gpu-feature-discovery/0500_daemonset.yaml",
            service_account="nvidia-gpu-feature-discovery", mig_strategy_env=True),
    Operand("dcgm-exporter", "nvidia-dcgm-exporter", "nvidia-dcgm-exporter", (),
            _sel("dcgm-exporter"), "dcgm-exporter", "dcgmExporter", True, True,
            "nvidia-dcgm-exporter", _TV, "dcgmExporter", "state-dcgm-exporter/0800_daemonset.yaml",
            service_account="nvidia-dcgm-exporter",
            service=Service("nvidia-dcgm-exporter", 9400, "gpu-metrics",
                            (("prometheus.io/scrape", "true"),),
                            asset="state-dcgm-exporter/0400_service.yaml")),
    Operand("dcgm", "nvidia-dcgm", "nvidia-dcgm", (), _sel("dcgm"), "dcgm", "dcgm", False, True,
            "nvidia-dcgm-ctr", _TV, "dcgm", "state-dcgm/0400_dcgm.yml",
            service_account="nvidia-dcgm",
            service=Service("nvidia-dcgm", 5555, "dcgm", internal_traffic_policy="Local",
                            asset="state-dcgm/0500_service.yaml")),
    Operand("mig-manager", "nvidia-mig-manager", "nvidia-mig-manager", (), _sel("mig-manager"),
            "mig-manager", "migManager", True, True, "nvidia-mig-manager", _TV, "migManager",
            "state-mig-manager/0600_daemonset.yaml",
            service_account="nvidia-mig-manager", mig_only=True),
    Operand("operator-validator", "nvidia-operator-validator", "nvidia-operator-validator",
            (("app.kubernetes.io/part-of", "gpu-operator"),), _sel("operator-validator"),
            "operator-validator", None, True, True, "nvidia-operator-validator",
            ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"),
            "validator", "state-operator-validation/0500_daemonset.yaml",
            service_account="nvidia-operator-validator"),
    Operand("node-status-exporter", "nvidia-node-status-exporter", "nvidia-node-status-exporter",
            (), _sel("node-status-exporter"), "node-status-exporter", "nodeStatusExporter",
            False, True, "nvidia-node-status-exporter", (), "nodeStatusExporter",
            "state-node-status-exporter/0700_daemonset.yaml",
            service_account="nvidia-node-status-exporter",
            service=Service("nvidia-node-status-exporter", 8000, "node-status",
                            (("prometheus.io/scrape", "true"),),
                            asset="state-node-status-exporter/0500_service.yaml")),
)

BY_KEY: dict[str, Operand] = {op.key: op for op in OPERANDS}
BY_NAME: dict[str, Operand] = {op.name: op for op in OPERANDS}


def get_operand(key_or_name: str) -> Operand:
    """An operand by catalogue key (``dcgm-exporter``) or DaemonSet (``nvidia-dcgm-exporter``)."""
    op = BY_KEY.get(key_or_name) or BY_NAME.get(key_or_name)
    if op is None:
        raise ValueError(f"unknown operand {key_or_name!r}; known: {', '.join(BY_KEY)}")
    return op


def enabled_operands(spec: Mapping[str, Any] | None) -> list[Operand]:
    """The operands a ClusterPolicy ``spec`` deploys, in catalogue order."""
    return [op for op in OPERANDS if op.enabled(spec)]


def operand_env(op: Operand, spec: Mapping[str, Any] | None) -> dict[str, str]:
    """Environment of the main container that the operator derives from ``spec``.

    ``MIG_STRATEGY`` (``spec.mig.strategy``) for the device plugin and GFD, which upstream's e2e
    checks after patching ``/spec/mig/strategy`` (anchors.md §1a), then ``spec.<section>.env``.
    """
    spec = spec or {}
    env: dict[str, str] = {}
    if op.mig_strategy_env:
        env["MIG_STRATEGY"] = str((spec.get("mig") or {}).get("strategy")
                                  or _DEFAULT_SPEC["mig"]["strategy"])
    section = spec.get(op.spec_section or op.image_section) or {}
    for item in section.get("env") or []:
        env[str(item["name"])] = str(item.get("value", ""))
    return env


def _image(repository: str, image: str, version: str | None) -> dict[str, Any]:
    return {"repository": repository, "image": image, "version": version}


# The ClusterPolicy spec the chart renders with its default values (chart/values.yaml).
_DEFAULT_SPEC: dict[str, Any] = {
    "operator": {},
    "daemonsets": {"priorityClassName": PRIORITY_CLASS,
                   "tolerations": [dict(t) for t in DEFAULT_TOLERATIONS],
                   "updateStrategy": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "1"}},
    "validator": _image(*OPERATOR_IMAGE.rsplit("/", 1), None),
    "mig": {"strategy": "single"},
    "psa": {"enabled": False},
    "cdi": {"enabled": True},
    "driver": {"enabled": True, **_image("nvcr.io/nvidia", "driver", "595.91.07"),
               "upgradePolicy": {"autoUpgrade": True}},
    "toolkit": {"enabled": True, **_image("nvcr.io/nvidia/k8s", "container-toolkit", "v1.20.0")},
    "devicePlugin": {"enabled": True, **_image("nvcr.io/nvidia", "k8s-device-plugin", "v0.20.0"),
                     "mps": {"root": "/run/nvidia/mps"}},
    "dcgm": {"enabled": False,
             **_image("nvcr.io/nvidia/cloud-native", "dcgm", "4.6.0-1-ubuntu24.04")},
    "dcgmExporter": {"enabled": True,
                     **_image("nvcr.io/nvidia/k8s", "dcgm-exporter", "4.6.0-4.8.3-distroless")},
    "gfd": {"enabled": True, **_image("nvcr.io/nvidia", "k8s-device-plugin", "v0.20.0")},
    "migManager": {"enabled": True,
                   **_image("nvcr.io/nvidia/cloud-native", "k8s-mig-manager", "v0.15.0"),
                   "config": {"default": "all-disabled"}},
    "nodeStatusExporter": {"enabled": False, **_image(*OPERATOR_IMAGE.rsplit("/", 1), None)},
    "sandboxWorkloads": {"enabled": False},
}


def default_cluster_policy_spec() -> dict[str, Any]:
    """A fresh copy of the ClusterPolicy spec the chart deploys by default.

    Image versions left ``None`` (validator, node status exporter) default to the chart's
    appVersion in upstream; :meth:`Operand.image` uses :data:`OPERATOR_VERSION`.
    """
    spec = copy.deepcopy(_DEFAULT_SPEC)
    for section in spec.values():
        if isinstance(section, dict) and section.get("version", "") is None:
            section["version"] = OPERATOR_VERSION
    return spec
