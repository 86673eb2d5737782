"""The node's GPUs: NVIDIA's mock NVML with a named profile on a host without GPUs, or the real
driver (``--driver-root``) on a GPU host; and the CDI spec nvidia-ctk generates from either.

Mock NVML (k8s-test-infra ``pkg/gpu/mocknvml``, what NVIDIA's own CI runs the device plugin, GFD
and the DRA driver on): a fake driver root is laid out the way the mock expects it,
``<root>/usr/lib64/libnvidia-ml.so.<version>`` with ``<root>/config/config.yaml`` (the profile,
found by the library itself from its own path) and ``<root>/dev/nvidia*`` device nodes (real
character devices with the driver's numbers: listing and passing them to containers works,
opening them does not, as there is no kernel driver). Containers get the library at
``/usr/lib64`` through CDI, where the mock would look for ``/config/config.yaml``; the chart
mounts its own ``/config`` there, so the profile goes in as ``MOCK_NVML_CONFIG`` instead, added
to the nvidia-ctk spec (the only change made to it, and only for the mock).

Real driver (the GPU machine): driver root and dev root differ there (/usr/local/nvidia holds
lib64/ and bin/, the device nodes are in /dev), so both are given; CDI hooks run the cached
nvidia-ctk, whose host path the spec names.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from conformance.binaries.binaries import NodeBinaries
from conformance.common.errors import ComponentFailed, UsageError

MAX_MOCK_GPUS = 8  # the mock's limit (its README)
MOCK_NVML = "mock-nvml"  # NodeState.gpu["source"]: the mock NVML ...
DRIVER = "driver"  # ... or the real driver
# the profile's folder, mounted whole: the mock reads ``overrides.yaml`` beside its config
# (runtime failure injection, see :func:`write_mock_overrides`)
MOCK_CONFIG_DIR_IN_CONTAINER = "/run/gpuconf-mock-nvml"
MOCK_OVERRIDES = "overrides.yaml"
# device numbers of the NVIDIA driver (nvidia-uvm's major is dynamic; 238 as on the GPU machine)
NVIDIA_MAJOR = 195
NVIDIACTL_MINOR = 255
UVM_MAJOR = 238
CDI_GENERATE_TIMEOUT_S = 60.0
LIB_DIRS = ("lib64", "usr/lib64", "lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu")


@dataclass(frozen=True)
class Profile:
    count: int
    model: str  # the mock config's short name: h100, a100, ...

    @property
    def name(self) -> str:
        return f"{self.count}x{self.model.upper()}"


def mock_models(nb: NodeBinaries) -> list[str]:
    configs = nb.mock_nvml_dir / "configs"
    return sorted(p.name.removeprefix("mock-nvml-config-").removesuffix(".yaml")
                  for p in configs.glob("mock-nvml-config-*.yaml"))


def parse_profile(text: str, models: list[str]) -> Profile:
    """``8xH100``, ``1xa100``, ``H100`` (8 GPUs): a GPU count and a mock NVML model."""
    m = re.fullmatch(r"(?:(\d+)x)?([a-z0-9]+)", text.strip().lower())
    if not m or m.group(2) not in models:
        raise UsageError(f"unknown GPU profile {text!r}: use <count>x<model>, model one of "
                         f"{', '.join(models)} (e.g. 8xH100)")
    count = int(m.group(1) or MAX_MOCK_GPUS)
    if not 1 <= count <= MAX_MOCK_GPUS:
        raise UsageError(f"GPU profile {text!r}: the mock NVML simulates 1 to "
                         f"{MAX_MOCK_GPUS} GPUs")
    return Profile(count, m.group(2))


def _mknod(path: Path, major: int, minor: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    os.mknod(path, 0o666 | 0o020000, os.makedev(major, minor))  # S_IFCHR


def mock_driver_root(nb: NodeBinaries, profile: Profile, root: Path) -> dict:
    """Lay out a fake driver root for ``profile``; returns what ``status`` reports about it."""
    lib_version = nb.versions["MOCK_NVML_LIB_VERSION"]
    libdir = root / "usr" / "lib64"
    libdir.mkdir(parents=True, exist_ok=True)
    lib = libdir / f"libnvidia-ml.so.{lib_version}"
    try:
        os.link(nb.mock_nvml, lib)  # same filesystem as the cache: no copy
    except OSError:
        lib.write_bytes(nb.mock_nvml.read_bytes())
    (libdir / "libnvidia-ml.so.1").symlink_to(lib.name)
    (libdir / "libnvidia-ml.so").symlink_to("libnvidia-ml.so.1")

    doc = yaml.safe_load((nb.mock_nvml_dir / "configs" /
                          f"mock-nvml-config-{profile.model}.yaml").read_text())
    devices = doc.get("devices") or []
    if profile.count < len(devices):
        doc["devices"] = devices[:profile.count]
        # the fabric and PCIe topologies name all eight GPUs: a smaller profile has neither
        doc.pop("nvlink", None)
        doc.pop("pcie_topology", None)
    doc.setdefault("system", {})["num_devices"] = profile.count
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "config.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))

    dev = root / "dev"
    dev.mkdir(exist_ok=True)
    for i in range(profile.count):
        _mknod(dev / f"nvidia{i}", NVIDIA_MAJOR, i)
    _mknod(dev / "nvidiactl", NVIDIA_MAJOR, NVIDIACTL_MINOR)
    _mknod(dev / "nvidia-uvm", UVM_MAJOR, 0)
    _mknod(dev / "nvidia-uvm-tools", UVM_MAJOR, 1)
    return {
        "source": MOCK_NVML, "profile": profile.name, "count": profile.count,
        "model": (doc.get("device_defaults") or {}).get("name", profile.model),
        "driver_version": (doc.get("system") or {}).get("driver_version", lib_version),
        "mock_nvml": f"NVIDIA/k8s-test-infra@{nb.versions['MOCK_NVML_COMMIT']}",
        "driver_root": str(root), "dev_root": str(root),
    }


def write_mock_overrides(driver_root: Path, devices: dict[int, dict] | None) -> Path:
    """The mock NVML's runtime overrides (k8s-test-infra ``nvml-mock-ctl``'s file): per GPU
    index, config merged over the profile, e.g. ``{"failure": {"mode": "lost"}}`` (its
    failure injection: lost, fallen_off_bus, ecc_uncorrectable with an Xid). Every process
    that loads the mock re-reads it within seconds; a failure trips on that process's next
    call about the device. None removes the overrides."""
    path = driver_root / "config" / MOCK_OVERRIDES
    if devices is None:
        path.unlink(missing_ok=True)
        return path
    doc = {"version": 1, "devices": {str(i): cfg for i, cfg in sorted(devices.items())}}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
    tmp.replace(path)
    return path


def check_driver_root(driver_root: Path, dev_root: Path) -> None:
    """One-line errors for a driver root that cannot be one."""
    if not driver_root.is_dir():
        raise UsageError(f"--driver-root {driver_root}: no such folder")
    if not any((driver_root / d / "libnvidia-ml.so.1").exists() for d in LIB_DIRS):
        raise UsageError(f"--driver-root {driver_root}: no libnvidia-ml.so.1 in "
                         f"{', '.join(LIB_DIRS)} below it (the NVIDIA driver's libraries)")
    if not (dev_root / "dev" / "nvidiactl").exists():
        raise UsageError(f"--dev-root {dev_root}: no dev/nvidiactl below it (the NVIDIA "
                         "driver's device nodes; where the driver root is not the dev root, "
                         "pass --dev-root)")


def real_driver(driver_root: Path, dev_root: Path) -> dict:
    check_driver_root(driver_root, dev_root)
    return {"source": DRIVER, "profile": None, "driver_root": str(driver_root),
            "dev_root": str(dev_root)}


def generate_cdi(nb: NodeBinaries, gpu: dict, out: Path, log: Path) -> list[str]:
    """``nvidia-ctk cdi generate`` from the driver (or the mock) into ``out``; returns the
    device names. For the mock, the profile is added as MOCK_NVML_CONFIG (see the module doc)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [str(nb.nvidia_ctk), "cdi", "generate", f"--driver-root={gpu['driver_root']}",
            f"--dev-root={gpu['dev_root']}", f"--nvidia-cdi-hook-path={nb.nvidia_ctk}",
            "--format=yaml", f"--output={out}"]
    with log.open("ab") as fh:
        fh.write(f"$ {' '.join(argv)}\n".encode())
        try:
            proc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT,
                                  timeout=CDI_GENERATE_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as exc:
            raise ComponentFailed("nvidia-ctk cdi generate", "timed out", "") from exc
    if proc.returncode != 0 or not out.is_file():
        from conformance.common.processes import log_tail

        raise ComponentFailed("nvidia-ctk cdi generate", f"exit status {proc.returncode}",
                              log_tail(log))
    spec = yaml.safe_load(out.read_text())
    if gpu["source"] == MOCK_NVML:
        edits = spec.setdefault("containerEdits", {})
        edits.setdefault("env", []).append(
            f"MOCK_NVML_CONFIG={MOCK_CONFIG_DIR_IN_CONTAINER}/config.yaml")
        edits.setdefault("mounts", []).append({
            "hostPath": str(Path(gpu["driver_root"]) / "config"),
            "containerPath": MOCK_CONFIG_DIR_IN_CONTAINER,
            "options": ["ro", "nosuid", "nodev", "bind"]})
        out.write_text(yaml.safe_dump(spec, sort_keys=False))
    return [d["name"] for d in spec.get("devices") or []]
