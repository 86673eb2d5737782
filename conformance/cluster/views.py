"""What the suites read from a cluster, each with one list or get call, however many nodes.

Reads return the pure views of ``conformance.checks`` and ``conformance.nvidia``; the checks
judge them.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml
from kubernetes.client.exceptions import ApiException

from conformance.checks import gpu_nodes
from conformance.checks.gpu_nodes import GpuNode
from conformance.checks.rollout import OperatorView
from conformance.cluster.client import Cluster
from conformance.cluster.pods import UNFINISHED
from conformance.nvidia import clusterpolicy
from conformance.nvidia import labels as L
from conformance.nvidia.clusterpolicy import ClusterPolicy


def list_gpu_nodes(cluster: Cluster) -> list[GpuNode]:
    """Nodes labelled ``nvidia.com/gpu.present=true`` (one list request)."""
    items = cluster.core.list_node(label_selector=f"{L.GPU_PRESENT}=true").items
    return sorted((gpu_nodes.from_api(n) for n in items), key=lambda n: n.name)


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
    try:
        items = cluster.custom.list_cluster_custom_object(*clusterpolicy.API).get("items", [])
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return ClusterPolicy(items[0]) if items else None


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


def read_sharing_docs(cluster: Cluster, policy: ClusterPolicy | None,
                      namespace: str) -> SharingDocs | None:
    """The ConfigMap that ``spec.devicePlugin.config`` names, or None without one."""
    ref = policy.device_plugin_config if policy else None
    if ref is None:
        return None
    try:
        cm = cluster.core.read_namespaced_config_map(ref.name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return SharingDocs(ref.name, namespace, ref.default, {},
                               {"": f"ConfigMap {namespace}/{ref.name} not found"})
        raise
    docs, errors = {}, {}
    for key, text in (cm.data or {}).items():
        try:
            docs[key] = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            errors[key] = f"not YAML: {str(exc).splitlines()[0]}"
    return SharingDocs(ref.name, namespace, ref.default, docs, errors)


def unfinished_pods(cluster: Cluster) -> list:
    """Every pod not yet Succeeded or Failed, in every namespace (one list request)."""
    return cluster.core.list_pod_for_all_namespaces(field_selector=UNFINISHED).items
