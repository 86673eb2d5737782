"""Memory-bandwidth stress: STREAM triad a = b + s*c (or copy a = b) on float4 vectors.

Bytes counted per launch: every byte read once plus every byte written once (triad 12
bytes per element, copy 8), as STREAM and bandwidthTest's D2D count them.
"""

from __future__ import annotations

from typing import Any

from gpu_kernels import cuda
from gpu_kernels.kernels.base import Param, Workload

SOURCE = r"""
#if STREAMING
#define LOAD(p) __ldcs(p)
#define STORE(p, v) __stcs((p), (v))
#else
#define LOAD(p) (*(p))
#define STORE(p, v) (*(p) = (v))
#endif

extern "C" __global__ void stream(float4* __restrict__ a, const float4* __restrict__ b,
                                  const float4* __restrict__ c, const float s,
                                  const long long n4) {
    const long long stride = (long long)gridDim.x * blockDim.x * UNROLL;
    for (long long base = (long long)blockIdx.x * blockDim.x * UNROLL + threadIdx.x;
         base < n4; base += stride) {
        float4 bv[UNROLL];
#if TRIAD
        float4 cv[UNROLL];
#endif
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long j = base + (long long)u * blockDim.x;
            if (j < n4) {
                bv[u] = LOAD(b + j);
#if TRIAD
                cv[u] = LOAD(c + j);
#endif
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long j = base + (long long)u * blockDim.x;
            if (j < n4) {
#if TRIAD
                float4 r;
                r.x = fmaf(s, cv[u].x, bv[u].x);
                r.y = fmaf(s, cv[u].y, bv[u].y);
                r.z = fmaf(s, cv[u].z, bv[u].z);
                r.w = fmaf(s, cv[u].w, bv[u].w);
                STORE(a + j, r);
#else
                STORE(a + j, bv[u]);
#endif
            }
        }
    }
}
"""

# name -> (elements of float4 per thread per pass, streaming cache hints, grid policy).
# "flat": one pass, a block per block*unroll vectors; "persist": SMs x resident blocks,
# grid-stride. The default was the fastest on an H200 (reports/evidence/README.md).
VARIANTS: dict[str, tuple[int, bool, str]] = {
    "flat-u1": (1, False, "flat"),
    "flat-u2s": (2, True, "flat"),
    "flat-u4s": (4, True, "flat"),
    "persist-u2s": (2, True, "persist"),
    "persist-u4": (4, False, "persist"),
    "persist-u4s": (4, True, "persist"),
}
DEFAULT_VARIANT = "flat-u1"
BLOCK = 256

PARAMS = (
    Param("mib", int, 1024, "MiB per array (three arrays for triad, two for copy)"),
    Param("op", str, "triad", "stream operation", ("triad", "copy")),
    Param("variant", str, DEFAULT_VARIANT, "kernel variant", tuple(VARIANTS)),
)

PINNED: dict[str, str] = {}  # fixed sizes: nothing to carry from the solo run


class Membw(Workload):
    kind = "membw"
    unit = "TB/s"
    work_unit = "bytes"

    def __init__(self, cp: Any, mib: int = 1024, op: str = "triad",
                 variant: str = DEFAULT_VARIANT, seed: int | None = None) -> None:
        super().__init__(cp, seed)
        unroll, streaming, grid_policy = VARIANTS[variant]
        self.triad = op == "triad"
        self.metric = f"bandwidth ({op})"
        n = mib * 2**20 // 4 // 4 * 4  # float32 elements, a whole number of float4
        self.n4 = n // 4
        f32 = cp.float32
        self.b = self.rng.random_sample(n, dtype=f32)
        self.c = self.rng.random_sample(n, dtype=f32) if self.triad else self.b
        self.a = cp.empty(n, dtype=f32)
        self.s = f32(self.host_rng.uniform(0.5, 2.0))
        self.kernel = cuda.compile_kernel(cp, SOURCE, "stream", {
            "UNROLL": unroll, "STREAMING": int(streaming), "TRIAD": int(self.triad)})
        per_block = BLOCK * unroll
        if grid_policy == "flat":
            self.grid = (self.n4 + per_block - 1) // per_block
        else:
            self.grid = cuda.sm_count(cp) * cuda.blocks_per_sm(cp, self.kernel, BLOCK)
        arrays = 3 if self.triad else 2
        self.work_per_launch = float(arrays * n * 4)
        self.config.update({"op": op, "variant": variant, "mib_per_array": mib,
                            "elements": n, "arrays": arrays, "block": BLOCK,
                            "grid": self.grid, "regs": getattr(self.kernel, "num_regs", None)})

    def launch(self) -> None:
        args = (self.a, self.b, self.c, self.s, self.cp.int64(self.n4))
        self.kernel((self.grid,), (BLOCK,), args)

    def output(self) -> Any:
        return self.a

    def check(self) -> dict[str, Any]:
        """Every element against b + s*c on the GPU; a sample against float64 on the host."""
        import numpy as np

        cp = self.cp
        self.a.fill(cp.nan)
        self.launch()
        cp.cuda.Device().synchronize()
        # float32 b + s*c may differ from the kernel's fused multiply-add by one rounding
        expected = self.b + self.s * self.c if self.triad else self.b
        unwritten = int((~cp.isfinite(self.a)).sum())
        max_rel = float((cp.abs(self.a - expected) / cp.maximum(cp.abs(expected), 1e-30)).max())
        idx = np.random.default_rng(self.seed).integers(0, self.a.size, 4096)
        a_h, b_h, c_h = (cp.asnumpy(x[cp.asarray(idx)]).astype(np.float64)
                         for x in (self.a, self.b, self.c))
        ref = b_h + float(self.s) * c_h if self.triad else b_h
        sample_rel = float(np.max(np.abs(a_h - ref) / np.maximum(np.abs(ref), 1e-30)))
        threshold = 1e-6
        ok = unwritten == 0 and max_rel <= threshold and sample_rel <= threshold
        return {"ok": ok, "method": "all elements vs b+s*c on the GPU; 4096 sampled vs float64",
                "unwritten": unwritten, "max_rel_err": max_rel,
                "sample_max_rel_err_f64": sample_rel, "threshold": threshold}
