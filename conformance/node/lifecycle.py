"""``node up | down | status``: the sim's control plane plus this machine as a real node.

``up`` starts the control plane (etcd, API server, controller manager, scheduler, KWOK for any
simulated nodes) and, meanwhile, the node: containerd with runc and the CNI bridge, the node's
images imported, the GPUs (mock NVML or the real driver) described by nvidia-ctk's CDI spec. The
kubelet then joins through a bootstrap token and the upstream device plugin chart (GFD, NFD)
is installed with Helm. ``up`` returns once the node is Ready, the NVIDIA DaemonSets are rolled
out, ``nvidia.com/gpu`` is allocatable and GFD's labels are on the node.

Every host change is recorded in the node's state before it is made, so ``down`` (and the
cleanup of a failed or interrupted ``up``) removes exactly what was made: processes by PID,
mounts below the node's folders, the bridge, the Service address, sysctls, cgroups, host paths.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conformance.binaries import binaries
from conformance.cluster import rollout
from conformance.cluster.client import connect
from conformance.cluster.waits import wait_for_process, wait_until_done
from conformance.common import interrupts
from conformance.common.console import Progress
from conformance.common.errors import ComponentFailed, NotConverged, UsageError
from conformance.common.processes import log_tail
from conformance.controlplane.components import (
    KUBERNETES_SERVICE_IP,
    REAL_NODE_LABEL,
    ClusterState,
    ControlPlane,
)
from conformance.node import chart as chartmod
from conformance.node import (
    configs,
    containerd,
    gateway,
    gpu,
    host,
    images,
    kube,
    procs,
    prometheus,
)
from conformance.node.state import (
    HOST_PATHS,
    KUBELET_ROOT,
    MPS_ROOT,
    RUN_ROOT,
    NodeState,
    nodes_dir,
)
from conformance.nvidia import labels as L
from conformance.nvidia.labels import gpu_resource_of

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # holds conformance/ (the relay imports it)
DEFAULT_GPU_PROFILE = "8xH100"
GPU_SOURCE_ANNOTATION = "node.gpuconf.io/gpu-source"  # "mock-nvml 8xH100" or "driver"
MOCK_NVML = gpu.MOCK_NVML
GPU_INJECTIONS = ("cdi", chartmod.RUNTIME_INJECTION)
# Waits. Measured here (2 cores): the node is Ready ~10 s after the kubelet starts, the chart's
# DaemonSets roll out in ~20 s. The limits leave room on a loaded CI machine without hiding a
# hang.
NODE_READY_TIMEOUT_S = 120.0
ROLLOUT_TIMEOUT_S = 240.0
GPUS_TIMEOUT_S = 120.0


# ---- public API -----------------------------------------------------------------------------
def up(name: str = "gpuconf", *, gpu_profile: str | None = None, driver_root: str | None = None,
       dev_root: str | None = None, nvidia_src: str | None = None,
       chart_values: dict | None = None, gpu_injection: str | None = None,
       allow_compute_mode_change: bool = False, progress: Progress = print) -> NodeState:
    """Bring the node up (see the module docstring); raises UsageError for bad input or a host
    that cannot run a node (before anything starts), ComponentFailed / NotConverged when a
    component does not come up (after removing what was created).

    ``chart_values`` are merged over the node's own chart values (e.g. a time-slicing
    ``config.map``, which the image's config-manager applies as upstream's does).
    ``gpu_injection``: "cdi" (pods get their GPUs from the plugin's CDI spec, plain runc) or
    "runtime" (the plugin's NVIDIA_VISIBLE_DEVICES, the NVIDIA runtime as containerd's
    default, as the GPU Operator sets a node up); None: :func:`choose_injection`.
    ``allow_compute_mode_change``: chart values that configure MPS on real GPUs are refused
    without it (:func:`chart.refuse_unasked_compute_mode_change`)."""
    t_start = time.monotonic()
    if gpu_injection is not None and gpu_injection not in GPU_INJECTIONS:
        raise UsageError(f"GPU injection {gpu_injection!r}: one of {', '.join(GPU_INJECTIONS)}")
    chartmod.refuse_unasked_compute_mode_change(chart_values or {}, real_gpus=bool(driver_root),
                                                allowed=allow_compute_mode_change)
    gpu_injection = choose_injection(gpu_injection, driver_root, progress)
    plane = ControlPlane(name)  # validates the name
    chart, nb, profile = check_inputs(gpu_profile=gpu_profile, driver_root=driver_root,
                                      dev_root=dev_root, nvidia_src=nvidia_src)
    _refuse_what_runs(name, plane, progress)
    f = _preflight(nb)
    state = _new_state(name, f, progress)

    def mark(step: str) -> None:
        state.timings[step] = round(time.monotonic() - t_start, 1)
        state.save()

    try:
        cp_state = _start_with_control_plane(
            plane, progress,
            lambda: _node_side(state, f, nb, profile, gpu_injection,
                               driver_root, dev_root, progress, mark))
        mark("control_plane_ready")
        _join(state, cp_state, nb, progress)
        mark("node_ready")
        prometheus.start(state, cp_state, connect(str(cp_state.kubeconfig)), progress)
        mark("prometheus_ready")
        gateway.start(state, cp_state, connect(str(cp_state.kubeconfig)), progress)
        mark("gateway_ready")
        _install_chart(state, cp_state, nb, chart, chart_values or {}, progress)
        mark("daemonsets_rolled_out")
        _wait_gpus(state, cp_state, progress)
        mark("gpus_advertised")
    except BaseException:
        _remove_failed(state, progress)
        raise
    state.phase = "ready"
    mark("total")
    progress(f"node {state.node_name} Ready in {state.timings['node_ready']:.0f}s, NVIDIA "
             f"DaemonSets rolled out at {state.timings['daemonsets_rolled_out']:.0f}s, "
             f"{_gpu_words(state)} at {state.timings['total']:.0f}s; "
             f"kubeconfig {state.kubeconfig}")
    return state


def _remove_failed(state: NodeState, progress: Progress) -> None:
    """After a failed or interrupted up: everything it created goes, its logs stay."""
    with interrupts.deferred():
        progress(f"node up failed: removing what it created (logs kept in {state.logs})")
        state.phase = "failed"
        state.save()
        down(state.name, progress=progress, keep_logs=True)


def _refuse_what_runs(name: str, plane: ControlPlane, progress: Progress) -> None:
    """A UsageError when this node, another node or a cluster of this name runs on the host;
    what an interrupted run of this node left is removed."""
    existing = NodeState.load(name)
    if existing is not None:
        if any(procs.pid_alive(p) and procs.runs(p, existing.binaries.get(c, ""))
               for c, p in existing.pids.items()):
            raise UsageError(f"node {name!r} is already up (kubeconfig {existing.kubeconfig}); "
                             "`gpuconf node down` first")
        progress(f"node {name!r}: removing what an interrupted run left")
        down(name, progress=progress)
    others = sorted(p.parent.name for p in nodes_dir().glob("*/state.json")
                    if p.parent.name != name)
    if others:  # one node per host: the kubelet's root and the bridge are fixed
        raise UsageError(f"node {others[0]!r} is (or was) up on this host: `gpuconf node down "
                         f"--name {others[0]}` first")
    cp_existing = plane.state()
    if cp_existing is not None and any(procs.pid_alive(p) for p in cp_existing.pids.values()):
        raise UsageError(f"a cluster named {name!r} is already running (kubeconfig "
                         f"{cp_existing.kubeconfig}); pick another name or stop it first")


def _preflight(nb: binaries.NodeBinaries) -> host.HostFacts:
    """This host's facts; a UsageError naming every reason it cannot run a node."""
    f = host.facts(nb.busybox)
    problems = host.preflight_problems(
        f, bridge=configs.BRIDGE, networks=[configs.POD_CIDR, f"{KUBERNETES_SERVICE_IP}/32"])
    if f.root and host.tcp_port_taken(443):
        problems.append("port 443 is taken (the kubernetes Service's port for pods)")
    if f.root and (why := _cgo_binaries_fail(nb)):
        problems.append(why)
    if problems:
        raise UsageError(f"this host cannot run a node: {'; '.join(problems)}")
    return f


def _new_state(name: str, f: host.HostFacts, progress: Progress) -> NodeState:
    """The node's folders made afresh and its state saved, with the host paths it will create
    recorded before anything creates them."""
    folder = nodes_dir() / name
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "logs").mkdir(parents=True)
    run_dir = RUN_ROOT / name
    # the host paths that do not exist yet: recorded before anything creates them
    created = [str(m) for p in HOST_PATHS if (m := host.first_missing(p)) is not None]
    if not f.kmsg:
        created.append("/dev/kmsg")
    state = NodeState(name=name, folder=str(folder), run_dir=str(run_dir),
                      node_name=_node_name(), node_ip=configs.NODE_IP, started=time.time(),
                      host=f.as_dict(), sysctls=host.read_sysctls(),
                      created=list(dict.fromkeys(created)))
    state.host["kubepods_before"] = [str(p) for p in host.kubepods_cgroups()]
    # host paths that exist already keep what they hold; down removes only what was added
    state.host["preexisting"] = {str(p): sorted(e.name for e in p.iterdir())
                                 for p in HOST_PATHS if p.is_dir()}
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    state.save()
    progress(f"node {state.node_name}: cgroup {f.cgroup}, snapshotter "
             f"{state.host['snapshotter']}, state in {folder}")
    return state


def check_inputs(*, gpu_profile: str | None = None, driver_root: str | None = None,
                 dev_root: str | None = None, nvidia_src: str | None = None
                 ) -> tuple[Path, binaries.NodeBinaries, gpu.Profile | None]:
    """The chart, the node's binaries and the mock GPU profile (None for a driver root) that
    ``up`` would use; a one-line UsageError for bad input. Starts nothing."""
    if gpu_profile and driver_root:
        raise UsageError("give a GPU profile (mock NVML) or a driver root (real GPUs), not both")
    if dev_root and not driver_root:
        raise UsageError("--dev-root goes with --driver-root (the real driver's device nodes)")
    chart = chartmod.find_chart(nvidia_src)
    cp_bins = binaries.require()
    if not cp_bins.helm.is_file():
        raise UsageError(f"helm missing under {binaries.cache_dir() / 'bin'}: run `make setup`")
    nb = binaries.require_node(mock_nvml=not driver_root)
    if driver_root:
        gpu.check_driver_root(Path(driver_root), Path(dev_root or "/"))
        return chart, nb, None
    return chart, nb, gpu.parse_profile(gpu_profile or DEFAULT_GPU_PROFILE, gpu.mock_models(nb))


def down(name: str = "gpuconf", *, progress: Progress = print, keep_logs: bool = False) -> bool:
    """Stop every process the node started, unmount, remove its bridge, addresses, cgroups,
    host paths and state, put sysctls back; then stop its control plane. False: no such node."""
    state = NodeState.load(name)
    if state is None:
        # what a failed up kept for diagnosis (logs only: no state, nothing running)
        if (nodes_dir() / name).is_dir() and not keep_logs:
            shutil.rmtree(nodes_dir() / name, ignore_errors=True)
            if ControlPlane(name).state() is None:
                ControlPlane(name).down(progress=progress)
        return False
    with interrupts.deferred():
        _teardown(state, progress, keep_logs)
    return True


def reconfigure(name: str = "gpuconf", *, chart_values: dict, progress: Progress = print,
                wait: bool = True, allow_compute_mode_change: bool = False) -> NodeState:
    """``helm upgrade`` the running node's chart with ``chart_values`` merged over the node's
    own values (not over the previous call's), then (``wait``) wait as ``up`` does: the
    DaemonSets rolled out, the GPUs advertised as the sharing config promises, GFD's labels
    on the node. Without ``wait``, only the upgrade (values the plugin may reject). MPS on
    real GPUs needs ``allow_compute_mode_change``, as for :func:`up`."""
    state = require_up(name)
    chartmod.refuse_unasked_compute_mode_change(
        chart_values, real_gpus=state.gpu.get("source") != MOCK_NVML,
        allowed=allow_compute_mode_change)
    cp = ControlPlane(name).state()
    if cp is None:
        raise UsageError(f"node {name!r} has no control plane: `gpuconf node down`, then up")
    nb = binaries.require_node(mock_nvml=state.gpu.get("source") == MOCK_NVML)
    _install_chart(state, cp, nb, Path(state.chart["chart"]), chart_values, progress,
                   upgrade=True, wait=wait)
    if wait:
        _wait_gpus(state, cp, progress)
    return state


def restart_kubelet(name: str = "gpuconf", *, progress: Progress = print) -> float:
    """Stop the node's kubelet and start it again as ``up`` did (it re-creates its sockets,
    the device plugins register again); returns the seconds until the node is Ready."""
    state = require_up(name)
    if "kubelet" not in state.commands:
        raise UsageError(f"node {name!r} was brought up by an older gpuconf: `gpuconf node "
                         "down`, then up")
    cp = ControlPlane(name).state()
    if cp is None:
        raise UsageError(f"node {name!r} has no control plane: `gpuconf node down`, then up")
    t0 = time.monotonic()
    progress(f"restarting the kubelet (pid {state.pids['kubelet']})")
    procs.stop(state.pids["kubelet"], state.binaries["kubelet"])
    procs.start(state, "kubelet", state.commands["kubelet"],
                env=state.environments.get("kubelet"))
    c = connect(str(cp.kubeconfig))
    _wait(state, f"node {state.node_name} to be Ready", lambda: kube.node_ready(c, state.node_name),
          timeout=NODE_READY_TIMEOUT_S, progress=progress)
    return time.monotonic() - t0


def status(name: str = "gpuconf") -> dict:
    """The node's state for ``gpuconf node status`` and the report fingerprint."""
    state = NodeState.load(name)
    if state is None:
        return {"name": name, "running": False}
    components = {c: {"pid": pid, "running": procs.pid_alive(pid)
                      and procs.runs(pid, state.binaries.get(c, ""))}
                  for c, pid in state.pids.items()}
    cp = ControlPlane(name).status()
    gpu_info = {k: v for k, v in state.gpu.items() if k != "cdi_devices"}
    out = {
        "name": name, "phase": state.phase, "node": state.node_name, "node_ip": state.node_ip,
        "running": bool(components) and all(v["running"] for v in components.values())
        and cp.get("running", False),
        "kubeconfig": str(state.kubeconfig), "gpu": gpu_info, "host": state.host,
        "images": state.images, "chart": state.chart, "timings": state.timings,
        "components": components, "control_plane": cp,
    }
    if out["running"]:
        with contextlib.suppress(Exception):
            node = connect(str(state.kubeconfig)).core.read_node(state.node_name,
                                                                 _request_timeout=5)
            out["ready"] = any(c.type == "Ready" and c.status == "True"
                               for c in node.status.conditions or [])
            out["gpu_resource"], out["gpus_allocatable"] = gpu_resource_of(
                node.status.allocatable)
            out["gpu_product"] = (node.metadata.labels or {}).get(L.PRODUCT)
    return out


# ---- up, step by step -----------------------------------------------------------------------
def _node_name() -> str:
    name = re.sub(r"[^a-z0-9-]", "-", socket.gethostname().lower().split(".")[0]).strip("-")
    return name or "gpuconf-node"


def _cgo_binaries_fail(nb: binaries.NodeBinaries) -> str | None:
    """The NVIDIA binaries link glibc (NVML is loaded at run time): do they run here?"""
    try:
        proc = subprocess.run([str(nb.nvidia_ctk), "--version"], capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-ctk does not run here ({exc})"
    if proc.returncode != 0:
        first = (proc.stderr or proc.stdout).strip().splitlines()[:1]
        return f"nvidia-ctk does not run here ({first[0] if first else proc.returncode})"
    return None


def _start_with_control_plane(plane: ControlPlane, progress: Progress,
                              node_side: Callable[[], None]) -> ClusterState:
    """Start the control plane in a thread while ``node_side`` runs here; both must succeed.
    A failure on either side waits for the other to finish before it is raised, so the
    cleanup that follows finds every process recorded."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="control-plane") as pool:
        future = pool.submit(plane.up, progress=lambda m: progress(f"control plane: {m}"))
        try:
            node_side()
        except BaseException:
            with interrupts.deferred(), contextlib.suppress(BaseException):
                future.result()
            raise
        return future.result()


def choose_injection(requested: str | None, driver_root: str | None,
                     progress: Progress) -> str:
    """"cdi", unless the driver's root holds no device nodes (no dev/nvidiactl below it: they
    are elsewhere, --dev-root): the device plugin (v0.20.0) then looks for them in its own
    container's /dev, finds none and writes no CDI spec (its log: "Ignoring empty CDI specs
    ... empty device edits"), so every GPU pod fails with "unresolvable CDI devices". Seen on
    the H200 machine (driver in /usr/local/nvidia, which has a dev/ folder without device
    nodes; devices in /dev); the runtime's injection serves that layout."""
    split = driver_root is not None and not (Path(driver_root) / "dev" / "nvidiactl").exists()
    if requested is None:
        if not split:
            return "cdi"
        progress(f"GPU injection: runtime ({driver_root} has no dev/nvidiactl: the device "
                 "plugin's own CDI spec would name no device nodes)")
        return chartmod.RUNTIME_INJECTION
    if requested == "cdi" and split:
        progress(f"warning: --gpu-injection cdi with no dev/nvidiactl below {driver_root}: the "
                 "device plugin writes an empty CDI spec and GPU pods fail with 'unresolvable "
                 "CDI devices'; leave --gpu-injection out to use the runtime's injection")
    return requested


def _node_side(state: NodeState, f: host.HostFacts, nb: binaries.NodeBinaries,
               profile: gpu.Profile | None, injection: str, driver_root: str | None,
               dev_root: str | None, progress: Progress, mark: Callable[[str], None]) -> None:
    _host_setup(state, f, progress)
    _gpu_setup(state, nb, profile, driver_root, dev_root, progress)
    state.gpu["injection"] = injection
    state.save()
    mark("gpu_cdi")
    containerd.start(state, f, nb, progress)
    mark("containerd_ready")
    containerd.import_node_images(state, nb, progress)
    mark("images_imported")


def share_bind_mount(state: NodeState, path: Path, why: str, progress: Progress) -> None:
    """Make ``path`` a shared bind mount of itself unless its mount propagates already: a
    pod's Bidirectional volume needs one. Recorded before it is made; ``down`` unmounts it."""
    if host.is_shared(path):
        return
    state.host.setdefault("shared_mounts", []).append(str(path))
    state.save()
    host.make_shared(path)
    progress(f"{path}: made a shared mount ({why}; unmounted by down)")


def share_mount_of(state: NodeState, path: Path, why: str, progress: Progress) -> None:
    """Make the mount holding ``path`` shared unless it is: a pod's HostToContainer volume
    needs one. Recorded before it is changed; ``down`` makes it private again."""
    if host.is_shared(path):
        return
    point = host.mount_point(path)
    state.host.setdefault("made_shared", []).append(point)
    state.save()
    host.set_shared(Path(point), True)
    progress(f"{point}: made a shared mount ({why}; private again at down)")


def _host_setup(state: NodeState, f: host.HostFacts, progress: Progress) -> None:
    # record first, then create: an interrupt in between still leaves the record
    kmsg = Path("/dev/kmsg")
    state.links.append(configs.BRIDGE)
    state.addresses.append([f"{KUBERNETES_SERVICE_IP}/32", "lo"])
    state.save()
    for p in HOST_PATHS:
        p.mkdir(parents=True, exist_ok=True)
    share_bind_mount(state, MPS_ROOT, "the MPS daemon's shm propagates to the host", progress)
    if not f.kmsg:
        os.mknod(kmsg, 0o644 | 0o020000, os.makedev(1, 11))
        progress("created /dev/kmsg (the kubelet's OOM watcher reads it; removed by down)")
    if f.cgroup == "v1":
        progress("cgroup v1 hierarchy: the kubelet runs with failCgroupV1: false")
    elif added := host.enable_v2_controllers():
        state.cgroup_subtree = added
        state.save()
        progress(f"cgroup v2: enabled {', '.join(added)} for the root's children")
    if not f.cap_sys_resource:
        progress("root lacks CAP_SYS_RESOURCE: containerd restricts oom_score_adj and the "
                 "kubelet keeps oomScoreAdj 0")
    host.add_bridge(f.ip_tool, configs.BRIDGE, f"{configs.NODE_IP}/24")
    host.add_address(f.ip_tool, f"{KUBERNETES_SERVICE_IP}/32", "lo")


def _gpu_setup(state: NodeState, nb: binaries.NodeBinaries, profile: gpu.Profile | None,
               driver_root: str | None, dev_root: str | None, progress: Progress) -> None:
    paths = configs.Paths(state.path, Path(state.run_dir))
    if profile is not None:
        info = gpu.mock_driver_root(nb, profile, state.path / "driver")
        progress(f"GPUs: mock NVML, {profile.name} ({info['model']}, driver "
                 f"{info['driver_version']}) in {state.path / 'driver'}")
    else:
        info = gpu.real_driver(Path(driver_root), Path(dev_root or "/"))
        progress(f"GPUs: NVIDIA driver in {driver_root} (devices in {info['dev_root']}/dev)")
    devices = gpu.generate_cdi(nb, info, paths.cdi_dir / "nvidia.yaml", state.logs / "cdi.log")
    gpus = [d for d in devices if d.isdigit()]  # by index (not "all", UUIDs or MIG "0:1")
    info["cdi_devices"] = devices
    info.setdefault("count", len(gpus))
    state.gpu = info
    state.save()
    progress(f"CDI spec by nvidia-ctk: {len(gpus)} GPU(s), devices {', '.join(devices[:4])}"
             f"{' ...' if len(devices) > 4 else ''}")


def require_up(name: str) -> NodeState:
    """The node's state, or a one-line error when it is not up."""
    state = NodeState.load(name)
    if state is None or state.phase != "ready":
        raise UsageError(f"node {name!r} is not up: `gpuconf node up` first")
    return state


def node_folder(name: str) -> Path:
    return require_up(name).path


def import_archive(name: str, archive: Path, *, progress: Progress = print) -> list[str]:
    """Import a docker-archive (e.g. ``gpuconf node workload-image``'s) into node ``name``'s
    containerd, pinned; the references it held."""
    state = require_up(name)
    refs = images.archive_refs(archive)
    t0 = time.monotonic()
    progress(f"importing {', '.join(refs)} ({archive.stat().st_size >> 20} MiB) into node "
             f"{name!r}")
    containerd.import_pinned(state, binaries.locate_node(), archive, refs)
    state.images.update({f"imported:{r}": r for r in refs})
    state.save()
    progress(f"imported in {time.monotonic() - t0:.1f}s")
    return refs


def _wait(state: NodeState, description: str, pending: Callable[[], str | None], *,
          timeout: float, progress: Progress) -> float:
    """A bring-up wait: NotConverged on timeout, stopped at once when a node process dies."""
    return wait_until_done(description, pending, timeout=timeout, progress=progress,
                           alive=_alive_check(state), error=NotConverged)


def _alive_check(state: NodeState) -> Callable[[], None]:
    def check() -> None:
        for component in ("containerd", "kubelet", "relay"):
            pid = state.pids.get(component)
            if pid is not None and not procs.pid_alive(pid):
                procs.reap(pid)
                raise ComponentFailed(component, "exited",
                                      log_tail(state.logs / f"{component}.log"))
    return check


def _join(state: NodeState, cp: ClusterState, nb: binaries.NodeBinaries,
          progress: Progress) -> None:
    c = connect(str(cp.kubeconfig))
    token = kube.bootstrap_token(c)
    kube.join_rbac(c)
    kube.runtime_class(c)
    # pods reach the API server at the kubernetes Service's address (see relay.py)
    progress(f"relaying the kubernetes Service ({KUBERNETES_SERVICE_IP}:443) to the API server")
    relay = procs.start(state, "relay", [
        sys.executable, "-m", "conformance.node.relay", f"{KUBERNETES_SERVICE_IP}:443",
        f"127.0.0.1:{cp.ports['kube-apiserver']}"], env={"PYTHONPATH": os.pathsep.join(
            p for p in (str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")) if p)})
    wait_for_process("relay", relay, state.logs / "relay.log",
                     lambda: _accepts(KUBERNETES_SERVICE_IP, 443),
                     timeout=10, progress=progress, what="listening")

    p = configs.Paths(state.path, Path(state.run_dir))
    ca = Path(cp.folder) / "pki" / "ca.crt"
    p.kubelet_config.write_text(configs.kubelet_yaml(
        p, cgroup=state.host["cgroup"], oom_score_adj=0 if not state.host["cap_sys_resource"]
        else -999, ca=ca))
    p.bootstrap_kubeconfig.write_text(configs.bootstrap_kubeconfig(cp.server, ca, token))
    p.bootstrap_kubeconfig.chmod(0o600)
    labels = f"{REAL_NODE_LABEL}=true,{L.GPU_PRESENT}=true"
    progress(f"starting the kubelet (node {state.node_name}, joins with a bootstrap token)")
    t0 = time.monotonic()
    procs.start(state, "kubelet", [
        str(nb.kubelet), f"--config={p.kubelet_config}",
        f"--bootstrap-kubeconfig={p.bootstrap_kubeconfig}", f"--kubeconfig={p.kubelet_kubeconfig}",
        f"--cert-dir={p.kubelet_pki}", f"--root-dir={KUBELET_ROOT}",
        f"--hostname-override={state.node_name}", f"--node-ip={configs.NODE_IP}",
        f"--node-labels={labels}", "--v=2"])
    _wait(state, f"node {state.node_name} to be Ready", lambda: kube.node_ready(c, state.node_name),
          timeout=NODE_READY_TIMEOUT_S, progress=progress)
    progress(f"node {state.node_name} Ready {time.monotonic() - t0:.1f}s after the kubelet "
             "started")
    source = state.gpu["source"] + (f" {state.gpu['profile']}" if state.gpu.get("profile")
                                    else "")
    c.core.patch_node(state.node_name, {"metadata": {"annotations": {
        GPU_SOURCE_ANNOTATION: source}}})


def _accepts(ip: str, port: int) -> bool:
    try:
        socket.create_connection((ip, port), timeout=1).close()
    except OSError:
        return False
    return True


def _wait_gpus(state: NodeState, cp: ClusterState, progress: Progress) -> None:
    c = connect(str(cp.kubeconfig))
    resource, want = chartmod.advertised(state.chart.get("values") or {}, state.gpu.get("count"))
    try:
        _wait(state, f"{resource} advertised by the device plugin",
              lambda: kube.gpus_advertised(c, state.node_name, resource, want),
              timeout=GPUS_TIMEOUT_S, progress=progress)
    except NotConverged as exc:
        said = kube.last_error_logged(c, chartmod.NAMESPACE, chartmod.PLUGIN_CONTAINER)
        raise NotConverged(f"{exc}; {said or 'the plugin logged no error'}") from exc
    _wait(state, "GFD labels on the node (through NFD)",
          lambda: kube.gfd_labels(c, state.node_name), timeout=GPUS_TIMEOUT_S, progress=progress)


def _install_chart(state: NodeState, cp: ClusterState, nb: binaries.NodeBinaries, chart: Path,
                   extra: dict, progress: Progress, *, upgrade: bool = False,
                   wait: bool = True) -> None:
    helm = Path(cp.binaries["helm"])
    vals = chartmod.merge(chartmod.values(
        gpu=state.gpu, nvidia_ctk=nb.nvidia_ctk, nfd_version=nb.versions["NFD_VERSION"],
        node_label=REAL_NODE_LABEL), extra)
    state.chart = {"release": chartmod.RELEASE, "namespace": chartmod.NAMESPACE,
                   "chart": str(chart), "values": vals}
    state.save()
    verb = "upgrade" if upgrade else "install"
    progress(f"helm {verb} {chartmod.RELEASE} {chart} (device plugin, GFD, NFD)")
    chartmod.install(helm=helm, kubeconfig=cp.kubeconfig, chart=chart, vals=vals,
                     folder=state.path, log=state.logs / "helm.log", upgrade=upgrade)
    if not wait:
        return
    c = connect(str(cp.kubeconfig))
    try:
        seconds = _wait(state, f"the NVIDIA DaemonSets in {chartmod.NAMESPACE} to roll out",
                        lambda: rollout.workloads_pending(c, chartmod.NAMESPACE),
                        timeout=ROLLOUT_TIMEOUT_S, progress=progress)
    except NotConverged as exc:
        raise NotConverged(f"{exc}; pods: {kube.not_running_pods(c, chartmod.NAMESPACE)}; "
                           f"events: {kube.warning_events(c, chartmod.NAMESPACE)}") from exc
    progress(f"NVIDIA DaemonSets rolled out in {seconds:.1f}s")


def _gpu_words(state: NodeState) -> str:
    n = state.gpu.get("count")
    what = (f"{state.gpu.get('profile')} (mock NVML)" if state.gpu["source"] == MOCK_NVML
            else "the real driver's GPUs")
    return f"{n} nvidia.com/gpu from {what}"


# ---- down -----------------------------------------------------------------------------------
def _teardown(state: NodeState, progress: Progress, keep_logs: bool) -> None:
    t0 = time.monotonic()
    nb = binaries.locate_node()
    tool = host.ip_tool(nb.busybox)
    # 1. the kubelet first: it would restart what is stopped below
    for component in ("kubelet", "relay", prometheus.COMPONENT, gateway.COMPONENT):
        if component in state.pids:
            progress(f"stopping {component} (pid {state.pids[component]})")
            procs.stop(state.pids[component], state.binaries.get(component, ""))
            state.pids.pop(component)
            state.save()
    # 2. every container, then containerd, then what outlived it (shims, container processes)
    if "containerd" in state.pids:
        if procs.pid_alive(state.pids["containerd"]):
            containerd.kill_all_tasks(state, nb, progress)
        progress(f"stopping containerd (pid {state.pids['containerd']})")
        procs.stop(state.pids["containerd"], state.binaries.get("containerd", ""))
        state.pids.pop("containerd")
        state.save()
    shims = procs.pids_running(str(nb.containerd_shim))
    if shims:
        progress(f"killing {len(shims)} leftover shim(s)")
        procs.kill_all(shims)
    before = set(state.host.get("kubepods_before", []))
    ours = [t for t in host.kubepods_cgroups() if str(t) not in before]
    leftover = set().union(*(host.cgroup_pids(t) for t in ours)) if ours else set()
    if leftover:
        progress(f"killing {len(leftover)} container process(es) left in the pod cgroups")
        procs.kill_all(leftover)
    # 3. the control plane
    plane = ControlPlane(state.name)
    if plane.state() is not None:
        plane.down(progress=lambda m: progress(f"control plane: {m}"), keep_logs=keep_logs)
    # 4. mounts, cgroups, network, sysctls, host paths
    roots = [KUBELET_ROOT, state.path, Path(state.run_dir),
             *map(Path, state.host.get("shared_mounts", []))]
    stuck = host.unmount_all(roots, progress)
    for point in reversed(state.host.pop("made_shared", [])):  # by gpuconf node operator
        host.set_shared(Path(point), False)
        progress(f"{point}: a private mount again (node operator had made it shared)")
    for tree in ours:
        if not host.remove_cgroup_tree(tree):
            progress(f"warning: cgroup {tree} could not be removed")
    if tool:
        for veth in host.veths_on(configs.BRIDGE):
            host.delete_link(tool, veth)
        for link in state.links:
            host.delete_link(tool, link)
        for cidr, dev in state.addresses:
            host.remove_address(tool, cidr, dev)
    state.links, state.addresses = [], []
    host.restore_sysctls(state.sysctls, progress)
    host.disable_v2_controllers(state.cgroup_subtree)
    kept: list[str] = []
    for folder, entries in state.host.get("preexisting", {}).items():
        if Path(folder).is_dir():
            for entry in Path(folder).iterdir():
                if entry.name not in entries:
                    kept += host.safe_rmtree(entry)
    for created in reversed(state.created):
        kept += host.safe_rmtree(Path(created))
    kept += host.safe_rmtree(Path(state.run_dir))
    if keep_logs:
        for entry in state.path.iterdir():
            if entry.name != "logs":
                kept += host.safe_rmtree(entry)
    else:
        kept += host.safe_rmtree(state.path)
    for what, items in (("still mounted", stuck), ("left in place (another filesystem)", kept)):
        if items:
            progress(f"warning: {what}: {', '.join(items[:5])}")
    progress(f"node {state.node_name} removed in {time.monotonic() - t0:.1f}s")
