"""The NVIDIA DRA driver stand-in: what ``gpu.nvidia.com`` would write on simulated nodes.

What to write is worked out in ``dra_plan`` (from the profile and faults alone); this module
writes it through the real API server only, so the real kube-scheduler allocates real
ResourceClaims against it (KWOK runs no kubelet plugin: nothing is prepared on a node).

Pools follow the objects a user controls: a node gets a pool when it carries the plugin's node
label and the DaemonSet exists; remove either and its pool goes. ``reconcile`` runs with ``sim
up``/``sim set``; ``control_once`` from the stand-in's controller loop.
"""

from __future__ import annotations

import logging
import time

from conformance.cluster import namespaces, rollout
from conformance.cluster.client import (
    Cluster,
    Conflict,
    Invalid,
    NotFound,
    already_done,
    read_or_none,
)
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.common.console import Progress
from conformance.nvidia import dra
from conformance.sim import objects, profiles
from conformance.sim.dra_plan import (
    CHART_PLUGIN,
    HASH_ANNOTATION,
    NAMESPACE,
    OWNER_LABEL,
    SHARING_NAMESPACE,
    PluginLayout,
    device_classes,
    dra_nodes,
    node_slices,
    plugin_daemonset,
    plugin_layout,
    sharing_template,
    wanted,
)

log = logging.getLogger("gpuconf.standin.dra")

# A plugin pod on every DRA node of a 500-node profile: bounded like the operands' rollout.
ROLLOUT_BASE_S, ROLLOUT_PER_NODE_S = 60.0, 0.5
LOOP_PERIOD_S = 5.0  # the loop may pass every second; listing 500 slices every 5 s is enough

_last_pass = 0.0


def reconcile(cluster: Cluster, state, progress: Progress = lambda _m: None) -> None:
    """Write (or remove) the DRA driver of ``state``'s profile and faults, then wait until its
    kubelet plugin runs on every DRA node."""
    profile = state.resolve_profile()
    faults = list(state.faults)
    if not wanted(profile):
        _remove(cluster)
        return
    layout = plugin_layout(state)
    progress("playing the NVIDIA DRA driver (DeviceClasses, kubelet plugin, ResourceSlices)")
    if layout is CHART_PLUGIN:
        objects.ensure_namespace(cluster, NAMESPACE, {OWNER_LABEL: "true"})
    else:  # the GPUCluster's operand: the chart's install goes, the operator's namespace stays
        _remove_chart_plugin(cluster)
        objects.ensure_namespace(cluster, layout.namespace)
    for body in device_classes(faults):
        _apply_cluster_object(cluster, "deviceclasses", body)
    _label_nodes(cluster, {n for _g, n, _f in dra_nodes(profile, faults)})
    body = plugin_daemonset(layout)
    objects.apply_daemonset(cluster, layout.namespace, body)
    _sync_slices(cluster, profile, faults, layout)
    _ensure_sharing_template(cluster, "dra-sharing-config-invalid" in faults)
    _wait_plugin(cluster, profile, faults, layout, progress)


def control_once(cluster: Cluster, state) -> None:
    """The driver between resets: pools follow the plugin's node label and DaemonSet."""
    global _last_pass
    profile = state.resolve_profile()
    if not wanted(profile) or time.monotonic() - _last_pass < LOOP_PERIOD_S:
        return
    _last_pass = time.monotonic()
    _sync_slices(cluster, profile, list(state.faults), plugin_layout(state))


def _sync_slices(cluster: Cluster, profile: profiles.Profile, faults: list[str],
                 layout: PluginLayout) -> None:
    groups = {n: (g, first) for g, n, first in dra_nodes(profile, faults)}
    plugin = read_or_none(cluster.apps.read_namespaced_daemon_set, layout.name,
                          layout.namespace) is not None
    labelled = {n.metadata.name: n.metadata.uid for n in cluster.core.list_node(
        label_selector=f"{dra.DEPLOY_DRA_DRIVER}=true").items}
    existing = {s["metadata"]["name"]: s for s in cluster.custom.list_cluster_custom_object(
        dra.RESOURCE_GROUP, dra.RESOURCE_VERSION, "resourceslices",
        label_selector=f"{OWNER_LABEL}=true").get("items", [])}
    keep = set()
    for node, uid in sorted(labelled.items()):
        if not plugin or node not in groups:
            continue
        group, first = groups[node]
        for body in node_slices(faults, group, node, uid, first):
            name = body["metadata"]["name"]
            keep.add(name)
            current = existing.get(name)
            if current is not None and (current["metadata"].get("annotations") or {}).get(
                    HASH_ANNOTATION) == body["metadata"]["annotations"][HASH_ANNOTATION]:
                continue
            _publish(cluster, body, current)
    for name in set(existing) - keep:
        with already_done(NotFound):
            cluster.custom.delete_cluster_custom_object(
                dra.RESOURCE_GROUP, dra.RESOURCE_VERSION, "resourceslices", name)


def _publish(cluster: Cluster, body: dict, current: dict | None) -> None:
    """Create the slice, or replace it with the pool's generation bumped (as the plugin does
    when its devices change). A slice the API server refuses is logged, as the plugin logs it."""
    group, version = dra.RESOURCE_GROUP, dra.RESOURCE_VERSION
    try:
        if current is None:
            cluster.custom.create_cluster_custom_object(group, version, "resourceslices", body)
            return
        body["spec"]["pool"]["generation"] = int(
            current["spec"]["pool"].get("generation") or 0) + 1
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        cluster.custom.replace_cluster_custom_object(group, version, "resourceslices",
                                                     body["metadata"]["name"], body)
    except (Conflict, Invalid) as exc:
        if isinstance(exc, Invalid) and current is not None:  # the old, valid slice goes too
            with already_done(NotFound):
                cluster.custom.delete_cluster_custom_object(group, version, "resourceslices",
                                                            body["metadata"]["name"])
        log.warning("ResourceSlice %s refused: %s %s", body["metadata"]["name"], exc.status,
                    (exc.body or "")[:300])


def _label_nodes(cluster: Cluster, nodes: set[str]) -> None:
    for node in cluster.core.list_node().items:
        have = (node.metadata.labels or {}).get(dra.DEPLOY_DRA_DRIVER)
        want = "true" if node.metadata.name in nodes else None
        if have != want:
            cluster.core.patch_node(node.metadata.name,
                                    {"metadata": {"labels": {dra.DEPLOY_DRA_DRIVER: want}}})


def _wait_plugin(cluster: Cluster, profile: profiles.Profile, faults: list[str],
                 layout: PluginLayout, progress: Progress) -> None:
    expected = len(list(dra_nodes(profile, faults)))
    timeout = ROLLOUT_BASE_S + ROLLOUT_PER_NODE_S * expected

    def rolled_out() -> bool:
        r = rollout.DaemonSetRollout.of(
            cluster.apps.read_namespaced_daemon_set(layout.name, layout.namespace))
        return r.desired == expected and r.done

    progress(f"waiting for the DRA kubelet plugin on {expected} node(s)")
    try:
        wait_for(f"DaemonSet {layout.namespace}/{layout.name} on {expected} node(s)", rolled_out,
                 timeout=timeout, interval=0.5)
    except WaitTimeout as exc:
        from conformance.common.errors import NotConverged

        raise NotConverged(str(exc)) from None


def _remove(cluster: Cluster) -> None:
    """No DRA in this profile: the chart uninstalled (classes, plugin, slices, labels)."""
    group, version = dra.RESOURCE_GROUP, dra.RESOURCE_VERSION
    try:
        classes = cluster.custom.list_cluster_custom_object(
            group, version, "deviceclasses", label_selector=f"{OWNER_LABEL}=true")["items"]
    except NotFound:  # resource.k8s.io/v1 not served: nothing was written
        return
    for body in classes:
        with already_done(NotFound):
            cluster.custom.delete_cluster_custom_object(group, version, "deviceclasses",
                                                        body["metadata"]["name"])
    for body in cluster.custom.list_cluster_custom_object(
            group, version, "resourceslices", label_selector=f"{OWNER_LABEL}=true")["items"]:
        with already_done(NotFound):
            cluster.custom.delete_cluster_custom_object(group, version, "resourceslices",
                                                        body["metadata"]["name"])
    _label_nodes(cluster, set())
    for ns in (NAMESPACE, SHARING_NAMESPACE):  # gone in the background; a new install waits
        if _exists(cluster, ns):
            namespaces.delete_namespace(cluster, ns)


def _remove_chart_plugin(cluster: Cluster) -> None:
    """The chart's install (its namespace, its kubelet plugin with it) goes when the
    GPUCluster runs the plugin; the GPUCluster's operand goes with the GPUCluster."""
    if _exists(cluster, NAMESPACE):
        namespaces.delete_namespace(cluster, NAMESPACE)


def _ensure_sharing_template(cluster: Cluster, wanted_: bool) -> None:
    if not wanted_:
        if _exists(cluster, SHARING_NAMESPACE):
            namespaces.delete_namespace(cluster, SHARING_NAMESPACE)
        return
    objects.ensure_namespace(cluster, SHARING_NAMESPACE, {OWNER_LABEL: "true"})
    with already_done(Conflict):
        cluster.custom.create_namespaced_custom_object(
            dra.RESOURCE_GROUP, dra.RESOURCE_VERSION, SHARING_NAMESPACE,
            "resourceclaimtemplates", sharing_template())


def _exists(cluster: Cluster, ns: str) -> bool:
    """Whether ``ns`` exists and is not already on its way out."""
    return objects.namespace_phase(cluster, ns) not in (None, "Terminating")


def _apply_cluster_object(cluster: Cluster, plural: str, body: dict) -> None:
    group, version = dra.RESOURCE_GROUP, dra.RESOURCE_VERSION
    name = body["metadata"]["name"]
    current = read_or_none(cluster.custom.get_cluster_custom_object, group, version, plural,
                           name)
    if current is None:
        cluster.custom.create_cluster_custom_object(group, version, plural, body)
        return

    if current.get("spec") != body["spec"]:
        body = {**body, "metadata": {**body["metadata"],
                                     "resourceVersion": current["metadata"]["resourceVersion"]}}
        cluster.custom.replace_cluster_custom_object(group, version, plural, name, body)
