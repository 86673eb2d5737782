"""What the suites read from a cluster, each with one list or get call, however many nodes.

Reads return the pure views of ``conformance.checks`` and ``conformance.nvidia``; the checks
judge them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from conformance.checks import gpu_nodes
from conformance.checks.gpu_nodes import GpuNode
from conformance.checks.rollout import OperatorView
from conformance.cluster import dra as cluster_dra
from conformance.cluster.client import Cluster, Forbidden, NotFound, already_done, read_or_none
from conformance.cluster.pods import UNFINISHED
from conformance.nvidia import clusterpolicy, gfd_contract, operands
from conformance.nvidia import device_plugin_chart as chart
from conformance.nvidia import labels as L
from conformance.nvidia.clusterpolicy import ClusterPolicy


def list_gpu_nodes(cluster: Cluster) -> list[GpuNode]:
    """The cluster's GPU nodes, by any evidence (``checks.gpu_nodes``; one list request)."""
    return gpu_nodes.gpu_nodes(cluster.core.list_node().items)


def read_operator_view(cluster: Cluster, namespace: str) -> OperatorView:
    dss = {d.metadata.name: d for d in cluster.apps.list_namespaced_daemon_set(namespace).items}
    pods: dict[str, list] = {}
    for pod in cluster.core.list_namespaced_pod(namespace).items:
        app = (pod.metadata.labels or {}).get("app")
        if app:
            pods.setdefault(app, []).append(pod)
    return OperatorView(namespace, dss, pods)


def read_cluster_policy(cluster: Cluster) -> ClusterPolicy | None:
    """The (first) ClusterPolicy, or None when the CRD or the object is absent."""
    return _cluster_policy(cluster)[0]


@dataclass(frozen=True)
class Component:
    """One NVIDIA component's DaemonSet as it runs here, with its pods."""

    key: str  # the catalogue key of nvidia.operands: device-plugin, gpu-feature-discovery, ...
    daemonset: object
    pods: list
    deployed_by: str  # "the GPU Operator" | "the device plugin chart"

    @property
    def name(self) -> str:
        return f"{self.daemonset.metadata.namespace}/{self.daemonset.metadata.name}"

    def container(self, name: str | None = None):
        containers = self.daemonset.spec.template.spec.containers
        return next((c for c in containers if c.name == name), containers[0])

    def __repr__(self) -> str:
        # short: a check's failure traceback shows its arguments, and the API objects'
        # own repr pretty-prints every field (~20 ms a pod)
        return f"Component({self.key}: {self.name}, {len(self.pods)} pods, {self.deployed_by})"


@dataclass
class GpuStack:
    """Who runs the NVIDIA stack of this cluster: the GPU Operator (its Deployment, CRD and
    ClusterPolicy), the device plugin chart, or neither; and the components each runs."""

    operator_namespace: str
    operator_deployments: list
    policy: ClusterPolicy | None
    policy_crd: bool
    components: dict[str, list[Component]] = field(default_factory=dict)
    operator_view: OperatorView | None = None
    # The GPUCluster (nvidia.com/v1alpha1) when the operator runs the DRA stack instead of a
    # ClusterPolicy (the two exclude each other in v26.7.0); None also where it cannot be read.
    gpucluster: dict | None = None

    @property
    def operator_installed(self) -> bool:
        """The GPU Operator runs or is meant to: its Deployment or a ClusterPolicy exists (its
        CRD alone is what ``helm uninstall`` leaves behind)."""
        return bool(self.operator_deployments or self.policy)

    @property
    def runs_gpucluster(self) -> bool:
        """The operator runs the DRA stack (a GPUCluster), not the ClusterPolicy's operands."""
        return self.policy is None and self.gpucluster is not None

    @property
    def shape(self) -> str:
        if self.operator_installed:
            return "gpu-operator"
        if any(c.deployed_by == CHART for cs in self.components.values() for c in cs):
            return "device-plugin-chart"
        return "none"

    def of(self, key: str) -> list[Component]:
        return self.components.get(key, [])

    def __repr__(self) -> str:  # short, as Component's
        return (f"GpuStack({self.shape}, operator namespace {self.operator_namespace}, "
                f"components {sorted(self.components)})")

    def pods(self) -> list:
        return [p for cs in self.components.values() for c in cs for p in c.pods]

    def gfd_version(self, node: str) -> gfd_contract.GfdVersion | None:
        """The GFD release whose pod runs on ``node`` (from its image), if one does."""
        for comp in self.of("gpu-feature-discovery"):
            if any(p.spec.node_name == node for p in comp.pods):
                return gfd_contract.version_from_image(comp.container().image)
        return None

    def sharing_source(self) -> tuple[str, str, str | None] | None:
        """(namespace, ConfigMap, default key) of the device plugin's sharing configs: the
        ClusterPolicy's spec.devicePlugin.config, else the chart's mounted ConfigMap."""
        ref = self.policy.device_plugin_config if self.policy else None
        if ref is not None:
            return (self.policy.namespace or self.operator_namespace), ref.name, ref.default
        for comp in self.of("device-plugin"):
            spec = comp.daemonset.spec.template.spec
            volume = next((v for v in spec.volumes or []
                           if v.name == chart.CONFIG_VOLUME and v.config_map), None)
            if volume is None:
                continue
            env = {e.name: e.value for c in [*(spec.init_containers or []), *spec.containers]
                   for e in c.env or []}
            return (comp.daemonset.metadata.namespace, volume.config_map.name,
                    env.get(chart.DEFAULT_CONFIG_ENV) or None)
        return None


CHART, OPERATOR = "the device plugin chart", "the GPU Operator"


def read_gpu_stack(cluster: Cluster, operator_namespace: str) -> GpuStack:
    """The NVIDIA stack in a handful of list calls, however many nodes."""
    deployments = cluster.apps.list_deployment_for_all_namespaces(
        label_selector=L.OPERATOR_SELECTOR).items
    policy, crd = _cluster_policy(cluster)
    stack = GpuStack(operator_namespace, deployments, policy, crd)
    if policy is None:
        # not granted (Forbidden): the DRA suite says so, this view goes without
        with already_done(Forbidden):
            stack.gpucluster = cluster_dra.read_gpucluster(cluster)[0]
    if stack.operator_installed:
        view = read_operator_view(cluster, operator_namespace)
        stack.operator_view = view
        for op in operands.OPERANDS:
            if op.name in view.daemonsets:
                stack.components.setdefault(op.key, []).append(Component(
                    op.key, view.daemonsets[op.name], view.pods_by_app.get(op.app, []),
                    OPERATOR))
    chart_pods: dict[str, list] = {}
    for pod in cluster.core.list_pod_for_all_namespaces(label_selector=chart.SELECTOR).items:
        owner = next((o.name for o in pod.metadata.owner_references or []
                      if o.kind == "DaemonSet"), None)
        chart_pods.setdefault(f"{pod.metadata.namespace}/{owner}", []).append(pod)
    for ds in cluster.apps.list_daemon_set_for_all_namespaces(
            label_selector=chart.SELECTOR).items:
        key = chart.component_of([c.name for c in ds.spec.template.spec.containers])
        if key:
            name = f"{ds.metadata.namespace}/{ds.metadata.name}"
            stack.components.setdefault(key, []).append(Component(
                key, ds, chart_pods.get(name, []), CHART))
    return stack


def _cluster_policy(cluster: Cluster) -> tuple[ClusterPolicy | None, bool]:
    """(the first ClusterPolicy or None, whether its CRD is served)."""
    try:
        items = cluster.custom.list_cluster_custom_object(*clusterpolicy.API).get("items", [])
    except NotFound:
        return None, False
    return (ClusterPolicy(items[0]) if items else None), True


@dataclass
class SharingDocs:
    """The device plugin's sharing ConfigMap: each key's parsed document."""

    config_map: str
    namespace: str
    default_key: str | None
    docs: dict[str, object]  # key -> parsed document (or the raw text when it is not YAML)
    parse_errors: dict[str, str]

    def for_node(self, node: GpuNode) -> tuple[str | None, object]:
        """The key a node uses (its nvidia.com/device-plugin.config label, else the default)."""
        key = node.label(L.DEVICE_PLUGIN_CONFIG) or self.default_key
        return key, self.docs.get(key or "")


def read_sharing_docs(cluster: Cluster, stack: GpuStack) -> SharingDocs | None:
    """The sharing configs the device plugin is pointed at, or None when it is not."""
    source = stack.sharing_source()
    if source is None:
        return None
    namespace, name, default = source
    cm = read_or_none(cluster.core.read_namespaced_config_map, name, namespace)
    if cm is None:
        return SharingDocs(name, namespace, default, {},
                           {"": f"ConfigMap {namespace}/{name} not found"})

    docs, errors = {}, {}
    for key, text in (cm.data or {}).items():
        try:
            docs[key] = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            errors[key] = f"not YAML: {str(exc).splitlines()[0]}"
    return SharingDocs(name, namespace, default, docs, errors)


def unfinished_pods(cluster: Cluster) -> list:
    """Every pod not yet Succeeded or Failed, in every namespace (one list request)."""
    return cluster.core.list_pod_for_all_namespaces(field_selector=UNFINISHED).items
