"""The real NVIDIA device plugin Helm chart, with GFD and its NFD subchart, installed by real Helm.

Only values are set: the locally built images (under the names the charts use, so no image is
overridden but the NFD tag), the RuntimeClass through which the NVIDIA DaemonSets get the GPUs
(nvidia-container-runtime in CDI mode), the driver and dev roots, the CDI device list strategy
for pods, and the host path of the CDI hook. The chart itself comes from the user (the upstream
tag they downloaded); only the project's CI points at ``../shared/upstream``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conformance.build import binaries
from conformance.common.errors import ComponentFailed, UsageError
from conformance.node.configs import RUNTIME_CLASS

RELEASE = "nvdp"  # as the upstream README installs it
NAMESPACE = "nvidia-device-plugin"
CHART_NAME = "nvidia-device-plugin"
INSTALL_TIMEOUT_S = 120.0
NFD_SUBCHART = "node-feature-discovery"


def chart_candidates(src: Path, version: str) -> list[Path]:
    """Where a chart may be below ``src``: an unpacked upstream tag (``deployments/helm``), the
    folder holding it, or a packaged chart (``helm pull nvdp/nvidia-device-plugin``)."""
    bare = version.lstrip("v")
    rel = Path("deployments/helm") / CHART_NAME
    return [
        src,
        src / rel,
        src / f"k8s-device-plugin-{version}" / rel,
        src / f"k8s-device-plugin-{bare}" / rel,
        src / "k8s-device-plugin" / rel,
        src.parent / f"k8s-device-plugin-{version}" / rel,  # --nvidia-src pointed at .../src
        src / f"{CHART_NAME}-{bare}.tgz",
    ]


def _chart_version(chart: Path) -> str | None:
    if chart.is_dir():
        for line in (chart / "Chart.yaml").read_text().splitlines():
            if line.startswith("version:"):
                return line.split(":", 1)[1].strip().strip('"')
        return None
    return chart.name.removeprefix(f"{CHART_NAME}-").removesuffix(".tgz")


def find_chart(nvidia_src: str | Path | None) -> Path:
    """The device plugin chart of the pinned version, or a one-line error naming the download."""
    version = binaries.read_versions()["NVIDIA_DEVICE_PLUGIN_VERSION"]
    hint = (f"download https://github.com/NVIDIA/k8s-device-plugin/archive/refs/tags/"
            f"{version}.tar.gz (or `helm pull nvdp/nvidia-device-plugin --version "
            f"{version.lstrip('v')}`) and pass its folder as --nvidia-src")
    if not nvidia_src:
        raise UsageError(f"the NVIDIA device plugin chart {version} is needed: {hint}")
    src = Path(nvidia_src).expanduser().resolve()
    if not src.exists():
        raise UsageError(f"--nvidia-src {src}: no such folder; {hint}")
    for cand in chart_candidates(src, version):
        is_chart = (cand.is_dir() and (cand / "Chart.yaml").is_file()
                    and f"name: {CHART_NAME}" in (cand / "Chart.yaml").read_text())
        if is_chart or (cand.is_file() and cand.suffix == ".tgz"):
            found = _chart_version(cand)
            if found != version.lstrip("v"):
                raise UsageError(f"{cand} is chart version {found}, not {version}: {hint}")
            if cand.is_dir() and not list((cand / "charts").glob(f"{NFD_SUBCHART}-*.tgz")):
                raise UsageError(f"{cand} lacks its NFD subchart (charts/{NFD_SUBCHART}-*.tgz): "
                                 f"run `helm dependency build {cand}` once, or {hint}")
            return cand
    raise UsageError(f"no {CHART_NAME} chart {version} under {src}: {hint}")


def values(*, gpu: dict, nvidia_ctk: Path, nfd_version: str, node_label: str) -> dict:
    """Chart values for this node (see the module docstring for why each is set)."""
    return {
        "runtimeClassName": RUNTIME_CLASS,
        "deviceListStrategy": "cdi-cri",  # pods get GPUs through CDI, from the plugin's own spec
        "failOnInitError": True,
        "nvidiaDriverRoot": gpu["driver_root"],
        "nvidiaDevRoot": gpu["dev_root"],
        "cdi": {"nvidiaHookPath": str(nvidia_ctk)},
        "gfd": {"enabled": True},
        # the plugin and GFD run on the real node only (the control plane may hold KWOK nodes)
        "nodeSelector": {node_label: "true"},
        "nfd": {
            "enabled": True,
            "image": {"tag": nfd_version},
            # nfd-gc is not built (its job, removing NodeFeatures of deleted nodes, has nothing
            # to do on a one-node cluster); the prune job runs only on uninstall
            "gc": {"enable": False},
            "postDeleteCleanup": False,
            "worker": {"nodeSelector": {node_label: "true"}},
        },
    }


def merge(base: dict, extra: dict) -> dict:
    """``extra`` over ``base``, maps merged key by key (as Helm merges values files)."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def install(*, helm: Path, kubeconfig: Path, chart: Path, vals: dict, folder: Path,
            log: Path, upgrade: bool = False) -> None:
    """``helm install`` (or ``upgrade``) without --wait: the caller waits, and says for what."""
    values_file = folder / "chart-values.json"
    values_file.write_text(json.dumps(vals, indent=2))  # JSON is YAML
    verb = ["upgrade"] if upgrade else ["install", "--create-namespace"]
    argv = [str(helm), *verb, RELEASE, str(chart), "--namespace", NAMESPACE,
            f"--kubeconfig={kubeconfig}", f"--values={values_file}",
            f"--timeout={int(INSTALL_TIMEOUT_S)}s"]
    with log.open("ab") as fh:
        fh.write(f"$ {' '.join(argv)}\n".encode())
        proc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT,
                              timeout=INSTALL_TIMEOUT_S + 30, check=False)
    if proc.returncode != 0:
        from conformance.sim.controlplane import log_tail

        raise ComponentFailed(f"helm {verb[0]}", f"exit status {proc.returncode}",
                              log_tail(log))
