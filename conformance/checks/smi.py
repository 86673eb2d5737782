"""Parsing what ``nvidia-smi -L`` (or, where GPUs cannot be opened, ``ls /dev``) prints inside
a pod."""

from __future__ import annotations

import re

_GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9a-fA-F-]+)\)", re.M)
_MIG_LINE = re.compile(r"MIG .*\(UUID: (MIG-[0-9a-fA-F-]+)\)")
SMI_SCRIPT = ("nvidia-smi -L 2>&1 || echo 'nvidia-smi: unavailable'; "
              "echo \"NVIDIA_VISIBLE_DEVICES=${NVIDIA_VISIBLE_DEVICES:-}\"")


# Where the GPUs can be handed out but not opened (the mock NVML's node): the device nodes a
# pod got, listed by a shell (the node imports its busybox under this name).
DEVICE_PROBE_IMAGE = "docker.io/library/busybox:1.36.1"
DEVICE_NODES_SCRIPT = "ls /dev"
_DEVICE_NODE = re.compile(r"^nvidia(\d+)$", re.M)


def device_nodes(output: str) -> list[str]:
    """The GPU device nodes (``nvidia0``...) in what ``ls /dev`` printed."""
    return [f"nvidia{m}" for m in _DEVICE_NODE.findall(output)]


def printed(script: str, output: str) -> bool:
    """Whether ``output`` holds what ``script`` always prints, so it is the script's result:
    SMI_SCRIPT's NVIDIA_VISIBLE_DEVICES line, any entry of DEVICE_NODES_SCRIPT's ``/dev``."""
    if script == SMI_SCRIPT:
        return visible_devices(output) is not None
    return bool(output.strip())


def gpu_uuids(output: str) -> list[str]:
    return [m.group(3) for m in _GPU_LINE.finditer(output)]


def mig_uuids(output: str) -> list[str]:
    return _MIG_LINE.findall(output)


def visible_devices(output: str) -> str | None:
    for line in output.splitlines():
        if line.startswith("NVIDIA_VISIBLE_DEVICES="):
            return line.split("=", 1)[1]
    return None
