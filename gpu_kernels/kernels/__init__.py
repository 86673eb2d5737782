"""The workloads by kind. Modules hold no CuPy state until a workload is built.

Stress kinds (``STRESS_KINDS``) are the timed kernels of the CLI and the sharing experiments;
``infer`` is the latency experiment's inference-like client.
"""

from __future__ import annotations

from typing import Any

from gpu_kernels.kernels import fp32, fp64, gemm, infer, membw
from gpu_kernels.kernels.base import Param, Workload

MODULES = {"membw": membw, "fp32": fp32, "fp64": fp64, "gemm": gemm, "infer": infer}
CLASSES: dict[str, type[Workload]] = {"membw": membw.Membw, "fp32": fp32.Fp32,
                                      "fp64": fp64.Fp64, "gemm": gemm.Gemm,
                                      "infer": infer.Infer}
STRESS_KINDS = ("membw", "fp32", "fp64", "gemm")


def params(kind: str) -> tuple[Param, ...]:
    return MODULES[kind].PARAMS


def defaults(kind: str) -> dict[str, Any]:
    return {p.name: p.default for p in params(kind)}


def pinned(kind: str, options: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the sizes a built workload resolved (its ``config``) fixed."""
    keys = MODULES[kind].PINNED
    return {**options, **{opt: config[key] for opt, key in keys.items() if key in config}}


def build(kind: str, cp: Any, options: dict[str, Any] | None = None) -> Workload:
    """A workload of ``kind`` with its defaults overridden by ``options``."""
    return CLASSES[kind](cp, **{**defaults(kind), **(options or {})})


__all__ = ["STRESS_KINDS", "Param", "Workload", "build", "defaults", "params", "pinned"]
