"""Shared by the unit tests of the sim's labels, profiles, sharing and operands (split from one
file by what each tests): where upstream's data is, and the nodes and labels of a profile.

Upstream facts are checked against ../shared/upstream where that tree exists (the project's CI);
elsewhere those tests skip and the rest run on the packaged contract copies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.sim import gfd
from conformance.sim.profiles import Profile, get_profile

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
DEVICE_PLUGIN = SHARED / "upstream" / "k8s-device-plugin-v0.20.0"
OPERATOR = SHARED / "upstream" / "gpu-operator-v26.7.0"

P5 = {"machine_type": "p5.48xlarge", "cpu": 192, "memory_gib": 2048}
P4D = {"machine_type": "p4d.24xlarge", "cpu": 96, "memory_gib": 1152}


def upstream(path: Path) -> Path:
    """``path`` under ../shared, or skip: only the project's CI has that tree."""
    if not path.exists():
        pytest.skip(f"{path} is absent: upstream data lives in ../shared, which only the "
                    "project's CI has")
    return path


def gpu_nodes(profile: Profile):
    for group, index, name in profile.iter_nodes():
        if group.is_gpu:
            yield group, index, name


def labels_of(profile: str, group: str, **kwargs) -> dict[str, str]:
    return gfd.node_labels(get_profile(profile).group(group), 0, **kwargs)
