"""FP64 compute stress: fp32.py's FMA chains in double precision (``fma``, 2 flops each).

The same kernel source, variants and launch sizing as fp32.py, built with REAL=double. A
Hopper SM has half as many FP64 lanes as FP32 lanes, so the datasheet peak is half: 34
TFLOP/s on an H200 (the 67 of "FP64" there is the tensor-core rate, which DGEMM reaches:
``gemm --dtype fp64``).

Correctness: numpy has no fused multiply-add to replay the double recurrence step by step,
so the sampled results are compared with the closed form a^n x0 + b (1 - a^n) / (1 - a) in
float64. With a in [0.5, 1), 1 - a is exact; each step's rounding (2^-53 relative) decays by
a per later step, so the recurrence stays within about n * 2^-52 of the exact value (2e-11
for 10^5 steps). 1e-9 leaves room for that and still catches one skipped step, which moves
the result by about (1 - a) ~ 1e-5.
"""

from __future__ import annotations

from typing import Any

from gpu_kernels.kernels import fp32
from gpu_kernels.kernels.base import Param

PARAMS: tuple[Param, ...] = fp32.PARAMS
PINNED = fp32.PINNED
VARIANTS = fp32.VARIANTS
DEFAULT_VARIANT = fp32.DEFAULT_VARIANT
THRESHOLD = 1e-9


class Fp64(fp32.Fp32):
    kind = "fp64"
    metric = "fp64 FMA throughput"
    dtype = "float64"
    defines = {"REAL": "double", "FMA": "fma"}

    def expected(self, a: Any, b: Any, x0: Any) -> tuple[Any, str, float]:
        return (fp32.closed_form(a, b, x0, self.steps),
                "closed form a^n x0 + b (1 - a^n) / (1 - a) in float64", THRESHOLD)
