"""A kind config as kind reads it: mounts' host paths made absolute against the config's folder.

kind resolves a relative ``extraMounts[].hostPath`` against its own working directory, which is
wherever ``gpuconf`` was started; the configs in ``kind-config/`` name files beside them
(``no-gpu.yaml``'s CNI conflist), so they are resolved here and kind reads a copy.
"""

from __future__ import annotations

from pathlib import Path

import yaml


def with_absolute_mounts(config_file: Path, into: Path) -> Path:
    """``config_file`` written to ``into`` with each relative mount host path made absolute
    (against ``config_file``'s folder); the config itself when none is relative."""
    config = yaml.safe_load(config_file.read_text()) or {}
    relative = [mount for node in config.get("nodes") or []
                for mount in node.get("extraMounts") or []
                if not Path(str(mount.get("hostPath", "/"))).is_absolute()]
    if not relative:
        return config_file
    for mount in relative:
        mount["hostPath"] = str((config_file.parent / mount["hostPath"]).resolve())
    resolved = into / config_file.name
    resolved.write_text(yaml.safe_dump(config, sort_keys=False))
    return resolved
