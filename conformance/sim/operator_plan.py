"""What the GPU Operator stand-in writes, worked out from its state alone (no API calls).

``SimState`` (a profile and the faults injected into it) becomes one ``NodePlan`` per node
(labels as GFD and the operator write them, taints, capacity and allocatable as the device
plugin advertises them, with the sharing config the plugin last accepted and the faults
applied), the ClusterPolicy spec the profile installs, and the operand DaemonSets' manifests.
``standin`` writes them through the API server and plays the operator's reactions.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field

import yaml

from conformance.common.errors import UsageError
from conformance.nvidia import driver, operands
from conformance.nvidia import labels as L
from conformance.sim import gfd, gpucluster, profiles
from conformance.sim.objects import CRASHLOOP_ANNOTATION, STANDIN_LABEL, STUCK_INIT_ANNOTATION
from conformance.sim.sharing_flow import Applied, ConfigSource, applied_for

# fault -> {operand DaemonSet: the annotation whose KWOK stage its pods play}
OPERAND_FAULTS: dict[str, dict[str, str]] = {
    "operand-crashloop": {"nvidia-dcgm-exporter": CRASHLOOP_ANNOTATION},
    # The validator's driver-validation init container waits for a driver that never comes up.
    "driver-crashloop": {"nvidia-driver-daemonset": CRASHLOOP_ANNOTATION,
                         "nvidia-operator-validator": STUCK_INIT_ANNOTATION},
    "mig-manager-crashloop": {"nvidia-mig-manager": CRASHLOOP_ANNOTATION},
}
# The device plugin crash-loops when it refuses its sharing config ("number of replicas must
# be >= 2"): derived from the config (sharing_flow), whoever broke it (a user, or the
# sharing-config-invalid fault).
PLUGIN_DS = operands.get_operand("device-plugin").name
DEVICE_PLUGIN_CONFIG_MAP = "device-plugin-config"
SEED_KEY = "default"  # the key the profile's sharing config is seeded under
MISMATCHED_DRIVER = "570.86.15"
# NoExecute, so operand pods already on the node are evicted as on a freshly tainted node.
FOREIGN_TAINT = {"key": "dedicated", "value": "ml-team", "effect": "NoExecute"}


@dataclass
class SimState:
    """What the stand-in plays: a profile and the faults injected into it."""

    profile: str
    faults: list[str] = field(default_factory=list)
    operator_namespace: str = "gpu-operator"
    operator: str = "standin"  # "chart": the GPU Operator chart is installed; adopt its objects
    nodes: int | None = None  # --nodes: resize the profile's first GPU group
    gpus_per_node: int | None = None

    def has(self, fault: str) -> bool:
        return fault in self.faults

    def resolve_profile(self) -> profiles.Profile:
        base = profiles.get_profile(self.profile)
        if self.nodes is None and self.gpus_per_node is None:
            return base
        return resized(base, self.nodes, self.gpus_per_node)


def resized(base: profiles.Profile, nodes: int | None,
            gpus_per_node: int | None) -> profiles.Profile:
    """``--nodes K --gpus-per-node G``: the profile with its first GPU group resized."""
    if (nodes is not None and nodes < 1) or (gpus_per_node is not None and gpus_per_node < 1):
        raise UsageError("--nodes and --gpus-per-node must be at least 1")
    gpu = base.gpu_groups[0]
    new = dataclasses.replace(gpu, count=nodes or gpu.count,
                              gpus_per_node=gpus_per_node or gpu.gpus_per_node)
    groups = tuple(new if g is gpu else g for g in base.groups if not g.is_gpu or g is gpu)
    return profiles.Profile(f"{base.name}-{new.count}x{new.gpus_per_node}",
                            f"{base.description} (resized to {new.count} GPU nodes x "
                            f"{new.gpus_per_node} GPUs)", groups, stack=base.stack, gang=base.gang,
                            autoscaler=base.autoscaler, autoscaled=base.autoscaled,
                            custom_metrics=base.custom_metrics)


@dataclass
class NodePlan:
    name: str
    labels: dict[str, str]
    taints: list[dict]
    resources: dict[str, str]
    gpu: bool
    # what the kubelet offers; a crash-looping plugin's devices are unhealthy: its resources
    # stay in capacity at 0 allocatable (as the real kubelet shows it). None: = resources
    allocatable: dict[str, str] | None = None


def plan_nodes(state: SimState, source: ConfigSource | None,
               current_labels: dict[str, dict[str, str]] | None = None) -> Plan:
    """What every node should carry, with the sharing the plugin applies from ``source``
    (the ConfigMap it is pointed at) and the nodes' own ``device-plugin.config`` labels."""
    profile = state.resolve_profile()
    operator = profile.runs_cluster_policy
    current_labels = current_labels or {}
    plans: list[NodePlan] = []
    refused: list[str] = []
    first_gpu = True
    for group in profile.node_groups:
        for index in range(group.count):
            name = group.node_name(index)
            is_gpu = group.is_gpu
            node_group = group
            if is_gpu:
                node_group, why = _with_applied_sharing(
                    group, applied_for(source, current_labels.get(name, {})))
                if why:
                    refused.append(f"{name}: {why}")
            node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                           "type": "kwok", STANDIN_LABEL: "true"}
            node_labels.update(gfd.node_labels(node_group, index, operator=operator)
                               if is_gpu else {})
            if is_gpu and gpucluster.wanted(profile):
                node_labels.update(gpucluster.STATE_LABELS)
            resources = gfd.advertised_resources(node_group)
            taints = [t.as_dict() for t in group.taints]
            allocatable = None
            if is_gpu:
                _apply_node_faults(state, node_labels, resources, taints, first_gpu)
                first_gpu = False
                if why:
                    allocatable = {k: "0" if L.is_gpu_resource(k) else v
                                   for k, v in resources.items()}
            plans.append(NodePlan(name, node_labels, taints, resources, is_gpu, allocatable))
    return Plan(plans, refused)


@dataclass
class Plan:
    nodes: list[NodePlan]
    refused: list[str]  # nodes whose plugin refuses its sharing config, and why


def _with_applied_sharing(group: profiles.NodeGroup,
                          applied: Applied) -> tuple[profiles.NodeGroup, str | None]:
    """The group as its plugin last ran it; a refused config leaves the last good one (the
    profile's) in the kubelet's capacity, with nothing allocatable (see NodePlan)."""
    if applied.refused:
        return group, applied.refused
    try:
        return dataclasses.replace(group, sharing=applied.config), None
    except ValueError as exc:  # e.g. MPS on MIG devices: the plugin exits
        return group, str(exc)


def seeded_source(state: SimState) -> ConfigSource | None:
    """The sharing configs the profile installs (a fault may break them), or None."""
    doc = state.resolve_profile().sharing_config()
    if doc is None:
        return None
    if state.has("sharing-config-invalid"):
        doc = copy.deepcopy(doc)
        for section in (doc.get("sharing") or {}).values():
            for resource in section.get("resources", []):
                resource["replicas"] = 1  # "to turn sharing off": the plugin refuses it
    return ConfigSource(DEVICE_PLUGIN_CONFIG_MAP, SEED_KEY,
                        {SEED_KEY: yaml.safe_dump(doc, sort_keys=False)})


_GFD_PREFIXES = ("nvidia.com/gpu.", "nvidia.com/cuda.", "nvidia.com/mig", "nvidia.com/mps.",
                 "nvidia.com/vgpu.", "nvidia.com/gfd.")
_OPERATOR_KEYS = (L.GPU_PRESENT, L.DEPLOY_PREFIX, "nvidia.com/gpu.workload.config",
                  L.MIG_CONFIG)


def _is_gfd_label(key: str) -> bool:
    if any(key.startswith(k) for k in _OPERATOR_KEYS):
        return False
    return key.startswith(_GFD_PREFIXES)


def _apply_node_faults(state: SimState, node_labels: dict, resources: dict, taints: list,
                       first_gpu_node: bool) -> None:
    if state.has("device-plugin-absent"):
        for key in [k for k in resources if L.is_gpu_resource(k)]:
            del resources[key]
    if state.has("gfd-absent"):
        for key in [k for k in node_labels if _is_gfd_label(k)]:
            del node_labels[key]
    if state.has("sharing-config-not-applied") and int(node_labels.get(L.REPLICAS, 1)) > 1:
        # GFD picked the new config up; the device plugin still runs with the old one.
        for key in (L.GPU_RESOURCE, L.SHARED_RESOURCE):
            resources.pop(key, None)
        resources[L.GPU_RESOURCE] = node_labels[L.COUNT]
    if not first_gpu_node:
        return  # the remaining faults break one node, as they do in real clusters
    if state.has("driver-version-mismatch"):
        node_labels.update(driver.driver_labels(MISMATCHED_DRIVER))
    if state.has("gfd-label-wrong") and L.COUNT in node_labels:
        node_labels[L.COUNT] = str(max(1, int(node_labels[L.COUNT]) // 2))
    if state.has("time-slicing-replicas-mislabelled") and L.REPLICAS in node_labels:
        node_labels[L.REPLICAS] = str(int(node_labels[L.REPLICAS]) * 2)
    if state.has("wrong-gpu-type-label") and L.PRODUCT in node_labels:
        node_labels[L.PRODUCT] = gfd.other_product(node_labels[L.PRODUCT])
    if state.has("compute-capability-label-wrong") and L.COMPUTE_MAJOR in node_labels:
        node_labels.update({L.COMPUTE_MAJOR: "9", L.COMPUTE_MINOR: "0", L.FAMILY: "hopper"})
    if state.has("gpu-node-taint-missing-toleration"):
        taints.append(dict(FOREIGN_TAINT))


def cluster_policy_spec(state: SimState) -> dict:
    profile = state.resolve_profile()
    spec = operands.default_cluster_policy_spec()
    spec.setdefault("mig", {})["strategy"] = profile.mig_strategy
    spec.setdefault("driver", {})["version"] = profile.driver_version
    if profile.sharing_config() is not None:
        spec.setdefault("devicePlugin", {})["config"] = {
            "name": DEVICE_PLUGIN_CONFIG_MAP, "default": SEED_KEY}
    return spec


def daemonset_manifest(op: operands.Operand, state: SimState, spec: dict,
                       owner: dict | None = None, *, plugin_refuses: bool = False) -> dict:
    labels = {"app": op.app, STANDIN_LABEL: "true", **op.extra_labels}
    annotations = {annotation: "true" for fault, plays in OPERAND_FAULTS.items()
                   if state.has(fault) for name, annotation in plays.items() if name == op.name}
    if plugin_refuses and op.name in (PLUGIN_DS, "gpu-feature-discovery"):
        # GFD reads the same sharing config and exits on it too (seen on the real node)
        annotations[CRASHLOOP_ANNOTATION] = "true"
    env_map = operands.operand_env(op, spec)
    config = ((spec.get("devicePlugin") or {}).get("config") or {})
    volumes = []
    if op.name in ("nvidia-device-plugin-daemonset", "gpu-feature-discovery") and config.get(
            "name"):
        # The operator's config-manager side: the sharing ConfigMap mounted, its default named.
        env_map = {**env_map, "CONFIG_FILE_SRCDIR": "/available-configs",
                   "DEFAULT_CONFIG": str(config.get("default", ""))}
        annotations["sim.gpuconf.io/config-map"] = str(config["name"])
        volumes = [{"name": "available-configs", "configMap": {"name": str(config["name"])}}]
    env = [{"name": k, "value": str(v)} for k, v in env_map.items()]
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": op.name, "namespace": state.operator_namespace,
                     "labels": {**labels, "app.kubernetes.io/managed-by": "gpu-operator"},
                     # As the operator does: operands belong to the ClusterPolicy, so deleting
                     # it (helm uninstall) lets the garbage collector remove them.
                     **({"ownerReferences": [owner]} if owner else {})},
        "spec": {
            "selector": {"matchLabels": {"app": op.app}},
            "updateStrategy": {"type": op.update_strategy},
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": {
                    "serviceAccountName": op.service_account,
                    "nodeSelector": dict(op.node_selector),
                    "tolerations": [copy.deepcopy(t) for t in operands.DEFAULT_TOLERATIONS],
                    "priorityClassName": operands.PRIORITY_CLASS,
                    "containers": [{"name": op.container, "image": op.image(spec),
                                    "env": env}],
                    **({"volumes": volumes} if volumes else {}),
                },
            },
        },
    }
