"""NVIDIA driver versions: comparing them, and the version labels GFD derives from them.

Driver versions are dotted integers (``580.105.08``, ``580.159.04``). GFD writes them, and the
CUDA version the driver supports, as ``nvidia.com/cuda.driver-version.*`` (v0.15 and later) and
the older ``nvidia.com/cuda.driver.*`` names (k8s-device-plugin v0.20.0 ``internal/lm/nvml.go``,
``expected-output.txt``); a driver version is "X.Y[.Z]" there.
"""

from __future__ import annotations

import re

from conformance.nvidia import labels as L

_DRIVER_VERSION = re.compile(r"^[0-9]+\.[0-9]+(\.[0-9]+)?$")


def parse(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in version.strip().split("."))
    except ValueError:
        raise ValueError(f"not a driver version: {version!r} (expected e.g. 580.105.08)") from None


def at_least(version: str, minimum: str) -> bool:
    return parse(version) >= parse(minimum)


def is_driver_version(version: str) -> bool:
    """Whether ``version`` has GFD's driver-version format "X.Y[.Z]"."""
    return bool(_DRIVER_VERSION.match(version))


def version_labels(driver_version: str, cuda_version: str) -> dict[str, str]:
    """Every label GFD writes for a driver version and the CUDA version it supports."""
    if not is_driver_version(driver_version):
        raise ValueError(f'driver version "{driver_version}" does not match format "X.Y[.Z]"')
    major, minor, *rest = driver_version.split(".")
    rev = rest[0] if rest else ""
    cuda_major, cuda_minor = cuda_version.split(".")
    return {
        "nvidia.com/cuda.driver.major": major, "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        L.DRIVER_MAJOR: major, "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev, L.DRIVER_FULL: driver_version,
        "nvidia.com/cuda.runtime.major": cuda_major, "nvidia.com/cuda.runtime.minor": cuda_minor,
        "nvidia.com/cuda.runtime-version.major": cuda_major,
        "nvidia.com/cuda.runtime-version.minor": cuda_minor,
        L.RUNTIME_FULL: f"{cuda_major}.{cuda_minor}",
    }


def version_from_labels(labels: dict[str, str]) -> str | None:
    """The driver version GFD reports on a node: ``cuda.driver-version.full``, else (GFD before
    v0.15.0 wrote only these) ``cuda.driver.major/minor/rev`` joined."""
    full = labels.get(L.DRIVER_FULL)
    if full:
        return full
    parts = [labels.get(f"nvidia.com/cuda.driver.{p}") for p in ("major", "minor", "rev")]
    if parts[0] and parts[1]:
        return ".".join(p for p in parts if p)
    return None


def driver_labels(driver_version: str) -> dict[str, str]:
    """Only the driver part of :func:`version_labels` (a node whose driver changed)."""
    return {k: v for k, v in version_labels(driver_version, "0.0").items()
            if k.startswith(("nvidia.com/cuda.driver.", "nvidia.com/cuda.driver-version."))}


def label_inconsistencies(labels: dict[str, str]) -> list[str]:
    """Version labels whose ``.full`` value disagrees with their parts."""
    out = []
    full = labels.get(L.DRIVER_FULL)
    parts = [labels.get(f"nvidia.com/cuda.driver-version.{p}") for p in ("major", "minor",
                                                                          "revision")]
    if full and all(parts) and full != ".".join(p for p in parts if p):
        out.append(f"cuda.driver-version.full={full} but its parts say {'.'.join(parts)}")
    rt_full = labels.get(L.RUNTIME_FULL)
    rt_parts = [labels.get(f"nvidia.com/cuda.runtime-version.{p}") for p in ("major", "minor")]
    if rt_full and all(rt_parts) and rt_full != ".".join(rt_parts):
        out.append(f"cuda.runtime-version.full={rt_full} but its parts say {'.'.join(rt_parts)}")
    return out
