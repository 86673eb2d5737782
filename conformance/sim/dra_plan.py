"""What the NVIDIA DRA driver stand-in writes, worked out from the profile and faults alone (no
API calls):

- the driver's DeviceClasses as its chart renders them for ``resource.k8s.io/v1`` with
  ``resources.gpus.enabled`` and ``gpuResourcesEnabledOverride`` (``nvidia.dra``: gpu, mig and
  vfio; compute domains off), ``extendedResourceName: nvidia.com/gpu`` on ``gpu.nvidia.com``;
- the chart's kubelet plugin DaemonSet (namespace ``nvidia-dra-driver-gpu``), scheduled by the
  chart value ``kubeletPlugin.nodeSelector`` onto nodes labelled
  ``nvidia.com/gpu.deploy.dra-driver=true``: the nodes of the profile's DRA groups; on a
  ``gpu-cluster`` profile the GPU Operator's GPUCluster runs it instead, as its
  ``nvidia-dra-driver-kubelet-plugin`` operand in the operator's namespace (``gpucluster.py``);
- one ResourceSlice pool per node the plugin is scheduled on, with the v0.4.1 attribute set of
  ``cmd/gpu-kubelet-plugin/{deviceinfo,mig}.go``: ``gpu-<minor>`` per GPU, or per static MIG
  device ``gpu-<minor>-mig-<profile>-<profileId>-<placement>``; versions semver-normalised as
  the driver does (580.105.08 -> 580.105.8).

Faults change what is written (``FAULT_NAMES``). ``dra`` writes it through the API server.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import uuid
from collections.abc import Iterator, Mapping

from conformance.nvidia import dra, operands
from conformance.nvidia.gpu_models import MigProfile
from conformance.sim import profiles

NAMESPACE = "nvidia-dra-driver-gpu"  # NVIDIA's documented install namespace
RELEASE = "nvidia-dra-driver-gpu"  # the Helm release name of the chart
CHART_NAME = "dra-driver-nvidia-gpu"
CHART_VERSION = "0.4.1"
IMAGE = f"registry.k8s.io/dra-driver-nvidia/{CHART_NAME}:v{CHART_VERSION}"
PLUGIN_DS = f"{CHART_NAME}-kubelet-plugin"
COMPONENT_LABEL = f"{CHART_NAME}-component"  # the chart's selectorLabels
OWNER_LABEL = "sim.gpuconf.io/dra-driver"
HASH_ANNOTATION = "sim.gpuconf.io/spec-hash"
SHARING_NAMESPACE = "inference-team"
SHARING_TEMPLATE = "mps-shared-gpu"
FAULT_NAMES = ("dra-pool-incomplete", "dra-version-not-semver", "dra-attributes-disagree",
               "dra-stale-pool", "dra-mig-parent-offered", "dra-class-selector-wrong",
               "dra-both-paths", "dra-sharing-config-invalid", "dra-gpucluster-operand-down")
WRONG_SELECTOR = ("device.driver == 'gpu.nvidia.com' && "
                  "device.attributes['gpu.nvidia.com'].type == 'GPU'")  # matches no device
# What the attributes-disagree fault publishes: another generation's name and capability.
DISAGREEING = {"productName": "NVIDIA H100 80GB HBM3", "cudaComputeCapability": "9.0.0"}
# GPU instance profile IDs (nvidia-smi mig -lgip) by profile size.
_GI_PROFILE_ID = {"1g": 19, "1g+me": 20, "1g.20gb": 15, "2g": 14, "3g": 9, "4g": 5, "7g": 0}
_ARCHITECTURE = {"hopper": "Hopper", "ampere": "Ampere", "ada-lovelace": "Ada Lovelace",
                 "turing": "Turing", "blackwell": "Blackwell", "volta": "Volta"}


def _uuid(*parts: object) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "gpuconf-sim/" + "/".join(map(str, parts))))


def _string(value: str) -> dict:
    return {"string": value}


def _version(value: str) -> dict:
    return {"version": value}


def gpu_attributes(group: profiles.NodeGroup, node: str, minor: int) -> dict[str, dict]:
    """``GpuInfo.Attributes()`` of GPU ``minor`` on ``node`` (v0.4.1)."""
    model = group.model
    bus = f"0000:{0x18 + 0x10 * minor:02x}:00.0"
    return {
        "type": _string(dra.TYPE_GPU),
        "uuid": _string("GPU-" + _uuid(node, minor)),
        "productName": _string(model.nvml_name),
        "brand": _string("Nvidia"),
        "architecture": _string(_ARCHITECTURE.get(model.family, model.family.title())),
        "cudaComputeCapability": _version(dra.semver(f"{model.compute_major}."
                                                     f"{model.compute_minor}")),
        "driverVersion": _version(dra.semver(group.driver_version)),
        "cudaDriverVersion": _version(dra.semver(group.cuda_version)),
        dra.PCI_BUS_ID: _string(bus),
        dra.PCIE_ROOT: _string(f"pci0000:{0x10 + 0x10 * (minor // 4):02x}"),
    }


def _mig_capacity(profile: MigProfile) -> dict[str, dict]:
    """``CommonCapacitiesMig``: the profile's engines and its memory in bytes."""
    values = {"multiprocessors": profile.multiprocessors, "copyEngines": profile.copy_engines,
              "decoders": profile.decoders, "encoders": profile.encoders,
              "jpegEngines": profile.jpeg, "ofaEngines": profile.ofa}
    out = {k: {"value": str(v)} for k, v in values.items()}
    out["memory"] = {"value": f"{profile.memory_mib}Mi"}
    return out


def _gi_profile_id(name: str) -> int:
    return _GI_PROFILE_ID.get(name, _GI_PROFILE_ID.get(name.split(".")[0], 0))


def devices(group: profiles.NodeGroup, node: str) -> list[dict]:
    """The devices of one node's pool: full GPUs, or the static MIG devices of its layout."""
    model = group.model
    out = []
    for minor in range(group.gpus_per_node):
        parent = gpu_attributes(group, node, minor)
        if not group.mig_enabled:
            out.append({"name": f"gpu-{minor}", "attributes": parent,
                        "capacity": {"memory": {"value": f"{model.memory_mib}Mi"}}})
            continue
        start = 0
        for name, count in group.mig_layout:
            profile = model.mig_profile(name)
            for _ in range(count):
                attrs = {k: v for k, v in parent.items() if k != "uuid"}
                attrs.update({"type": _string(dra.TYPE_MIG),
                              "uuid": _string("MIG-" + _uuid(node, minor, name, start)),
                              "parentUUID": parent["uuid"], "profile": _string(name)})
                capacity = _mig_capacity(profile)
                capacity.update({f"memorySlice{i}": {"value": "1"}
                                 for i in range(start, start + profile.gi_slices)})
                pname = name.replace(".", "").lower()
                out.append({"name": f"gpu-{minor}-mig-{pname}-{_gi_profile_id(name)}-{start}",
                            "attributes": attrs, "capacity": capacity})
                start += profile.gi_slices
    return out


def _with_faults(faults: list[str], group: profiles.NodeGroup, node: str, devs: list[dict],
                 first: bool) -> tuple[list[dict], int]:
    """(devices, resourceSliceCount) of one node's pool with the faults that break it."""
    count = 1
    if not first:
        return devs, count
    if "dra-pool-incomplete" in faults:
        count = 2  # the plugin says two slices make the pool; only one is ever written
    if "dra-version-not-semver" in faults:
        for d in devs:  # nvidia-smi's text, not normalised: the API server refuses the slice
            d["attributes"]["driverVersion"] = _version(group.driver_version)
    if "dra-attributes-disagree" in faults:
        for d in devs:
            d["attributes"].update({"productName": _string(DISAGREEING["productName"]),
                                    "cudaComputeCapability": _version(
                                        DISAGREEING["cudaComputeCapability"])})
    if "dra-mig-parent-offered" in faults and group.mig_enabled:  # issue #719
        devs = devices(_without_mig(group), node) + devs
    return devs, count


def stale_slice(group: profiles.NodeGroup, node: str, node_uid: str | None) -> dict:
    """What an older install (v25.3, chart nvidia/nvidia-dra-driver-gpu) left behind for
    ``node``: its own pool of the same GPUs, with that release's attributes (index, minor,
    pcieBusID; no resource.kubernetes.io/pciBusID)."""
    devs = devices(_without_mig(group), node)
    for i, d in enumerate(devs):
        bus = d["attributes"].pop(dra.PCI_BUS_ID)
        d["attributes"].pop(dra.PCIE_ROOT, None)
        d["attributes"].update({"index": {"int": i}, "minor": {"int": i}, "pcieBusID": bus})
    body = slice_manifest(node, node_uid, devs, 1)
    body["metadata"]["name"] = f"{node}-{dra.DRIVER}-v25.3"
    body["spec"]["pool"]["name"] = f"{node}-v25.3"
    return body


def _without_mig(group: profiles.NodeGroup) -> profiles.NodeGroup:
    return dataclasses.replace(group, mig_config=profiles.MIG_DISABLED)


def slice_manifest(node: str, node_uid: str | None, devs: list[dict], count: int,
                   generation: int = 1) -> dict:
    spec = {"driver": dra.DRIVER, "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
            "devices": devs}
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    metadata: dict = {"name": f"{node}-{dra.DRIVER}-sim", "labels": {OWNER_LABEL: "true"},
                      "annotations": {HASH_ANNOTATION: digest}}
    if node_uid:  # as the kubelet plugin does: the slice goes with its node
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node,
                                        "uid": node_uid, "controller": True}]
    return {"apiVersion": dra.RESOURCE_API, "kind": "ResourceSlice", "metadata": metadata,
            "spec": spec}


def node_slices(faults: list[str], group: profiles.NodeGroup, node: str, node_uid: str | None,
                first: bool) -> list[dict]:
    """The ResourceSlices of ``node``'s pool with the faults that break it (``first``: the
    first DRA node, the one the faults play on), and the stale pool dra-stale-pool leaves."""
    devs, count = _with_faults(faults, group, node, devices(group, node), first)
    bodies = [slice_manifest(node, node_uid, devs, count)]
    if first and "dra-stale-pool" in faults:
        bodies.append(stale_slice(group, node, node_uid))
    return bodies


def device_classes(faults: list[str]) -> list[dict]:
    out = []
    for known in dra.DEVICE_CLASSES:
        if known.compute_domains:  # resources.computeDomains.enabled=false
            continue
        body = known.manifest()
        body["metadata"]["labels"] = {OWNER_LABEL: "true",
                                      "app.kubernetes.io/managed-by": "Helm"}
        if known is dra.GPU_CLASS and "dra-class-selector-wrong" in faults:
            body["spec"]["selectors"] = [{"cel": {"expression": WRONG_SELECTOR}}]
        out.append(body)
    return out


@dataclasses.dataclass(frozen=True)
class PluginLayout:
    """Where the kubelet plugin DaemonSet lives and how it labels its pods: the chart's
    (templates/kubeletplugin.yaml) or the GPUCluster's (gpu-operator
    manifests/state-dra-driver/0500_daemonset.yaml)."""

    namespace: str
    name: str
    selector: Mapping[str, str]
    labels: Mapping[str, str]  # on the DaemonSet and its pods, besides the selector


CHART_PLUGIN = PluginLayout(
    NAMESPACE, PLUGIN_DS, {"app.kubernetes.io/name": CHART_NAME, COMPONENT_LABEL: "kubelet-plugin"},
    {"app.kubernetes.io/instance": RELEASE, "helm.sh/chart": f"{CHART_NAME}-{CHART_VERSION}",
     "app.kubernetes.io/version": CHART_VERSION})


def gpucluster_plugin(namespace: str) -> PluginLayout:
    op = dra.GPUCLUSTER_OPERANDS[0]  # dra-kubelet-plugin
    return PluginLayout(namespace, op.name, {"app": op.app},
                        {"app.kubernetes.io/name": "nvidia-dra-driver",
                         "app.kubernetes.io/component": op.name})


def plugin_layout(state) -> PluginLayout:
    """The kubelet plugin of ``state``'s stack."""
    if state.resolve_profile().stack == "gpu-cluster":
        return gpucluster_plugin(state.operator_namespace)
    return CHART_PLUGIN


def plugin_daemonset(layout: PluginLayout = CHART_PLUGIN) -> dict:
    pod_labels = {**layout.selector, **layout.labels, OWNER_LABEL: "true"}
    pod_labels.pop("helm.sh/chart", None)
    pod_labels.pop("app.kubernetes.io/version", None)
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": layout.name, "namespace": layout.namespace,
                     "labels": {**layout.selector, **layout.labels, OWNER_LABEL: "true"}},
        "spec": {
            "selector": {"matchLabels": dict(layout.selector)},
            "updateStrategy": {"type": "RollingUpdate",
                               "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {"metadata": {"labels": pod_labels}, "spec": {
                "nodeSelector": {dra.DEPLOY_DRA_DRIVER: "true"},
                "tolerations": [copy.deepcopy(t) for t in operands.DEFAULT_TOLERATIONS],
                "priorityClassName": "system-node-critical",
                "containers": [{"name": dra.GPU_CONTAINER, "image": IMAGE}]}},
        },
    }


def sharing_template() -> dict:
    """A team's claim template asking for MPS with an impossible thread percentage."""
    config = dra.gpu_config("MPS", defaultActiveThreadPercentage=150)
    return {"apiVersion": dra.RESOURCE_API, "kind": "ResourceClaimTemplate",
            "metadata": {"name": SHARING_TEMPLATE, "namespace": SHARING_NAMESPACE,
                         "labels": {OWNER_LABEL: "true"}},
            "spec": {"spec": {"devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": dra.GPU_CLASS.name}}],
                "config": [{"opaque": {"driver": dra.DRIVER, "parameters": config}}]}}}}


def dra_nodes(profile: profiles.Profile, faults: list[str]) -> Iterator[tuple[profiles.NodeGroup,
                                                                             str, bool]]:
    """(group, node, is the first DRA node) of every node the plugin runs on: the DRA groups'
    nodes, plus the first device plugin node under dra-both-paths."""
    first = True
    for group, _i, name in profile.iter_nodes():
        if group.is_gpu and group.allocation == "dra":
            yield group, name, first
            first = False
    if "dra-both-paths" in faults:
        plugin_node = next(((g, n) for g, _i, n in profile.iter_nodes()
                            if g.is_gpu and g.allocation != "dra"), None)
        if plugin_node:
            yield plugin_node[0], plugin_node[1], False


def wanted(profile: profiles.Profile) -> bool:
    """Whether the profile has nodes the DRA driver serves (else it is not installed)."""
    return any(g.allocation == "dra" for g in profile.gpu_groups)
