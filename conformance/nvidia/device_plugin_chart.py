"""The NVIDIA device plugin Helm chart (k8s-device-plugin v0.20.0 ``deployments/helm/
nvidia-device-plugin``): how a cluster without the GPU Operator runs the device plugin, GPU
Feature Discovery and the MPS control daemon, and where their sharing config lives.

Facts from the chart's templates:

- Every object carries ``app.kubernetes.io/name: nvidia-device-plugin`` and
  ``app.kubernetes.io/instance: <release>`` (``_helpers.tpl`` templateLabels); the plugin's and
  GFD's DaemonSets share these selector labels, so their pods are told apart by the main
  container's name (``nvidia-device-plugin-ctr``, ``gpu-feature-discovery-ctr``,
  ``mps-control-daemon-ctr``).
- DaemonSet names: ``<fullname>`` for the plugin, ``<fullname>-gpu-feature-discovery`` for GFD
  and ``<fullname>-mps-control-daemon``; fullname is ``<release>-nvidia-device-plugin`` unless
  the release name already contains ``nvidia-device-plugin``.
- Sharing configs: ``config.name`` (an existing ConfigMap) or ``config.map`` (rendered as
  ConfigMap ``<fullname>-configs``), ``config.default`` the default key; the pods mount it as
  volume ``available-configs`` and read ``DEFAULT_CONFIG`` (config-manager, with the node label
  ``nvidia.com/device-plugin.config`` choosing another key per node).
- Nodes: the DaemonSets' affinity selects NFD's ``pci-10de.present=true`` (or Tegra's CPU
  vendor, or ``nvidia.com/gpu.present=true`` forced by hand); GPU nodes are tolerated by
  ``nvidia.com/gpu`` Exists.
"""

from __future__ import annotations

from conformance.binaries.binaries import read_versions

# The pinned chart (and image) version: versions.env pins it for the node's build scripts too.
VERSION = read_versions()["NVIDIA_DEVICE_PLUGIN_VERSION"]
RELEASE = "nvdp"  # as the upstream README installs it
NAMESPACE = "nvidia-device-plugin"
NFD_SUBCHART = "node-feature-discovery"  # charts/node-feature-discovery-*.tgz, its release name
NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
CHART_NAME = "nvidia-device-plugin"
SELECTOR = f"{NAME_LABEL}={CHART_NAME}"
CONFIG_VOLUME = "available-configs"
DEFAULT_CONFIG_ENV = "DEFAULT_CONFIG"
IMAGE = "nvcr.io/nvidia/k8s-device-plugin"

# main container name -> the component it runs (the catalogue keys of nvidia.operands)
COMPONENT_BY_CONTAINER = {
    "nvidia-device-plugin-ctr": "device-plugin",
    "gpu-feature-discovery-ctr": "gpu-feature-discovery",
    "mps-control-daemon-ctr": "mps-control-daemon",
}
CONTAINER_BY_COMPONENT = {v: k for k, v in COMPONENT_BY_CONTAINER.items()}
_SUFFIX = {"device-plugin": "", "gpu-feature-discovery": "-gpu-feature-discovery",
           "mps-control-daemon": "-mps-control-daemon"}


def fullname(release: str) -> str:
    """The chart's fullname for a release (no overrides)."""
    name = release if CHART_NAME in release else f"{release}-{CHART_NAME}"
    return name[:63].rstrip("-")


def daemonset_name(release: str, component: str) -> str:
    return (fullname(release) + _SUFFIX[component])[:63].rstrip("-")


def config_map_name(release: str) -> str:
    """The ConfigMap the chart renders from ``config.map``."""
    return f"{fullname(release)}-configs"


def component_of(container_names: list[str]) -> str | None:
    """Which component a chart DaemonSet or pod runs, from its containers' names."""
    for name in container_names:
        if name in COMPONENT_BY_CONTAINER:
            return COMPONENT_BY_CONTAINER[name]
    return None
