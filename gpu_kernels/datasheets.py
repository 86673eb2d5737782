"""NVIDIA datasheet peaks of the GPUs users run most, and the bars derived from them.

The one table of GPU peaks in the project (``gpu_kernels`` is a dependency-free leaf, so it
lives here and ``conformance`` reads it from here). A GPU is found by the exact name NVML and
the CUDA runtime report (``nvidia-smi --query-gpu=name``): a substring would take an
"NVIDIA GH200 480GB" for an "NVIDIA H200", or an H100 PCIe for an H100 SXM.

Figures per GPU, in the units of the kernels' results: ``membw`` memory bandwidth in TB/s;
``fp32`` and ``fp64`` the FP32 / FP64 lanes, ``gemm-fp64`` the FP64 tensor cores, ``gemm`` the
dense FP16/BF16 tensor cores (datasheets print "with sparsity": the dense figure is half), all
in TFLOP/s. A figure the datasheet does not give (FP64 on L40S, L4, A10, T4) is absent: no peak
and no default bar for it. Multi-GPU boards (HGX B200) are divided by their GPU count.

Bars (the default minimum a median must reach) follow one rule: a fixed fraction of the peak
per kind (:data:`BAR_FRACTION`). The fractions are the design card's H200 bars over the H200
datasheet (DESIGN.md "Kernels on an H200"): fp32 60 of 67 and fp64 30 of 34 (0.9 of the
lanes), DGEMM 0.75 of the FP64 tensor cores, the 16-bit GEMM 700 of 989 (cuBLAS is
power-capped at 0.65-0.7 of the tensor peak sustained), memory 4.0 of 4.8 TB/s (a STREAM triad
reaches 0.85-0.92). The H200 keeps the design card's round numbers (:attr:`Datasheet.bars`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

BAR_FRACTION: dict[str, float] = {
    "membw": 0.83, "fp32": 0.9, "fp64": 0.9, "gemm": 0.7, "gemm-fp64": 0.75,
}

_H100_PAGE = "https://www.nvidia.com/en-us/data-center/h100/"
_H200_PAGE = "https://www.nvidia.com/en-us/data-center/h200/"
_A100_PAGE = "https://www.nvidia.com/en-us/data-center/a100/"


@dataclass(frozen=True)
class Datasheet:
    """One GPU's datasheet figures: the names it reports, the peaks, where they come from."""

    model: str  # "H100 SXM": what the result's peak/bar ``source`` names
    names: tuple[str, ...]  # exact NVML / CUDA device names
    peaks: Mapping[str, float]
    source: str  # the NVIDIA datasheet: its title and URL
    bars: Mapping[str, float] = field(default_factory=dict)  # design-card bars (H200)

    def peak(self, key: str) -> float | None:
        return self.peaks.get(key)

    def bar(self, key: str) -> float | None:
        """The default bar for ``key``: the design card's, else the fraction of the peak."""
        if key in self.bars:
            return self.bars[key]
        peak = self.peaks.get(key)
        if peak is None or key not in BAR_FRACTION:
            return None
        return round(peak * BAR_FRACTION[key], 3)


def _hopper(membw: float, fp32: float, fp64: float, tensor16: float) -> dict[str, float]:
    """Hopper and Blackwell: the FP64 tensor cores run at the FP32 lanes' rate."""
    return {"membw": membw, "fp32": fp32, "fp64": fp64, "gemm-fp64": fp32, "gemm": tensor16}


def _ampere(membw: float) -> dict[str, float]:
    """A100: 19.5 FP32, 9.7 FP64, 19.5 FP64 tensor, 312 dense BF16/FP16 (every A100)."""
    return {"membw": membw, "fp32": 19.5, "fp64": 9.7, "gemm-fp64": 19.5, "gemm": 312.0}


DATASHEETS: tuple[Datasheet, ...] = (
    Datasheet("H100 SXM", ("NVIDIA H100 80GB HBM3",), _hopper(3.35, 67.0, 34.0, 989.0),
              f"NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column ({_H100_PAGE})"),
    Datasheet("H100 PCIe", ("NVIDIA H100 PCIe",), _hopper(2.0, 51.0, 26.0, 756.0),
              f"NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe column ({_H100_PAGE})"),
    Datasheet("H100 NVL", ("NVIDIA H100 NVL",), _hopper(3.9, 60.0, 30.0, 835.0),
              f"NVIDIA H100 Tensor Core GPU datasheet, H100 NVL column ({_H100_PAGE})"),
    Datasheet("H200", ("NVIDIA H200",), _hopper(4.8, 67.0, 34.0, 989.0),
              f"NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column ({_H200_PAGE})",
              bars={"membw": 4.0, "fp32": 60.0, "gemm": 700.0, "fp64": 30.0,
                    "gemm-fp64": 50.0}),
    Datasheet("H200 NVL", ("NVIDIA H200 NVL",), _hopper(4.8, 60.0, 30.0, 835.0),
              f"NVIDIA H200 Tensor Core GPU datasheet, H200 NVL column ({_H200_PAGE})"),
    Datasheet("GH200", ("NVIDIA GH200 480GB",), _hopper(4.0, 67.0, 34.0, 989.0),
              "NVIDIA GH200 Grace Hopper Superchip datasheet, 96 GB HBM3 GPU "
              "(https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/)"),
    Datasheet("B200", ("NVIDIA B200",), _hopper(8.0, 75.0, 37.0, 2250.0),
              "NVIDIA HGX B200 datasheet, 8-GPU figures / 8 (HGX platform page, "
              "https://www.nvidia.com/en-us/data-center/hgx/)"),
    Datasheet("A100 SXM4 80GB", ("NVIDIA A100-SXM4-80GB",), _ampere(2.039),
              f"NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM column ({_A100_PAGE})"),
    Datasheet("A100 SXM4 40GB", ("NVIDIA A100-SXM4-40GB",), _ampere(1.555),
              f"NVIDIA A100 Tensor Core GPU datasheet, A100 40GB SXM column ({_A100_PAGE})"),
    Datasheet("A100 80GB PCIe", ("NVIDIA A100 80GB PCIe",), _ampere(1.935),
              f"NVIDIA A100 Tensor Core GPU datasheet, A100 80GB PCIe column ({_A100_PAGE})"),
    Datasheet("A100 40GB PCIe", ("NVIDIA A100-PCIE-40GB",), _ampere(1.555),
              f"NVIDIA A100 Tensor Core GPU datasheet, A100 40GB PCIe column ({_A100_PAGE})"),
    Datasheet("L40S", ("NVIDIA L40S",), {"membw": 0.864, "fp32": 91.6, "gemm": 362.05},
              "NVIDIA L40S GPU datasheet (https://www.nvidia.com/en-us/data-center/l40s/)"),
    Datasheet("L4", ("NVIDIA L4",), {"membw": 0.3, "fp32": 30.3, "gemm": 121.0},
              "NVIDIA L4 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/l4/)"),
    Datasheet("A10", ("NVIDIA A10",), {"membw": 0.6, "fp32": 31.2, "gemm": 125.0},
              "NVIDIA A10 Tensor Core GPU datasheet "
              "(https://www.nvidia.com/en-us/data-center/products/a10-gpu/)"),
    Datasheet("T4", ("Tesla T4", "NVIDIA T4"), {"membw": 0.32, "fp32": 8.1, "gemm": 65.0},
              "NVIDIA T4 Tensor Core GPU datasheet, FP16 mixed precision (no BF16 on Turing) "
              "(https://www.nvidia.com/en-us/data-center/tesla-t4/)"),
)

_BY_NAME: dict[str, Datasheet] = {" ".join(n.lower().split()): d
                                  for d in DATASHEETS for n in d.names}


def lookup(device_name: str | None) -> Datasheet | None:
    """The datasheet of a GPU by its NVML / CUDA name (case and spacing ignored), or None."""
    if not device_name:
        return None
    return _BY_NAME.get(" ".join(device_name.lower().split()))
