"""The NVIDIA GPU Operator on the node: built from its source (``build-node.sh gpu-operator``),
installed by its real Helm chart, reconciling the node as it would any GPU node.

The host already has the driver and the container toolkit (the node's containerd runs the
NVIDIA runtime), so both stay off, as NVIDIA documents for pre-installed drivers; so do the
operands whose images this project does not build (DCGM, the DCGM exporter, the MIG manager,
vGPU, sandbox and confidential-computing parts). The operator then deploys what it deploys on
such a cluster: its validator, the device plugin and GFD (the node's own images, built from
the same source as the plugin chart's), and reports in its ClusterPolicy.

What the host must give the validator, as systemd and the toolkit give it on a GPU host: ``/``
a shared mount (its ``/host`` volume is HostToContainer) and ``/run/nvidia/validations`` a
shared one (Bidirectional). ``down`` undoes both. The node's device plugin chart keeps only
its NFD, whose PCI labels tell the operator which nodes have NVIDIA GPUs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.binaries import binaries
from conformance.cluster import rollout
from conformance.cluster.client import Cluster, connect
from conformance.cluster.logs import read_pod_log
from conformance.cluster.waits import wait_until_done
from conformance.common.console import Progress
from conformance.common.errors import NotConverged, UsageError
from conformance.controlplane.components import ControlPlane
from conformance.node import chart as chartmod
from conformance.node import host, images, kube, lifecycle
from conformance.node.images import Entry, Image
from conformance.node.state import NodeState
from conformance.nvidia import clusterpolicy, operands
from conformance.nvidia.labels import GPU_PRESENT, NFD_PCI_NVIDIA
from conformance.nvidia.sharing import validate_sharing_config

RELEASE = NAMESPACE = "gpu-operator"  # as NVIDIA's install guide names both
CHART_NAME = "gpu-operator"
VALIDATIONS = Path("/run/nvidia/validations")  # the validator's *-ready files (Bidirectional)
VALIDATOR_APP = "nvidia-operator-validator"
READY_TIMEOUT_S = 300.0
# NVIDIA's documented time-slicing flow for the operator ("Time-Slicing GPUs in Kubernetes"):
# a ConfigMap of plugin configs in the operator's namespace, named by the ClusterPolicy's
# devicePlugin.config with its default key
SHARING_CONFIGMAP = "time-slicing-config"
SHARING_DEFAULT_KEY = "any"
HOST_MODPROBE = Path("/sbin/modprobe")  # the validator runs it chrooted into the host
# chart sections switched off, and why (the report of an operator run names them)
OFF = {
    "driver": "the host has the driver",
    "toolkit": "the node's containerd already runs the NVIDIA container runtime",
    "dcgm": "DCGM's libraries are not on this host; its image is not built here",
    "dcgmExporter": "needs DCGM; its image is not built here",
    "migManager": "its image is not built here; MIG layouts are never changed here",
    "nodeStatusExporter": "its image is not built here",
    "vgpuDeviceManager": "no vGPU", "vfioManager": "no VFIO passthrough",
    "sandboxDevicePlugin": "no sandboxed workloads", "kataSandboxDevicePlugin": "no Kata",
    "ccManager": "no confidential computing",
    "nfd": "the node's NFD (from the device plugin chart) labels the node",
}


def image(build: binaries.OperatorBuild, nb: binaries.NodeBinaries) -> Image:
    """One image for the operator and its validator, as upstream ships them: the binaries,
    the manifests they read at run time, and a busybox ``sh`` (the validator's pods run
    ``sh -c nvidia-validator``) with this host's glibc for the ``nvidia-smi`` it runs from
    the host's driver."""
    entries = [Entry(f"/usr/bin/{b.name}", source=b) for b in build.binaries]
    for dest, folder in build.manifest_dirs.items():
        entries += [Entry(f"{dest}/{f.relative_to(folder)}", source=f, mode=0o644)
                    for f in sorted(folder.rglob("*")) if f.is_file()]
    entries += [*images.busybox_entries(nb.busybox),
                *images.glibc_entries([nb.nvidia_device_plugin])]
    return Image([f"{operands.OPERATOR_IMAGE}:{build.version}"], entries,
                 env={"PATH": images.PATH_ENV})


def values(build: binaries.OperatorBuild, *, driver_install_dir: str,
           dev_char_symlinks: bool = True, sharing: bool = False) -> dict[str, Any]:
    """The chart values: the built image, the host's driver, the operands in ``OFF`` off.
    The validator's CUDA and plugin checks run without their workload pods: those run NVIDIA's
    ``vectorAdd`` sample, a CUDA binary the source does not build (the suites run their own
    CUDA pods instead). Without ``dev_char_symlinks`` the validator's driver check does not
    create /dev/char links (NVIDIA's documented switch for hosts where it cannot: it loads the
    nvidia modules with the host's modprobe first). They serve runc's systemd cgroup driver;
    the node's runc uses cgroupfs. With ``sharing`` the plugin reads its config from
    :data:`SHARING_CONFIGMAP` (NVIDIA's time-slicing flow)."""
    no_workload = {"env": [{"name": "WITH_WORKLOAD", "value": "false"}]}
    image_pin = {"version": build.version, "imagePullPolicy": "Never"}
    validator: dict[str, Any] = {**image_pin, "cuda": no_workload, "plugin": no_workload}
    if not dev_char_symlinks:
        validator["driver"] = {"env": [{"name": "DISABLE_DEV_CHAR_SYMLINK_CREATION",
                                        "value": "true"}]}
    vals: dict[str, Any] = {section: {"enabled": False} for section in OFF}
    vals.update({
        "operator": {**image_pin, "upgradeCRD": False},
        "validator": validator,
        "devicePlugin": {"imagePullPolicy": "Never", **(
            {"config": {"name": SHARING_CONFIGMAP, "default": SHARING_DEFAULT_KEY}}
            if sharing else {})},
        "gfd": {"imagePullPolicy": "Never"},
        "hostPaths": {"driverInstallDir": driver_install_dir},
        # the operator's CDI mode points the plugin's CDI hooks at the toolkit it installs;
        # without it the plugin passes NVIDIA_VISIBLE_DEVICES to the node's NVIDIA runtime
        "cdi": {"enabled": False},
    })
    return vals


def load_sharing_config(path: str | Path, *, real_gpus: bool,
                        allow_compute_mode_change: bool = False) -> str:
    """The text of a device plugin config file (``version: v1``, ``sharing: ...``) for the
    operator's plugin, checked as the plugin would check it; one-line errors. MPS on real GPUs
    needs the user's leave, as for ``node up`` (its daemon changes the compute mode)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"--sharing-config {path}: {exc.strerror or exc}") from exc
    if errors := validate_sharing_config(text):
        raise UsageError(f"--sharing-config {path}: {errors[0]}")
    chartmod.refuse_unasked_compute_mode_change(
        _as_chart_config(text), real_gpus=real_gpus, allowed=allow_compute_mode_change)
    return text


def _as_chart_config(text: str) -> dict[str, Any]:
    """The config in the plugin chart's ``config`` shape (what :mod:`chart` reads)."""
    return {"config": {"default": SHARING_DEFAULT_KEY, "map": {SHARING_DEFAULT_KEY: text}}}


def sharing_configmap(text: str) -> client.V1ConfigMap:
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=SHARING_CONFIGMAP, namespace=NAMESPACE),
        data={SHARING_DEFAULT_KEY: text})


def find_chart(path: str | Path) -> Path:
    """The gpu-operator chart folder (its Chart.yaml names it), or a one-line usage error."""
    chart = Path(path)
    meta = chart / "Chart.yaml"
    try:
        name = (yaml.safe_load(meta.read_text()) or {}).get("name")
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"{chart}: not a Helm chart ({exc}); give the gpu-operator chart "
                         "folder (helm pull nvidia/gpu-operator --untar)") from exc
    if name != CHART_NAME:
        raise UsageError(f"{chart}: chart {name!r}, not {CHART_NAME!r}")
    return chart


def install(name: str, *, chart: str | Path, progress: Progress = print,
            timeout: float = READY_TIMEOUT_S, sharing_config: str | Path | None = None,
            allow_compute_mode_change: bool = False) -> dict[str, Any]:
    """Install the operator on node ``name`` and wait until its ClusterPolicy is ready with
    the node among its GPU nodes and its GPUs advertised as ``sharing_config`` (a device
    plugin config file) shares them; what it reached (seconds, state, operands)."""
    chart_dir = find_chart(chart)
    build = binaries.require_operator()
    state = lifecycle.require_up(name)
    sharing = (None if sharing_config is None else load_sharing_config(
        sharing_config, real_gpus=state.gpu.get("source") != lifecycle.MOCK_NVML,
        allow_compute_mode_change=allow_compute_mode_change))
    cp = ControlPlane(name).state()
    if cp is None:
        raise UsageError(f"node {name!r} has no control plane: `gpuconf node down`, then up")
    nb = binaries.locate_node()
    t0 = time.monotonic()
    archive = state.path / "gpu-operator-image.tar"
    images.write_archive([image(build, nb)], archive)
    lifecycle.import_archive(name, archive, progress=progress)
    _host_for_validator(state, progress)
    c = connect(str(cp.kubeconfig))
    # the operator deploys the plugin and GFD: the chart's own go first, so that two plugins
    # never share the kubelet socket (a stopping plugin removes the socket path it served)
    lifecycle.reconfigure(name, chart_values={"devicePlugin": {"enabled": False},
                                              "gfd": {"enabled": False}},
                          progress=progress, wait=False)
    state = lifecycle.require_up(name)  # as reconfigure left it
    wait_until_done("the device plugin chart's plugin and GFD to stop",
                    lambda: _chart_gpu_pods(c), timeout=120, progress=progress,
                    error=NotConverged)
    dev_char = HOST_MODPROBE.exists()
    if not dev_char:
        progress(f"no {HOST_MODPROBE} on this host: the validator is told not to create the "
                 "/dev/char links (it would load the nvidia modules with it first)")
    vals = values(build, driver_install_dir=state.gpu["driver_root"],
                  dev_char_symlinks=dev_char, sharing=sharing is not None)
    resource, want = chartmod.advertised(_as_chart_config(sharing) if sharing else {},
                                         state.gpu.get("count"))
    if sharing is not None:
        kube.put_configmap(c, sharing_configmap(sharing))
        progress(f"sharing: ConfigMap {NAMESPACE}/{SHARING_CONFIGMAP} ({SHARING_DEFAULT_KEY}), "
                 f"the ClusterPolicy's devicePlugin.config names it; want {resource}={want}")
    progress(f"helm install {RELEASE} {chart_dir} (operator {build.version}; off: "
             f"{', '.join(OFF)})")
    chartmod.install(helm=Path(cp.binaries["helm"]), kubeconfig=cp.kubeconfig, chart=chart_dir,
                     vals=vals, folder=state.path, log=state.logs / "helm.log",
                     release=RELEASE, namespace=NAMESPACE)
    state.chart["operator"] = {"release": RELEASE, "namespace": NAMESPACE,
                               "chart": str(chart_dir), "version": build.version}
    state.save()
    try:
        wait_until_done("the GPU Operator's ClusterPolicy to be ready",
                        lambda: policy_not_ready(c, state.node_name, resource, want),
                        timeout=timeout, progress=progress, error=NotConverged)
    except NotConverged as exc:
        raise NotConverged(f"{exc}; {validator_progress(c)}") from exc
    seconds = time.monotonic() - t0
    progress(f"GPU Operator {build.version}: ClusterPolicy ready {seconds:.0f}s after the "
             "install began")
    return {"seconds": seconds, "version": build.version, "off": OFF}


def _host_for_validator(state: NodeState, progress: Progress) -> None:
    if (missing := host.first_missing(VALIDATIONS)) is not None:
        state.created.append(str(missing))
    VALIDATIONS.mkdir(parents=True, exist_ok=True)
    lifecycle.share_bind_mount(state, VALIDATIONS, "the validator's Bidirectional volume",
                               progress)
    # the validator's HostToContainer volumes: the host's root and the driver's folder
    for path in (Path("/"), Path(state.gpu["driver_root"])):
        lifecycle.share_mount_of(state, path, f"the validator's HostToContainer volume of "
                                 f"{path}", progress)


def _chart_gpu_pods(c: Cluster) -> str | None:
    pods = c.core.list_namespaced_pod(chartmod.NAMESPACE).items
    left = [p.metadata.name for p in pods if chartmod.NFD_SUBCHART not in p.metadata.name]
    return f"still running: {', '.join(left)}" if left else None


def policy_not_ready(c: Cluster, node: str, resource: str,
                     want: int | None) -> str | None:
    """None once the ClusterPolicy is ready with the node as a GPU node, its operands rolled
    out and ``want`` of ``resource`` advertised by the operator's device plugin; else why."""
    items = c.custom.list_cluster_custom_object(*clusterpolicy.API)["items"]
    if not items:
        return "no ClusterPolicy yet"
    status = items[0].get("status") or {}
    labels = c.core.read_node(node).metadata.labels or {}
    if labels.get(GPU_PRESENT) != "true":
        nfd = labels.get(NFD_PCI_NVIDIA)
        return (f"the operator has not labelled the node {GPU_PRESENT}=true (NFD's "
                f"{NFD_PCI_NVIDIA}: {nfd or 'absent: no NVIDIA PCI device seen'})")
    if status.get("state") != clusterpolicy.READY:
        return f"ClusterPolicy {status.get('state') or 'without state'}; {validator_progress(c)}"
    # the policy says ready between two reconcile passes too: its operands must be up
    if (pending := rollout.workloads_pending(c, NAMESPACE)) is not None:
        return f"ClusterPolicy ready, operands not: {pending}; {validator_progress(c)}"
    return kube.gpus_advertised(c, node, resource, want)


def validator_progress(c: Cluster) -> str:
    """Where the validator's pod is: its first unfinished init container and its last line."""
    core = c.core
    pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"app={VALIDATOR_APP}").items
    if not pods:
        return "no validator pod yet"
    pod = pods[0]
    for st in pod.status.init_container_statuses or []:
        if st.state and st.state.terminated and st.state.terminated.exit_code == 0:
            continue
        try:
            tail = read_pod_log(core, pod.metadata.name, NAMESPACE,
                                container=st.name, tail_lines=1).strip()
        except ApiException:
            tail = ""
        waiting = st.state.waiting.reason if st.state and st.state.waiting else "running"
        return f"validator at {st.name} ({waiting}): {tail[-200:] or 'no output'}"
    return f"validator {pod.status.phase}"
