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

from conformance.errors import UsageError

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
