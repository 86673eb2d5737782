"""Parsing what ``nvidia-smi -L`` prints inside a pod."""

from __future__ import annotations

import re

_GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9a-fA-F-]+)\)", re.M)
_MIG_LINE = re.compile(r"MIG .*\(UUID: (MIG-[0-9a-fA-F-]+)\)")
SMI_SCRIPT = ("nvidia-smi -L 2>&1 || echo 'nvidia-smi: unavailable'; "
              "echo \"NVIDIA_VISIBLE_DEVICES=${NVIDIA_VISIBLE_DEVICES:-}\"")


def gpu_uuids(output: str) -> list[str]:
    return [m.group(3) for m in _GPU_LINE.finditer(output)]


def mig_uuids(output: str) -> list[str]:
    return _MIG_LINE.findall(output)


def visible_devices(output: str) -> str | None:
    for line in output.splitlines():
        if line.startswith("NVIDIA_VISIBLE_DEVICES="):
            return line.split("=", 1)[1]
    return None
