"""How each DRA fault shows in the API, read through the API server (never from the
stand-in's own variables); ``test_sim_profiles_and_faults.py`` checks each appears with its
fault and not without it."""

from __future__ import annotations

from conformance.nvidia import dra
from conformance.sim import dra_plan


def _slices(c) -> list[dict]:
    return c.custom.list_cluster_custom_object(dra.RESOURCE_GROUP, dra.RESOURCE_VERSION,
                                               "resourceslices").get("items", [])


def _devices(c):
    for s in _slices(c):
        for d in s["spec"].get("devices") or []:
            yield s, d


def _incomplete(c) -> bool:
    pools: dict[str, list[dict]] = {}
    for s in _slices(c):
        pools.setdefault(s["spec"]["pool"]["name"], []).append(s)
    return any(len(members) < members[0]["spec"]["pool"]["resourceSliceCount"]
               for members in pools.values())


def _plugin_without_slice(c) -> bool:
    sliced = {s["spec"].get("nodeName") for s in _slices(c)}
    pods = c.core.list_namespaced_pod(dra_plan.NAMESPACE).items
    return any(p.spec.node_name and p.spec.node_name not in sliced and p.status.phase == "Running"
               for p in pods)


def _mig_beside_parent(c) -> bool:
    for s in _slices(c):
        devices = s["spec"].get("devices") or []
        uuids = {d["attributes"]["uuid"]["string"] for d in devices
                 if d["attributes"]["type"]["string"] == "gpu"}
        if any(d["attributes"].get("parentUUID", {}).get("string") in uuids for d in devices):
            return True
    return False


def _both_paths(c) -> bool:
    sliced = {s["spec"].get("nodeName") for s in _slices(c)}
    return any(n.metadata.name in sliced and int((n.status.capacity or {}).get(
        "nvidia.com/gpu", 0)) > 0 for n in c.core.list_node().items)


def _gpu_class_selector(c) -> str:
    obj = c.custom.get_cluster_custom_object(dra.RESOURCE_GROUP, dra.RESOURCE_VERSION,
                                             "deviceclasses", dra.GPU_CLASS.name)
    return obj["spec"]["selectors"][0]["cel"]["expression"]


def _sharing_template(c) -> bool:
    items = c.custom.list_namespaced_custom_object(
        dra.RESOURCE_GROUP, dra.RESOURCE_VERSION, dra_plan.SHARING_NAMESPACE,
        "resourceclaimtemplates").get("items", [])
    return any(i["metadata"]["name"] == dra_plan.SHARING_TEMPLATE for i in items)


def _gpucluster_not_ready(c) -> bool:
    obj = c.custom.get_cluster_custom_object(*dra.GPUCLUSTER_API, dra.GPUCLUSTER_NAME)
    return (obj.get("status") or {}).get("state") == "notReady"


DRA_SYMPTOMS = {
    "dra-pool-incomplete": _incomplete,
    "dra-version-not-semver": _plugin_without_slice,
    "dra-attributes-disagree": lambda c: any(
        s["spec"]["nodeName"].startswith("dra-a100") and "H100" in d["attributes"][
            "productName"]["string"] for s, d in _devices(c)),
    "dra-stale-pool": lambda c: any("index" in d["attributes"] for _s, d in _devices(c)),
    "dra-mig-parent-offered": _mig_beside_parent,
    "dra-class-selector-wrong": lambda c: "== 'GPU'" in _gpu_class_selector(c),
    "dra-both-paths": _both_paths,
    "dra-sharing-config-invalid": _sharing_template,
    "dra-gpucluster-operand-down": _gpucluster_not_ready,
}
