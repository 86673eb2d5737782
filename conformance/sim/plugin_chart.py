"""The device plugin chart's objects, for the sim profiles without the GPU Operator.

What ``helm install nvdp nvidia-device-plugin --set gfd.enabled=true [--set-file config.map...]``
creates (k8s-device-plugin v0.20.0 chart; names, labels, containers, affinity and the config
plumbing as ``nvidia.device_plugin_chart`` records them): the plugin and GFD DaemonSets, NFD's
worker DaemonSet and master Deployment, their ServiceAccount, and the sharing ConfigMap
rendered from ``config.map``. The stand-in writes them through the API server; KWOK plays
their pods.
"""

from __future__ import annotations

import copy

from conformance.cluster.client import (
    Cluster,
    NotFound,
    already_done,
    create_or_replace,
    read_or_none,
)
from conformance.nvidia import device_plugin_chart as chart
from conformance.nvidia import labels as L
from conformance.sim import objects
from conformance.sim.sharing_flow import ConfigSource

_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": L.NFD_PCI_NVIDIA, "operator": "In", "values": ["true"]}]},
        {"matchExpressions": [{"key": "feature.node.kubernetes.io/cpu-model.vendor_id",
                               "operator": "In", "values": ["NVIDIA"]}]},
        {"matchExpressions": [{"key": L.GPU_PRESENT, "operator": "In", "values": ["true"]}]},
    ]}}}
_HELM_CHART = f"{chart.CHART_NAME}-{chart.VERSION.lstrip('v')}"  # the helm.sh/chart label
_NFD_FULLNAME = f"{chart.RELEASE}-{chart.NFD_SUBCHART}"  # the subchart's objects' names
_TOLERATIONS = [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def _labels(name: str = chart.CHART_NAME) -> dict[str, str]:
    return {chart.NAME_LABEL: name, chart.INSTANCE_LABEL: chart.RELEASE}


def _config_env(default: str | None) -> list[dict]:
    return [{"name": "NODE_LABEL", "value": L.DEVICE_PLUGIN_CONFIG},
            {"name": "CONFIG_FILE_SRCDIR", "value": "/available-configs"},
            {"name": chart.DEFAULT_CONFIG_ENV, "value": default or ""}]


def daemonset(component: str, *, config_map: str | None, default: str | None,
              crashloop: bool) -> dict:
    """The chart's DaemonSet of ``component`` (device-plugin or gpu-feature-discovery)."""
    main = chart.CONTAINER_BY_COMPONENT[component]
    prefix = main.removesuffix("-ctr")
    image = f"{chart.IMAGE}:{chart.VERSION}"
    spec: dict = {"serviceAccountName": f"{chart.fullname(chart.RELEASE)}-service-account",
                  "priorityClassName": "system-node-critical", "affinity": _AFFINITY,
                  "tolerations": copy.deepcopy(_TOLERATIONS),
                  "containers": [{"name": main, "image": image, "command": [
                      "nvidia-device-plugin" if component == "device-plugin"
                      else "gpu-feature-discovery"]}]}
    if config_map:
        sidecar = {"name": f"{prefix}-init", "image": image, "command": ["config-manager"],
                   "env": _config_env(default)}
        spec["initContainers"] = [sidecar]
        spec["containers"].insert(0, {**sidecar, "name": f"{prefix}-sidecar"})
        spec["volumes"] = [{"name": chart.CONFIG_VOLUME, "configMap": {"name": config_map}}]
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": chart.daemonset_name(chart.RELEASE, component),
                         "namespace": chart.NAMESPACE,
                         "labels": {**_labels(), objects.STANDIN_LABEL: "true",
                                    "helm.sh/chart": _HELM_CHART}},
            "spec": {"selector": {"matchLabels": _labels()},
                     "template": {"metadata": {"labels": _labels(), "annotations": (
                         {objects.CRASHLOOP_ANNOTATION: "true"} if crashloop else {})},
                                  "spec": spec}}}


def nfd_worker() -> dict:
    labels = {**_labels(chart.NFD_SUBCHART), "role": "worker"}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": f"{_NFD_FULLNAME}-worker", "namespace": chart.NAMESPACE,
                         "labels": {**labels, objects.STANDIN_LABEL: "true"}},
            "spec": {"selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels}, "spec": {
                    "serviceAccountName": _NFD_FULLNAME,
                    "tolerations": copy.deepcopy(_TOLERATIONS),
                    "containers": [{"name": "worker", "image":
                                    "registry.k8s.io/nfd/node-feature-discovery:v0.18.2"}]}}}}


def config_map(docs: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": chart.config_map_name(chart.RELEASE), "namespace": chart.NAMESPACE,
                         "labels": {**_labels(), objects.STANDIN_LABEL: "true"}},
            "data": dict(docs)}


def daemonset_versions(cluster: Cluster) -> dict[str, int | None]:
    """The chart's DaemonSets' generations now (None: absent), for :func:`apply`'s ``seen``."""
    names = [chart.daemonset_name(chart.RELEASE, c) for c in ("device-plugin",
                                                               "gpu-feature-discovery")]
    found = {d.metadata.name: d.metadata.generation
             for d in cluster.apps.list_namespaced_daemon_set(chart.NAMESPACE).items}
    return {name: found.get(name) for name in names}


def apply(cluster: Cluster, seed: ConfigSource | None, *, crashloop: bool,
          write_config: bool, seen: dict[str, int | None] | None = None) -> None:
    """Create or update the chart's objects. ``seed``: the config.map the profile installs
    (``write_config``: write it, as ``helm install``/``sim set`` do; the control loop does not,
    so a user's edits to the ConfigMap stay). ``seen``: the control loop's read of the
    DaemonSets at the start of its pass (:func:`daemonset_versions`); one changed since is
    not overwritten (:func:`objects.apply_daemonset`)."""
    objects.ensure_namespace(cluster, chart.NAMESPACE)
    objects.ensure_service_accounts(
        cluster, chart.NAMESPACE, {f"{chart.fullname(chart.RELEASE)}-service-account",
                                   _NFD_FULLNAME})
    name = chart.config_map_name(chart.RELEASE) if seed else None
    if seed and write_config:
        body = config_map({k: str(v) for k, v in seed.docs.items()})
        create_or_replace(
            lambda: cluster.core.create_namespaced_config_map(chart.NAMESPACE, body),
            lambda: cluster.core.replace_namespaced_config_map(name, chart.NAMESPACE, body))
    wanted = [daemonset("device-plugin", config_map=name, default=seed.default if seed else None,
                        crashloop=crashloop),
              daemonset("gpu-feature-discovery", config_map=name,
                        default=seed.default if seed else None, crashloop=crashloop)]
    for body in wanted:
        objects.apply_daemonset(cluster, chart.NAMESPACE, body, seen=seen)
    objects.apply_daemonset(cluster, chart.NAMESPACE, nfd_worker())


def observed_source(cluster: Cluster) -> ConfigSource | None:
    """The ConfigMap the chart's plugin DaemonSet mounts, with its keys, or None."""
    ds = read_or_none(cluster.apps.read_namespaced_daemon_set,
                      chart.daemonset_name(chart.RELEASE, "device-plugin"), chart.NAMESPACE)
    if ds is None:
        return None
    spec = ds.spec.template.spec
    volume = next((v for v in spec.volumes or [] if v.name == chart.CONFIG_VOLUME), None)
    if volume is None or volume.config_map is None:
        return None
    env = {e.name: e.value for c in spec.init_containers or [] for e in c.env or []}
    return read_source(cluster, chart.NAMESPACE, volume.config_map.name,
                       env.get(chart.DEFAULT_CONFIG_ENV) or None)


def read_source(cluster: Cluster, namespace: str, name: str,
                default: str | None) -> ConfigSource:
    """A ConfigMap of sharing configs as the plugin's config-manager reads it."""
    cm = read_or_none(cluster.core.read_namespaced_config_map, name, namespace)
    if cm is None:
        return ConfigSource(name, default, missing=True)
    return ConfigSource(name, default, dict(cm.data or {}))


def remove(cluster: Cluster) -> None:
    """What ``helm uninstall nvdp`` removes: the chart's DaemonSets, ConfigMap and pods."""
    objects.delete_daemonsets(cluster, chart.NAMESPACE, f"{objects.STANDIN_LABEL}=true",
                              pod_selector="")
    with already_done(NotFound):
        cluster.core.delete_namespaced_config_map(chart.config_map_name(chart.RELEASE),
                                                  chart.NAMESPACE)

