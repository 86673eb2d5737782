"""Faults made in the real node's components, for ``test_node_fault_matrix.py``.

Each fault breaks a real part the way it breaks in a cluster (a DaemonSet deleted, a plugin
that exits on a flag it rejects, a sharing config the plugin refuses, GFD stopped while the
plugin changes, a CDI spec gone, a GPU lost in NVML), waits until the node shows it, and is
undone by :func:`restore`: the chart upgraded back to the node's own values (Helm's three-way
merge puts back what was deleted or patched), the mock NVML's overrides removed, the plugin and
GFD pods restarted, and the node's GPUs advertised again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from conformance.cluster.waits import wait_until_done
from conformance.common.errors import NotConverged
from conformance.controlplane.components import REAL_NODE_LABEL
from conformance.node import chart as chartmod
from conformance.node import gpu, lifecycle
from conformance.node.configs import CDI_RUN_DIR
from conformance.node.state import KUBELET_ROOT, NodeState

PLUGIN_DS = f"{chartmod.RELEASE}-nvidia-device-plugin"
GFD_DS = f"{chartmod.RELEASE}-nvidia-device-plugin-gpu-feature-discovery"
PLUGIN_SOCKET = KUBELET_ROOT / "device-plugins" / "nvidia-gpu.sock"
KUBELET_SOCKET = KUBELET_ROOT / "device-plugins" / "kubelet.sock"  # where plugins register
SYMPTOM_TIMEOUT_S = 120.0  # a crash loop shows within ~30 s, a ConfigMap change in a pod ~60 s
LOST_GPU = 7  # the mock's last GPU of the 8xH100 profile

TIME_SLICING_4 = ("version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n"
                  "    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n")
NO_SHARING = "version: v1\nflags:\n  migStrategy: none\n"
# replicas must be >= 2 (the plugin's config API): the plugin exits on this config
REJECTED = ("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
            "    - name: nvidia.com/gpu\n      replicas: 1\n")


@dataclass
class Ctx:
    """The node a fault is made on."""

    name: str  # the node's (and control plane's) name
    api: client.ApiClient

    @property
    def state(self) -> NodeState:
        state = NodeState.load(self.name)
        assert state is not None, f"node {self.name} is not up"
        return state

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    def allocatable(self) -> dict[str, str]:
        return self.core.read_node(self.state.node_name).status.allocatable or {}

    def pods(self, prefix: str) -> list[client.V1Pod]:
        """The chart's pods of one DaemonSet (``prefix-<hash>``, not a longer DaemonSet name)."""
        return [p for p in self.core.list_namespaced_pod(chartmod.NAMESPACE).items
                if p.metadata.name.rsplit("-", 1)[0] == prefix]

    def delete_pods(self, prefix: str) -> None:
        for p in self.pods(prefix):
            self.core.delete_namespaced_pod(p.metadata.name, chartmod.NAMESPACE,
                                            grace_period_seconds=0)

    def restarts(self, prefix: str) -> int:
        return sum(s.restart_count for p in self.pods(prefix)
                   for s in p.status.container_statuses or [])

    def wait(self, what: str, check: Callable[[], str | None]) -> None:
        wait_until_done(what, check, timeout=SYMPTOM_TIMEOUT_S, progress=lambda _m: None,
                        error=NotConverged)


def _no_gpus(ctx: Ctx) -> str | None:
    have = ctx.allocatable().get("nvidia.com/gpu", "0")
    return None if have == "0" else f"allocatable nvidia.com/gpu={have}"


def _daemonset_left(ctx: Ctx, name: str) -> str | None:
    left = [d.metadata.name for d in ctx.apps.list_namespaced_daemon_set(chartmod.NAMESPACE).items
            if d.metadata.name == name]
    return f"DaemonSet {name} still there" if left else None


def _gpus_advertised(ctx: Ctx) -> str | None:
    have = ctx.allocatable().get("nvidia.com/gpu", "0")
    return None if have != "0" else "allocatable nvidia.com/gpu=0 (the plugin not registered yet)"


def _crash_looping(prefix: str) -> Callable[[Ctx], str | None]:
    def check(ctx: Ctx) -> str | None:
        n = ctx.restarts(prefix)
        return None if n >= 2 else f"{prefix} restarted {n} time(s)"
    return check


# ---- the faults --------------------------------------------------------------------------------
def delete_plugin_daemonset(ctx: Ctx) -> None:
    ctx.apps.delete_namespaced_daemon_set(PLUGIN_DS, chartmod.NAMESPACE,
                                          propagation_policy="Foreground")
    # Foreground: the DaemonSet object stays (deletionTimestamp set) until its pod is gone
    ctx.wait("the device plugin's DaemonSet and pod gone and its GPUs unallocatable",
             lambda: _no_gpus(ctx) or _daemonset_left(ctx, PLUGIN_DS))


def plugin_rejects_its_flags(ctx: Ctx) -> None:
    """The plugin started with a device list strategy it does not know: it exits at start."""
    lifecycle.reconfigure(ctx.name, chart_values={"deviceListStrategy": "no-such-strategy"},
                          wait=False)
    ctx.wait("the device plugin crash-looping", lambda: _crash_looping(PLUGIN_DS)(ctx)
             or _no_gpus(ctx))


def plugin_socket_removed(ctx: Ctx) -> None:
    """The plugin's socket in the kubelet's device-plugins folder deleted (a node cleanup
    script, a kubelet root on tmpfs): the kubelet can no longer reach the plugin."""
    PLUGIN_SOCKET.unlink()


def kubelet_socket_removed(ctx: Ctx) -> None:
    """The kubelet's registration socket deleted, then the plugin restarted (an upgrade, an
    eviction): the plugin cannot register its resource again."""
    KUBELET_SOCKET.unlink()
    ctx.delete_pods(PLUGIN_DS)
    ctx.wait("the plugin unable to register", lambda: _no_gpus(ctx))


def sharing_config_rejected(ctx: Ctx) -> None:
    """Time-slicing 4 running, then a config the plugin refuses (replicas: 1): the plugin and
    GFD exit on it; the kubelet keeps the last capacity, with nothing allocatable."""
    lifecycle.reconfigure(ctx.name, chart_values={"config": {
        "default": "default", "map": {"default": TIME_SLICING_4}}}, progress=lambda _m: None)
    lifecycle.reconfigure(ctx.name, chart_values={"config": {
        "default": "default", "map": {"default": REJECTED}}}, wait=False)
    ctx.wait("the device plugin and GFD refusing their sharing config",
             lambda: _crash_looping(PLUGIN_DS)(ctx) or _crash_looping(GFD_DS)(ctx)
             or _no_gpus(ctx))


def gfd_stopped_labels_stale(ctx: Ctx) -> None:
    """GFD stopped (its DaemonSet selects no node), then the plugin's sharing config changed
    in the chart's ConfigMap: the plugin advertises 4 replicas, GFD's labels still say none."""
    lifecycle.reconfigure(ctx.name, chart_values={"config": {  # the chart's ConfigMap, no sharing
        "default": "default", "map": {"default": NO_SHARING}}}, progress=lambda _m: None)
    ctx.apps.patch_namespaced_daemon_set(GFD_DS, chartmod.NAMESPACE, {"spec": {"template": {
        "spec": {"nodeSelector": {REAL_NODE_LABEL: "false"}}}}})
    ctx.wait("GFD stopped", lambda: None if not ctx.pods(GFD_DS) else "a GFD pod still runs")
    name = f"{PLUGIN_DS}-configs"
    ctx.core.patch_namespaced_config_map(name, chartmod.NAMESPACE, {"data": {
        "default": TIME_SLICING_4}})
    ctx.delete_pods(PLUGIN_DS)  # the new pod reads the new config at once
    want = str(4 * ctx.state.gpu["count"])
    ctx.wait("the plugin advertising 4 replicas", lambda: None if ctx.allocatable().get(
        "nvidia.com/gpu") == want else f"allocatable {ctx.allocatable().get('nvidia.com/gpu')}")


def cdi_spec_removed(ctx: Ctx) -> None:
    """The plugin's CDI spec deleted: containerd cannot resolve the devices it hands out."""
    specs = list(Path(CDI_RUN_DIR).glob("k8s.device-plugin.nvidia.com-*"))
    assert specs, f"no CDI spec of the plugin in {CDI_RUN_DIR}"
    for spec in specs:
        spec.unlink()


def gpu_lost(ctx: Ctx) -> None:
    """The mock NVML's failure injection: GPU 7 lost (ERROR_GPU_IS_LOST from its first
    query on) under a running node. GFD, restarted, fails on it; the running plugin goes on
    (its health check waits for Xid events and never queries the GPU). The plugin is not
    restarted here: a second restart right after ``restore``'s raced the kubelet, which kept
    the resource at 0 allocatable for minutes (seen in CI; not the fault under test)."""
    gpu.write_mock_overrides(Path(ctx.state.gpu["driver_root"]),
                             {LOST_GPU: {"failure": {"mode": "lost"}}})
    ctx.delete_pods(GFD_DS)
    ctx.wait("GFD failing on the lost GPU, the plugin still advertising its GPUs",
             lambda: _crash_looping(GFD_DS)(ctx) or _gpus_advertised(ctx))


# what needs a GPU the kubelet can hand out: every check that places or starts a GPU pod
_NO_ALLOCATABLE_GPUS = frozenset({"STACK-DP-002", "STACK-TK-002", "SCHED-ALLOC-001",
                                  "SCHED-ALLOC-002", "SCHED-LAT-001", "SCHED-PLACE-001",
                                  "SCHED-PLACE-002"})


@dataclass(frozen=True)
class NodeFault:
    """A fault made in the node's real components, and exactly what a run of the stack,
    scheduling and sharing suites must fail under it (a word their diagnoses name)."""

    name: str
    play: Callable[[Ctx], None]
    fails: frozenset[str]
    word: str


FAULTS: dict[str, NodeFault] = {f.name: f for f in (
    NodeFault("device-plugin-daemonset-deleted", delete_plugin_daemonset,
              _NO_ALLOCATABLE_GPUS | {"STACK-DP-001"}, "device plugin"),
    NodeFault("device-plugin-crashloop", plugin_rejects_its_flags,
              _NO_ALLOCATABLE_GPUS | {"STACK-DP-001", "STACK-OPD-002"}, "device plugin"),
    # the kubelet keeps its connection to a running plugin: nothing breaks (the suites pass)
    NodeFault("device-plugin-socket-removed", plugin_socket_removed, frozenset(), ""),
    # the plugin runs (its DaemonSet is rolled out) but cannot register its resource
    NodeFault("kubelet-socket-removed", kubelet_socket_removed, _NO_ALLOCATABLE_GPUS,
              "device plugin"),
    NodeFault("sharing-config-rejected", sharing_config_rejected,
              _NO_ALLOCATABLE_GPUS | {"SHARE-CFG-001", "SHARE-OVS-001", "STACK-DP-001",
                                      "STACK-GFD-001", "STACK-OPD-002"}, "sharing config"),
    NodeFault("gfd-stopped-labels-stale", gfd_stopped_labels_stale,
              frozenset({"STACK-GFD-001", "SHARE-LBL-001"}), "Feature Discovery"),
    NodeFault("cdi-spec-removed", cdi_spec_removed, frozenset({"STACK-TK-002"}), "toolkit"),
    NodeFault("mock-nvml-gpu-lost", gpu_lost, frozenset({"STACK-GFD-001", "STACK-OPD-002"}),
              "Feature Discovery"),
)}


def _replace_pods(ctx: Ctx, prefix: str) -> None:
    """Delete a DaemonSet's pods gracefully and wait until they are gone: their objects go
    only once the kubelet has stopped their containers, so nothing of the old pods runs on
    after this (the DaemonSet's new pod may already be starting)."""
    old = {p.metadata.uid for p in ctx.pods(prefix)}
    for p in ctx.pods(prefix):
        ctx.core.delete_namespaced_pod(p.metadata.name, chartmod.NAMESPACE)

    def gone() -> str | None:
        left = old & {p.metadata.uid for p in ctx.pods(prefix)}
        return f"{len(left)} old {prefix} pod(s) still stopping" if left else None
    ctx.wait(f"the old {prefix} pods stopped", gone)


def _plugin_socket_back(ctx: Ctx) -> str | None:
    if not PLUGIN_SOCKET.exists():
        return f"no {PLUGIN_SOCKET.name} in {PLUGIN_SOCKET.parent}"
    return _gpus_advertised(ctx)


def restore(ctx: Ctx) -> float:
    """Undo any fault above; the seconds it took. The node is as ``up`` left it after this:
    the chart at the node's own values, rolled out, its GPUs advertised through the plugin's
    socket, GFD's labels on."""
    t0 = time.monotonic()
    gpu.write_mock_overrides(Path(ctx.state.gpu["driver_root"]), None)
    if not KUBELET_SOCKET.exists():  # only the kubelet makes it, when it starts
        lifecycle.restart_kubelet(ctx.name, progress=lambda _m: None)
    _replace_pods(ctx, PLUGIN_DS)  # a fresh plugin writes its CDI spec and socket again
    _replace_pods(ctx, GFD_DS)
    lifecycle.reconfigure(ctx.name, chart_values={}, progress=lambda _m: None)
    if not PLUGIN_SOCKET.exists():
        # The new plugin made its socket before the old one, stopping, removed it (the old
        # plugin deletes its socket path on SIGTERM; seen in CI right after a kubelet
        # restart). The kubelet still talks to the new plugin, but the node is not whole.
        # The one plugin left makes its socket again when the kubelet's registration socket
        # is new (the plugin watches for it), so the kubelet is restarted once more.
        lifecycle.restart_kubelet(ctx.name, progress=lambda _m: None)
    ctx.wait("the plugin's socket back and its GPUs advertised",
             lambda: _plugin_socket_back(ctx))
    return time.monotonic() - t0
