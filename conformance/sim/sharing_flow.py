"""What the device plugin and GFD apply on each node, from the objects a user controls.

NVIDIA's documented flow (gpu-operator tests/scripts/update-clusterpolicy.sh, the device plugin
README "Shared Access to GPUs"): put sharing configs into a ConfigMap, point the plugin at it
(ClusterPolicy ``spec.devicePlugin.config {name, default}``, or the device plugin chart's
``config.name``/``config.map`` and ``config.default``), and optionally pick another key per
node with the label ``nvidia.com/device-plugin.config``. The plugin's config-manager then
loads that key on each node; a config the plugin refuses makes it crash-loop. The stand-in
reads the same objects, so a user (or the operator's own e2e) changing them changes what the
nodes advertise and how GFD labels them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import yaml

from conformance.nvidia import labels as L
from conformance.nvidia.sharing import SharingConfig, validate_sharing_config


@dataclass(frozen=True)
class Applied:
    """The sharing a node's plugin runs with, or why it refuses to start."""

    config: SharingConfig | None = None  # None: no sharing (whole GPUs)
    refused: str | None = None           # the plugin's error: it crash-loops


@dataclass
class ConfigSource:
    """The ConfigMap the plugin is pointed at: its parsed keys and the default key."""

    name: str
    default: str | None
    docs: dict[str, object] = field(default_factory=dict)  # key -> YAML text
    missing: bool = False  # the ConfigMap does not exist


def applied_for(source: ConfigSource | None, node_labels: Mapping[str, str]) -> Applied:
    """What the plugin on a node with ``node_labels`` applies from ``source``."""
    if source is None:
        return Applied()
    if source.missing:
        return Applied(refused=f"ConfigMap {source.name} not found")
    key = node_labels.get(L.DEVICE_PLUGIN_CONFIG) or source.default
    if key is None and len(source.docs) == 1:  # config-manager's "single" fallback
        key = next(iter(source.docs))
    if key is None:
        return Applied()
    if key not in source.docs:
        return Applied(refused=f"no config named {key!r} in ConfigMap {source.name}")
    text = source.docs[key]
    try:
        doc = yaml.safe_load(text) if isinstance(text, str) else text
    except yaml.YAMLError as exc:
        return Applied(refused=f"config {key!r} is not YAML: {str(exc).splitlines()[0]}")
    if isinstance(doc, Mapping) and "sharing" not in doc:
        return Applied()  # a config of flags only: whole GPUs
    errors = validate_sharing_config(doc, require_version=False)
    if errors:
        return Applied(refused=f"config {key!r}: {errors[0]}")
    return Applied(SharingConfig.from_document(doc))
