"""Where the control-plane binaries live, and building them when they are missing.

Binaries are cached outside the clone, keyed by component and version:
``$GPUCONF_CACHE/bin/<component>-<version>/<binary>`` (default cache ``~/.cache/gpu-conformance``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from conformance.common.errors import UsageError

PACKAGE_DIR = Path(__file__).resolve().parent
BUILD_SCRIPT = PACKAGE_DIR / "build-controlplane.sh"
VERSIONS_FILE = PACKAGE_DIR / "versions.env"


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    versions: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            versions[key.strip()] = value.strip()
    return versions


def cache_dir() -> Path:
    return Path(os.environ.get("GPUCONF_CACHE", Path.home() / ".cache" / "gpu-conformance"))


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kwok: Path
    helm: Path
    kubernetes_version: str

    def missing(self) -> list[Path]:
        """Missing control-plane binaries (helm is only needed to install charts)."""
        return [p for p in self.control_plane() if not p.is_file()]

    def control_plane(self) -> list[Path]:
        return [self.etcd, self.kube_apiserver, self.kube_controller_manager,
                self.kube_scheduler, self.kwok]


def locate() -> Binaries:
    v = read_versions()
    root = cache_dir() / "bin"
    k8s = root / f"kubernetes-{v['KUBERNETES_VERSION']}"
    return Binaries(
        etcd=root / f"etcd-{v['ETCD_VERSION']}" / "etcd",
        kube_apiserver=k8s / "kube-apiserver",
        kube_controller_manager=k8s / "kube-controller-manager",
        kube_scheduler=k8s / "kube-scheduler",
        kwok=root / f"kwok-{v['KWOK_VERSION']}" / "kwok",
        helm=root / f"helm-{v['HELM_VERSION']}" / "helm",
        kubernetes_version=v["KUBERNETES_VERSION"],
    )


@dataclass(frozen=True)
class ComponentBuild:
    """A controller built from its Go module with the CRDs it needs (build-controlplane.sh
    kueue, karpenter): ``<folder>/<binary>`` and ``<folder>/crds/*.yaml``."""

    folder: Path
    version: str
    binary: str

    @property
    def manager(self) -> Path:
        return self.folder / self.binary

    @property
    def crds(self) -> list[Path]:
        return sorted((self.folder / "crds").glob("*.yaml"))


def _not_built(what: str, folder: Path, component: str) -> UsageError:
    """The usage error for a component build-controlplane.sh builds on demand."""
    return UsageError(f"{what} is not built (under {folder}): run `make setup` or "
                      f"`gpuconf sim build {component}` (needs the Go toolchain)")


def _require_build(title: str, component: str, version_key: str,
                   binary: str) -> ComponentBuild:
    v = read_versions()[version_key]
    build = ComponentBuild(cache_dir() / "bin" / f"{component}-{v}", v, binary)
    if not (build.manager.is_file() and build.crds):
        raise _not_built(f"{title} {v}", build.folder, component)
    return build


def require_kueue() -> ComponentBuild:
    """Kueue's build, or a usage error that names the build step."""
    return _require_build("Kueue", "kueue", "KUEUE_VERSION", "kueue")


def require_karpenter() -> ComponentBuild:
    """Karpenter's KWOK provider build, or a usage error that names the build step."""
    return _require_build("Karpenter", "karpenter", "KARPENTER_VERSION", "karpenter-kwok")


def _require_binary(title: str, component: str, version_key: str, binary: str,
                    folder: str | None = None) -> Path:
    v = read_versions()[version_key]
    path = cache_dir() / "bin" / f"{folder or component}-{v}" / binary
    if not path.is_file():
        raise _not_built(f"{title} {v}", path.parent, component)
    return path


def require_sonobuoy() -> Path:
    """The Sonobuoy CLI (build-controlplane.sh sonobuoy), or a usage error naming the build."""
    return _require_binary("Sonobuoy", "sonobuoy", "SONOBUOY_VERSION", "sonobuoy")


def require_kind() -> Path:
    """The kind CLI (build-controlplane.sh kind; opt-in), or a usage error naming the build."""
    return _require_binary("kind", "kind", "KIND_VERSION", "kind")


def require_metrics_adapter() -> Path:
    """custom-metrics-apiserver's test adapter (build-controlplane.sh metrics-adapter), or a
    usage error naming the build."""
    return _require_binary("the custom metrics test adapter", "metrics-adapter",
                           "CUSTOM_METRICS_APISERVER_VERSION", "test-adapter",
                           folder="custom-metrics-apiserver")


def require() -> Binaries:
    """The binaries, or a usage error that names the fix."""
    bins = locate()
    missing = bins.missing()
    if missing:
        names = ", ".join(p.name for p in missing)
        raise UsageError(
            f"control-plane binaries missing ({names}) under {cache_dir() / 'bin'}: "
            "run `make setup` or `gpuconf sim build` (needs the Go toolchain)"
        )
    return bins


def build(component: str = "all") -> None:
    """Build what is missing with the Go toolchain (minutes on a cold cache)."""
    if shutil.which("go") is None:
        raise UsageError("the Go toolchain is missing: install Go >= 1.26 and re-run "
                         "`gpuconf sim build`")
    subprocess.run(["bash", str(BUILD_SCRIPT), component], check=True)


# ---- the real node (conformance/binaries/build-node.sh) ------------------------------------
NODE_BUILD_SCRIPT = PACKAGE_DIR / "build-node.sh"


@dataclass(frozen=True)
class NodeBinaries:
    """The real node's binaries in the cache (see build-node.sh for where each comes from)."""

    kubelet: Path
    containerd: Path
    containerd_shim: Path
    ctr: Path
    runc: Path
    cni_dir: Path  # bridge, host-local, loopback
    nvidia_ctk: Path
    nvidia_container_runtime: Path
    nfd_master: Path
    nfd_worker: Path
    nvidia_device_plugin: Path
    gpu_feature_discovery: Path
    config_manager: Path
    mps_control_daemon: Path  # the chart's MPS control daemon (sharing.mps)
    mock_nvml_dir: Path  # libnvidia-ml.so.<version> and configs/*.yaml (GPU profiles)
    busybox: Path
    prometheus: Path  # the node's monitoring system; optional (the node runs without it)
    traefik_dir: Path  # the node's Gateway API implementation and the CRDs (crds/); optional
    versions: dict

    @property
    def mock_nvml(self) -> Path:
        return self.mock_nvml_dir / f"libnvidia-ml.so.{self.versions['MOCK_NVML_LIB_VERSION']}"

    @property
    def busybox_version(self) -> str:
        return self.busybox.parent.name.removeprefix("busybox-")

    def groups(self) -> dict[str, list[Path]]:
        """Binaries by the build step (build-node.sh component) that makes them."""
        return {
            "kubelet": [self.kubelet],
            "containerd": [self.containerd, self.containerd_shim, self.ctr],
            "runc": [self.runc],
            "cni": [self.cni_dir / n for n in ("bridge", "host-local", "loopback")],
            "toolkit": [self.nvidia_ctk, self.nvidia_container_runtime],
            "nfd": [self.nfd_master, self.nfd_worker],
            "device-plugin": [self.nvidia_device_plugin, self.gpu_feature_discovery,
                              self.config_manager, self.mps_control_daemon],
            "mock-nvml": [self.mock_nvml],
            "busybox": [self.busybox],
        }

    def missing(self, *, mock_nvml: bool = True) -> list[str]:
        """Build steps whose binaries are not all there (the mock NVML only when asked for)."""
        return [step for step, paths in self.groups().items()
                if (mock_nvml or step != "mock-nvml") and not all(p.is_file() for p in paths)]


def locate_node() -> NodeBinaries:
    v = read_versions()
    root = cache_dir() / "bin"
    containerd = root / f"containerd-{v['CONTAINERD_VERSION']}"
    toolkit = root / f"nvidia-container-toolkit-{v['NVIDIA_CONTAINER_TOOLKIT_VERSION']}"
    nfd = root / f"nfd-{v['NFD_VERSION']}"
    dp = root / f"nvidia-device-plugin-{v['NVIDIA_DEVICE_PLUGIN_VERSION']}"
    # busybox is this host's (Debian busybox-static), cached under its own version
    busybox = sorted(root.glob("busybox-v*/busybox"))
    return NodeBinaries(
        kubelet=root / f"kubelet-{v['KUBERNETES_VERSION']}" / "kubelet",
        containerd=containerd / "containerd",
        containerd_shim=containerd / "containerd-shim-runc-v2",
        ctr=containerd / "ctr",
        runc=root / f"runc-{v['RUNC_VERSION']}" / "runc",
        cni_dir=root / f"cni-plugins-{v['CNI_PLUGINS_VERSION']}",
        nvidia_ctk=toolkit / "nvidia-ctk",
        nvidia_container_runtime=toolkit / "nvidia-container-runtime",
        nfd_master=nfd / "nfd-master",
        nfd_worker=nfd / "nfd-worker",
        nvidia_device_plugin=dp / "nvidia-device-plugin",
        gpu_feature_discovery=dp / "gpu-feature-discovery",
        config_manager=dp / "config-manager",
        mps_control_daemon=dp / "mps-control-daemon",
        mock_nvml_dir=root / f"mock-nvml-{v['MOCK_NVML_COMMIT']}",
        busybox=busybox[-1] if busybox else root / "busybox-v0" / "busybox",
        prometheus=root / f"prometheus-{v['PROMETHEUS_VERSION']}" / "prometheus",
        traefik_dir=root / f"traefik-{v['TRAEFIK_VERSION']}-gwapi-{v['GATEWAY_API_VERSION']}",
        versions=v,
    )


def require_node(*, mock_nvml: bool = True) -> NodeBinaries:
    """The node's binaries, or a usage error that names the build steps still to run."""
    node = locate_node()
    missing = node.missing(mock_nvml=mock_nvml)
    if missing:
        raise UsageError(
            f"node binaries missing ({', '.join(missing)}) under {cache_dir() / 'bin'}: run "
            "`make setup NVIDIA_SRC=DIR` or `bash conformance/binaries/build-node.sh --nvidia-src "
            "DIR` (DIR: the upstream NVIDIA sources; needs Go, gcc and libseccomp-dev)"
        )
    return node


@dataclass(frozen=True)
class OperatorBuild:
    """The GPU Operator built from source (build-node.sh gpu-operator): its binaries and the
    manifests it and its validator read at run time."""

    folder: Path
    version: str

    @property
    def binaries(self) -> list[Path]:
        return [self.folder / n for n in ("gpu-operator", "nvidia-validator",
                                          "cleanup-gpuclusters")]

    @property
    def manifest_dirs(self) -> dict[str, Path]:
        """Folder in the build -> where the operator's image holds it (upstream's layout)."""
        return {"/opt/gpu-operator": self.folder / "assets",
                "/opt/gpu-operator/manifests": self.folder / "manifests",
                "/opt/validator/manifests": self.folder / "validator-manifests"}


def require_operator() -> OperatorBuild:
    """The GPU Operator's build, or a usage error that names the build step."""
    v = read_versions()["GPU_OPERATOR_VERSION"]
    build = OperatorBuild(cache_dir() / "bin" / f"gpu-operator-{v}", v)
    missing = [p.name for p in [*build.binaries, *build.manifest_dirs.values()] if not p.exists()]
    if missing:
        raise UsageError(
            f"the GPU Operator {v} is not built ({', '.join(missing)} missing under "
            f"{build.folder}): run `bash conformance/binaries/build-node.sh --nvidia-src DIR "
            "gpu-operator` (DIR: the gpu-operator tag's source, as downloaded from GitHub)")
    return build
