"""The GPU Operator's ClusterPolicy (``nvidia.com/v1``), read as the operator reads it.

Unset fields take the chart's defaults (``operands.default_cluster_policy_spec``), as the
operator does after Helm rendered them: a ClusterPolicy with no ``driver`` section still
deploys the driver. Checks ask this view instead of digging in nested dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conformance.nvidia import operands

GROUP, VERSION, PLURAL = "nvidia.com", "v1", "clusterpolicies"
API = (GROUP, VERSION, PLURAL)  # for CustomObjectsApi calls
READY = "ready"


@dataclass(frozen=True)
class DevicePluginConfig:
    """``spec.devicePlugin.config``: the ConfigMap of sharing configs and its default key."""

    name: str
    default: str | None


@dataclass(frozen=True)
class ClusterPolicy:
    """One ClusterPolicy object (the dict the API returns), with typed accessors."""

    doc: Mapping[str, Any]

    @property
    def name(self) -> str:
        return str(self.doc["metadata"]["name"])

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.doc.get("spec") or {}

    def section(self, name: str) -> Mapping[str, Any]:
        return self.spec.get(name) or {}

    def enables(self, op: operands.Operand) -> bool:
        """Whether the policy deploys ``op`` (the MIG manager only while MIG is on)."""
        if op.mig_only and self.mig_strategy == "none":
            return False
        return op.enabled(self.spec)

    @property
    def driver_managed(self) -> bool:
        """True when the operator runs the driver (``driver.enabled``); False: host driver."""
        return operands.get_operand("driver").enabled(self.spec)

    @property
    def driver_version(self) -> str | None:
        """``spec.driver.version`` when the operator manages the driver, else None."""
        if not self.driver_managed:
            return None
        return self.section("driver").get("version")

    @property
    def mig_strategy(self) -> str:
        default = operands.default_cluster_policy_spec()["mig"]["strategy"]
        return str(self.section("mig").get("strategy") or default)

    @property
    def device_plugin_config(self) -> DevicePluginConfig | None:
        ref = self.section("devicePlugin").get("config") or {}
        if not ref.get("name"):
            return None
        return DevicePluginConfig(str(ref["name"]), ref.get("default") or None)

    @property
    def namespace(self) -> str | None:
        """The operator's namespace as the operator reports it in ``status.namespace``."""
        return (self.doc.get("status") or {}).get("namespace")

    @property
    def state(self) -> str | None:
        return (self.doc.get("status") or {}).get("state")

    def ready_condition(self) -> str | None:
        """The state and the Ready condition's reason and message ("ready, NoGPUNodes: No GPU
        node found, ..."): how the operator says it found no GPU node to serve."""
        for c in (self.doc.get("status") or {}).get("conditions", []):
            if c.get("type") == "Ready":
                return f"{self.state}, {c.get('reason')}: {c.get('message', '')}"
        return None

    def not_ready_conditions(self) -> list[str]:
        return [f"{c.get('type')}={c.get('status')}: {c.get('message', '')}"
                for c in (self.doc.get("status") or {}).get("conditions", [])
                if c.get("status") != "True"]
