"""The real NVIDIA device plugin Helm chart, with GFD and its NFD subchart, installed by real Helm.

Only values are set: the locally built images (under the names the charts use, so no image is
overridden but the NFD tag), the RuntimeClass through which the NVIDIA DaemonSets get the GPUs
(nvidia-container-runtime in CDI mode), the driver and dev roots, the CDI device list strategy
for pods, and the host path of the CDI hook. The chart itself comes from the user (the upstream
tag they downloaded); only the project's CI points at ``../shared/upstream``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml

from conformance.common.errors import ComponentFailed, UsageError
from conformance.node.configs import RUNTIME_CLASS
from conformance.nvidia.device_plugin_chart import (  # the chart's facts, here for the node's use
    CHART_NAME,
    NAMESPACE,
    NFD_SUBCHART,
    RELEASE,
    VERSION,
)
from conformance.nvidia.labels import GPU_RESOURCE
from conformance.nvidia.sharing import (
    CONFIG_KEYS,
    MPS_DAEMON_COMPUTE_MODE,
    SharingConfig,
    advertised_count,
    validate_sharing_config,
)

INSTALL_TIMEOUT_S = 120.0
PLUGIN_CONTAINER = "nvidia-device-plugin-ctr"  # the plugin's container in the chart's DaemonSet
RUNTIME_INJECTION = "runtime"  # up(gpu_injection=...): the other is "cdi"
NVIDIA_SRC_ENV = "NVIDIA_SRC"  # --nvidia-src's default (the project's CI sets it)


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
    version = VERSION
    hint = (f"download https://github.com/NVIDIA/k8s-device-plugin/archive/refs/tags/"
            f"{version}.tar.gz (or `helm pull nvdp/nvidia-device-plugin --version "
            f"{version.lstrip('v')}`) and pass its folder as --nvidia-src")
    nvidia_src = nvidia_src or os.environ.get(NVIDIA_SRC_ENV)
    if not nvidia_src:
        raise UsageError(f"the NVIDIA device plugin chart {version} is needed: {hint} (or set "
                         f"${NVIDIA_SRC_ENV})")
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
        # pods get GPUs through CDI from the plugin's own spec; or (injection "runtime", as
        # the GPU Operator's toolkit sets a node up) the plugin names them in
        # NVIDIA_VISIBLE_DEVICES and the NVIDIA runtime, containerd's default, injects them
        "deviceListStrategy": "envvar" if gpu.get("injection") == RUNTIME_INJECTION
        else "cdi-cri",
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


def load_values(path: str | Path | None, flag: str = "--chart-values") -> dict:
    """A YAML values file (what ``helm install --values`` takes); one-line errors."""
    if not path:
        return {}
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"{flag} {path}: {exc}".splitlines()[0]) from exc
    if not isinstance(doc, dict):
        raise UsageError(f"{flag} {path}: not a map of values")
    return doc


def advertised(vals: dict, gpus: int | None) -> tuple[str, int | None]:
    """The resource and amount the plugin advertises under the chart's default sharing config
    (``config.default``, or the only entry of ``config.map``): ``nvidia.com/gpu`` x 1 without
    one, or for a config the plugin would reject (then it advertises nothing new)."""
    cfg = vals.get("config") or {}
    configs = cfg.get("map") or {}
    name = cfg.get("default") or (next(iter(configs)) if len(configs) == 1 else None)
    try:
        doc = yaml.safe_load(configs.get(name) or "") if name else None
    except yaml.YAMLError:
        doc = None
    config = (SharingConfig.from_document(doc)
              if isinstance(doc, dict) and not validate_sharing_config(doc) else None)
    if config is None:
        return GPU_RESOURCE, gpus
    return (config.advertised_name(GPU_RESOURCE),
            None if gpus is None else advertised_count(gpus, config.replicas_for(GPU_RESOURCE)))


def configures_mps(vals: dict) -> bool:
    """Whether any sharing config of the chart's ``config.map`` is MPS (the node's
    ``nvidia.com/device-plugin.config`` label can select any of them, not only the default)."""
    for text in ((vals.get("config") or {}).get("map") or {}).values():
        try:
            doc = yaml.safe_load(text or "")
        except yaml.YAMLError:
            continue
        if isinstance(doc, dict) and (doc.get("sharing") or {}).get(CONFIG_KEYS["mps"]):
            return True
    return False


def refuse_unasked_compute_mode_change(vals: dict, *, real_gpus: bool, allowed: bool) -> None:
    """A UsageError where ``vals`` would start the plugin's MPS control daemon on real GPUs
    without the user's leave: the daemon changes every GPU's compute mode (a change to the
    host, outlasting the node if the daemon is killed). The mock NVML has no compute mode."""
    if real_gpus and not allowed and configures_mps(vals):
        raise UsageError(f"the chart values configure MPS sharing: the device plugin's MPS "
                         f"control daemon sets every GPU's compute mode to "
                         f"{MPS_DAEMON_COMPUTE_MODE} (DEFAULT again when it stops); pass "
                         f"--allow-compute-mode-change to accept that, or share by time-slicing")


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
            log: Path, upgrade: bool = False, release: str = RELEASE,
            namespace: str = NAMESPACE) -> None:
    """``helm install`` (or ``upgrade``) without --wait: the caller waits, and says for what.
    The device plugin chart by default; ``release`` and ``namespace`` name another."""
    values_file = folder / ("chart-values.json" if release == RELEASE
                            else f"{release}-values.json")
    values_file.write_text(json.dumps(vals, indent=2))  # JSON is YAML
    verb = ["upgrade"] if upgrade else ["install", "--create-namespace"]
    argv = [str(helm), *verb, release, str(chart), "--namespace", namespace,
            f"--kubeconfig={kubeconfig}", f"--values={values_file}",
            f"--timeout={int(INSTALL_TIMEOUT_S)}s"]
    with log.open("ab") as fh:
        fh.write(f"$ {' '.join(argv)}\n".encode())
        proc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT,
                              timeout=INSTALL_TIMEOUT_S + 30, check=False)
    if proc.returncode != 0:
        from conformance.common.processes import log_tail

        raise ComponentFailed(f"helm {verb[0]}", f"exit status {proc.returncode}",
                              log_tail(log))
