"""FP32 compute stress: CHAINS independent FMA chains per thread, x <- a*x + b, unrolled.

Why this shape: a chain of dependent FMAs waits the FMA latency between steps, and a
loop pays a counter, a compare and a branch per pass in issue slots the FMAs need. Many
independent chains per thread (ILP) and a long unrolled body keep every FP32 lane issuing
FMAs; the values stay in registers. 2 flops per FMA.

Correctness: a = exp(-u/n) with n the steps per chain, so a^n is between e^-2 and e^-0.5
and the result depends on every step having run. The reference replays the same float32
recurrence (each step rounded once, as fmaf does) in float64 arithmetic on a sample of
threads; the closed form a^n x0 + b (1 - a^n) / (1 - a) is reported beside it.

The source is written for a type ``REAL`` and its fused multiply-add ``FMA``: fp64.py builds
the same chains in double precision.
"""

from __future__ import annotations

from typing import Any

from gpu_kernels import cuda
from gpu_kernels.kernels.base import Param, Workload

SOURCE = r"""
#ifndef REAL
#define REAL float
#define FMA fmaf
#endif
extern "C" __global__ void fma_chains(const REAL* __restrict__ a_in,
                                      const REAL* __restrict__ b_in,
                                      const REAL* __restrict__ x_in,
                                      REAL* __restrict__ x_out, const int outer) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const int threads = gridDim.x * blockDim.x;
    const REAL a = a_in[t];
    const REAL b = b_in[t];
    REAL x[CHAINS];
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) x[k] = x_in[k * threads + t];
    for (int i = 0; i < outer; ++i) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int k = 0; k < CHAINS; ++k) x[k] = FMA(a, x[k], b);
        }
    }
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) x_out[k * threads + t] = x[k];
}
"""

# name -> (independent chains per thread, unrolled steps per loop pass, threads per block)
VARIANTS: dict[str, tuple[int, int, int]] = {
    "c8u16": (8, 16, 256),
    "c16u16": (16, 16, 256),
    "c16u32": (16, 32, 256),
    "c24u16": (24, 16, 256),
    "c32u8": (32, 8, 256),
    "c16u16b128": (16, 16, 128),
}
DEFAULT_VARIANT = "c16u32"  # fastest on an H200 (tune, reports/evidence/README.md); all ~66
SAMPLE_THREADS = 256

PARAMS = (
    Param("launch_ms", float, 4.0, "target duration of one launch (sets the steps per chain)"),
    Param("variant", str, DEFAULT_VARIANT, "kernel variant", tuple(VARIANTS)),
    Param("outer", int, 0, "loop passes per launch; 0 calibrates them to --launch-ms"),
)
# Sharing experiments give every copy the solo run's sizing: a copy that calibrated while
# others ran would time a slow probe, size smaller launches and do less work per launch.
PINNED = {"outer": "outer_loops"}


def reference(a: Any, b: Any, x0: Any, steps: int) -> Any:
    """The float32 recurrence x <- fl32(a*x + b), each step rounded once, vectorised.

    a, b: float32 arrays of shape (S,); x0: float32 (CHAINS, S). float32*float32 is exact
    in float64, so one float64 add and one rounding to float32 reproduce fmaf except in
    rare double-rounding ties (a difference of one ulp that does not grow).
    """
    import numpy as np

    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    x = np.asarray(x0, dtype=np.float32)
    for _ in range(steps):
        x = (a64 * x + b64).astype(np.float32)
    return x


def closed_form(a: Any, b: Any, x0: Any, steps: int) -> Any:
    """The exact real-number value a^n x0 + b (1 - a^n) / (1 - a), in float64."""
    import numpy as np

    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    an = a64 ** steps
    return an * np.asarray(x0, dtype=np.float64) + b64 * (1.0 - an) / (1.0 - a64)


def make_inputs(np_rng: Any, threads: int, chains: int, steps: int,
                dtype: str = "float32") -> tuple[Any, Any, Any]:
    """Random a, b, x0 (of ``dtype``) with a^steps in [e^-2, e^-0.5], a fixed point in [2, 4]."""
    import numpy as np

    u = np_rng.uniform(0.5, 2.0, threads)
    a = np.exp(-u / steps).astype(dtype)
    fixed = np_rng.uniform(2.0, 4.0, threads)
    b = (fixed * (1.0 - a.astype(np.float64))).astype(dtype)
    x0 = np_rng.uniform(0.5, 1.5, (chains, threads)).astype(dtype)
    return a, b, x0


class Fp32(Workload):
    kind = "fp32"
    metric = "fp32 FMA throughput"
    unit = "TFLOP/s"
    work_unit = "flop"
    dtype = "float32"  # numpy's name of the element type
    defines = {"REAL": "float", "FMA": "fmaf"}

    def __init__(self, cp: Any, launch_ms: float = 4.0, variant: str = DEFAULT_VARIANT,
                 outer: int = 0, seed: int | None = None) -> None:
        import numpy as np

        super().__init__(cp, seed)
        self.chains, self.unroll, self.block = VARIANTS[variant]
        self.kernel = cuda.compile_kernel(cp, SOURCE, "fma_chains", {
            **self.defines, "CHAINS": self.chains, "UNROLL": self.unroll})
        self.grid = cuda.sm_count(cp) * cuda.blocks_per_sm(cp, self.kernel, self.block)
        self.threads = self.grid * self.block
        self.np_rng = np.random.default_rng(self.seed)
        self.outer = outer if outer > 0 else self._calibrate(launch_ms)
        self.steps = self.outer * self.unroll
        a, b, x0 = make_inputs(self.np_rng, self.threads, self.chains, self.steps, self.dtype)
        self.a, self.b, self.x0 = cp.asarray(a), cp.asarray(b), cp.asarray(x0)
        self.out = cp.empty_like(self.x0)
        self.work_per_launch = 2.0 * self.threads * self.chains * self.steps
        self.config.update({"variant": variant, "chains": self.chains, "unroll": self.unroll,
                            "block": self.block, "grid": self.grid, "threads": self.threads,
                            "steps_per_chain": self.steps, "outer_loops": self.outer,
                            "regs": getattr(self.kernel, "num_regs", None),
                            "local_bytes": getattr(self.kernel, "local_size_bytes", None)})

    def _run(self, a: Any, b: Any, x0: Any, out: Any, outer: int) -> None:
        self.kernel((self.grid,), (self.block,), (a, b, x0, out, self.cp.int32(outer)))

    def _calibrate(self, launch_ms: float) -> int:
        """Loop passes per launch for ``launch_ms``, timed on throwaway random inputs."""
        cp = self.cp
        a, b, x0 = (cp.asarray(v) for v in make_inputs(self.np_rng, self.threads,
                                                          self.chains, 1024, self.dtype))
        out = cp.empty_like(x0)
        self._run(a, b, x0, out, 8)  # module load
        cp.cuda.Device().synchronize()
        probe = 64
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        self._run(a, b, x0, out, probe)
        end.record()
        end.synchronize()
        per_pass_ms = cp.cuda.get_elapsed_time(start, end) / probe
        return max(1, round(launch_ms / max(per_pass_ms, 1e-6)))

    def launch(self) -> None:
        self._run(self.a, self.b, self.x0, self.out, self.outer)

    def output(self) -> Any:
        return self.out

    def expected(self, a: Any, b: Any, x0: Any) -> tuple[Any, str, float]:
        """The reference for sampled threads, how it was made, and the relative tolerance."""
        return (reference(a, b, x0, self.steps),
                "float32 recurrence replayed in float64", 1e-5)

    def check(self) -> dict[str, Any]:
        import numpy as np

        cp = self.cp
        self.out.fill(cp.nan)
        self.launch()
        cp.cuda.Device().synchronize()
        unwritten = int((~cp.isfinite(self.out)).sum())
        cols = np.sort(self.np_rng.choice(self.threads, SAMPLE_THREADS, replace=False))
        out = cp.asnumpy(self.out[:, cp.asarray(cols)])
        a, b = cp.asnumpy(self.a)[cols], cp.asnumpy(self.b)[cols]
        x0 = cp.asnumpy(self.x0)[:, cols]
        ref, method, threshold = self.expected(a, b, x0)
        rel = np.abs(out.astype(np.float64) - ref) / np.abs(ref.astype(np.float64))
        exact = closed_form(a, b, x0, self.steps)
        rel_exact = np.abs(out - exact) / np.abs(exact)
        max_rel = float(np.max(rel)) if np.all(np.isfinite(out)) else float("inf")
        return {"ok": unwritten == 0 and max_rel <= threshold,
                "method": f"{method} on {SAMPLE_THREADS} threads x {self.chains} chains, "
                          f"{self.steps} steps each",
                "unwritten": unwritten, "max_rel_err": max_rel, "threshold": threshold,
                "max_rel_err_vs_closed_form": float(np.max(rel_exact))}
