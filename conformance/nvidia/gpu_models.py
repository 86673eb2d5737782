"""GPU models as GPU Feature Discovery (GFD) names and describes them, with their MIG profiles.

Where the facts come from:

- Product names: GFD labels ``nvidia.com/gpu.product`` with the NVML device name passed through
  ``sanitise()`` (k8s-device-plugin ``internal/lm/resource.go``: drop every character outside
  ``[A-Za-z0-9-_. ]``, then join the whitespace-separated words with ``-``), so the NVML name
  ``NVIDIA H100 80GB HBM3`` becomes ``NVIDIA-H100-80GB-HBM3``. :func:`sanitise` is that function.
- Families: ``getArchFamily`` in the same file, extended with blackwell (10, 12) and rubin (13)
  as ../shared/research/anchors.md §2c records for v0.20.0.
- Memory (MiB) is what NVML reports as total memory and GFD writes to ``nvidia.com/gpu.memory``.
- MIG profiles: the GPU instance profiles ``nvidia-smi mig -lgip`` lists (NVIDIA MIG User Guide,
  "Supported MIG Profiles"): memory in MiB, SMs, slices and the engines of each profile, which GFD
  writes as ``gpu.multiprocessors``, ``gpu.slices.{gi,ci}``, ``gpu.engines.*``
  (``expected-output-mig-*.txt``). The A100-40GB values match the labels NVIDIA's own MIG
  documentation shows (``mig-1g.5gb.memory=4864``, ``multiprocessors=14``, ``2g.10gb`` 9984/28).
- MIG layouts: the named configurations of the operator's ``default-mig-parted-config``
  (gpu-operator-v26.7.0 ``assets/state-mig-manager/0400_configmap.yaml``), selected per node with
  the ``nvidia.com/mig.config`` label. Only the ones for the models below are copied.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
MIG_DISABLED = "all-disabled"  # migManager.config.default in the chart's values.yaml

_UNSAFE = re.compile(r"[^A-Za-z0-9\-_. ]")


def sanitise(name: str) -> str:
    """GFD's ``sanitise()``: the NVML device name as it appears in ``nvidia.com/gpu.product``."""
    return "-".join(_UNSAFE.sub("", name).split())


def arch_family(major: int, minor: int) -> str:
    """GFD's ``nvidia.com/gpu.family`` for a CUDA compute capability (``getArchFamily``)."""
    if major == 7:
        return "volta" if minor < 5 else "turing"
    if major == 8:
        return "ampere" if minor < 9 else "ada-lovelace"
    return {1: "tesla", 2: "fermi", 3: "kepler", 5: "maxwell", 6: "pascal", 9: "hopper",
            10: "blackwell", 12: "blackwell", 13: "rubin"}.get(major, "undefined")


@dataclass(frozen=True)
class MigProfile:
    """One MIG GPU-instance profile (with its default, full-size compute instance)."""

    name: str  # e.g. "1g.5gb": what mixed-strategy resources and labels are named after
    memory_mib: int
    multiprocessors: int
    gi_slices: int
    ci_slices: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg: int
    ofa: int
    max_instances: int  # how many fit on one GPU

    @property
    def resource_name(self) -> str:
        """The mixed-strategy extended resource, e.g. ``nvidia.com/mig-1g.5gb``."""
        return MIG_RESOURCE_PREFIX + self.name

    def attributes(self) -> dict[str, int]:
        """The per-MIG-device label suffixes GFD writes and their values."""
        return {
            "memory": self.memory_mib,
            "multiprocessors": self.multiprocessors,
            "slices.gi": self.gi_slices,
            "slices.ci": self.ci_slices,
            "engines.copy": self.copy_engines,
            "engines.decoder": self.decoders,
            "engines.encoder": self.encoders,
            "engines.jpeg": self.jpeg,
            "engines.ofa": self.ofa,
        }


MigLayout = tuple[tuple[str, int], ...]  # (profile name, instances per GPU), e.g. (("1g.5gb", 7),)


@dataclass(frozen=True)
class GpuModel:
    nvml_name: str
    compute_major: int
    compute_minor: int
    memory_mib: int
    pci_device_id: str  # PCI device ID (vendor 10de), as mig-parted's device-filter spells it
    mig_capable: bool = False
    mig_slices: int = 0  # compute slices of one GPU (7 on A100/H100)
    mig_profiles: tuple[MigProfile, ...] = ()
    mig_configs: tuple[tuple[str, MigLayout], ...] = ()  # mig-parted config name -> layout

    @property
    def product(self) -> str:
        """``nvidia.com/gpu.product`` as GFD writes it (without sharing or MIG suffixes)."""
        return sanitise(self.nvml_name)

    @property
    def family(self) -> str:
        return arch_family(self.compute_major, self.compute_minor)

    def mig_profile(self, name: str) -> MigProfile:
        for profile in self.mig_profiles:
            if profile.name == name:
                return profile
        known = ", ".join(p.name for p in self.mig_profiles) or "none"
        raise ValueError(f"{self.product} has no MIG profile {name!r} (known: {known})")

    def mig_layout(self, config: str) -> MigLayout:
        """The MIG devices per GPU that the mig-parted configuration ``config`` creates."""
        if config == MIG_DISABLED:
            return ()
        for name, layout in self.mig_configs:
            if name == config:
                return layout
        known = ", ".join([MIG_DISABLED, *(n for n, _ in self.mig_configs)])
        raise ValueError(f"{self.product} has no MIG configuration {config!r} (known: {known})")


def _p(name: str, mem: int, sm: int, gi: int, ci: int, ce: int, dec: int, enc: int, jpg: int,
       ofa: int, most: int) -> MigProfile:
    return MigProfile(name, mem, sm, gi, ci, ce, dec, enc, jpg, ofa, most)


# name, memory MiB, SMs, GI slices, CI slices, copy, decoder, encoder, jpeg, ofa, max per GPU
_A100_40GB = (
    _p("1g.5gb", 4864, 14, 1, 1, 1, 0, 0, 0, 0, 7),
    _p("2g.10gb", 9984, 28, 2, 2, 2, 1, 0, 0, 0, 3),
    _p("3g.20gb", 20096, 42, 3, 3, 3, 2, 0, 0, 0, 2),
    _p("4g.20gb", 20096, 56, 4, 4, 4, 2, 0, 0, 0, 1),
    _p("7g.40gb", 40448, 98, 7, 7, 7, 5, 0, 1, 1, 1),
)
_A100_80GB = (
    _p("1g.10gb", 9728, 14, 1, 1, 1, 0, 0, 0, 0, 7),
    _p("2g.20gb", 19968, 28, 2, 2, 2, 1, 0, 0, 0, 3),
    _p("3g.40gb", 40192, 42, 3, 3, 3, 2, 0, 0, 0, 2),
    _p("4g.40gb", 40192, 56, 4, 4, 4, 2, 0, 0, 0, 1),
    _p("7g.80gb", 80896, 98, 7, 7, 7, 5, 0, 1, 1, 1),
)
_H100_80GB = (
    _p("1g.10gb", 9984, 16, 1, 1, 1, 1, 0, 1, 0, 7),
    _p("1g.20gb", 20096, 26, 1, 1, 1, 1, 0, 1, 0, 4),
    _p("2g.20gb", 20096, 32, 2, 2, 2, 2, 0, 2, 0, 3),
    _p("3g.40gb", 40448, 60, 3, 3, 3, 3, 0, 3, 0, 2),
    _p("4g.40gb", 40448, 64, 4, 4, 4, 4, 0, 4, 0, 1),
    _p("7g.80gb", 81152, 132, 7, 7, 8, 7, 0, 7, 1, 1),
)

# From default-mig-parted-config (assets/state-mig-manager/0400_configmap.yaml): the all-<profile>
# entries and the all-balanced entry of each device-filter.
_A100_40GB_CONFIGS: tuple[tuple[str, MigLayout], ...] = (
    ("all-1g.5gb", (("1g.5gb", 7),)),
    ("all-2g.10gb", (("2g.10gb", 3),)),
    ("all-3g.20gb", (("3g.20gb", 2),)),
    ("all-4g.20gb", (("4g.20gb", 1),)),
    ("all-7g.40gb", (("7g.40gb", 1),)),
    ("all-balanced", (("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1))),
)
_80GB_CONFIGS: tuple[tuple[str, MigLayout], ...] = (
    ("all-1g.10gb", (("1g.10gb", 7),)),
    ("all-2g.20gb", (("2g.20gb", 3),)),
    ("all-3g.40gb", (("3g.40gb", 2),)),
    ("all-4g.40gb", (("4g.40gb", 1),)),
    ("all-7g.80gb", (("7g.80gb", 1),)),
    ("all-balanced", (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1))),
)

GPU_MODELS: dict[str, GpuModel] = {
    m.product: m
    for m in (
        GpuModel("NVIDIA H100 80GB HBM3", 9, 0, 81559, "0x2330", mig_capable=True, mig_slices=7,
                 mig_profiles=_H100_80GB,
                 mig_configs=(*_80GB_CONFIGS, ("all-1g.20gb", (("1g.20gb", 4),)))),
        # H200 is MIG-capable (so GFD says mig.capable=true and the operator deploys the MIG
        # manager), but its profiles are not modelled here: it cannot be given a MIG layout.
        GpuModel("NVIDIA H200", 9, 0, 143771, "0x2335", mig_capable=True, mig_slices=7),
        GpuModel("NVIDIA A100-SXM4-40GB", 8, 0, 40960, "0x20B0", mig_capable=True, mig_slices=7,
                 mig_profiles=_A100_40GB, mig_configs=_A100_40GB_CONFIGS),
        GpuModel("NVIDIA A100-SXM4-80GB", 8, 0, 81920, "0x20B2", mig_capable=True, mig_slices=7,
                 mig_profiles=_A100_80GB, mig_configs=_80GB_CONFIGS),
        # Not MIG-capable; Tesla-T4 is the GPU of the upstream e2e CI (anchors.md §1a).
        GpuModel("NVIDIA L4", 8, 9, 23034, "0x27B8"),
        GpuModel("Tesla T4", 7, 5, 15360, "0x1EB8"),
    )
}


def get_model(product: str) -> GpuModel:
    """The model whose GFD product name is ``product``; ValueError listing the known ones."""
    try:
        return GPU_MODELS[product]
    except KeyError:
        raise ValueError(f"unknown GPU model {product!r}; known: {', '.join(GPU_MODELS)}") from None


def layout_counts(layout: MigLayout) -> Mapping[str, int]:
    """Instances per profile of a layout, profiles merged (``(("1g.5gb", 2),)`` -> {1g.5gb: 2})."""
    out: dict[str, int] = {}
    for name, count in layout:
        out[name] = out.get(name, 0) + count
    return out
