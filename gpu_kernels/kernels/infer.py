"""An inference-like client: batch-1 decoding, a chain of GEMVs y = W x over bf16 weights.

One launch is one request: ``layers`` matrix-vector products of ``hidden`` x ``hidden`` bf16
weights (float32 activations and accumulation), each layer's output the next one's input.
At batch 1 this is memory-bound: every request reads all the weights (8 x 128 MiB at the
defaults, far past the L2), about 40 us a layer and 300 us a request on an H200. Each GEMV
takes longer than Python needs to enqueue the next one, so a request's launches reach the
GPU back to back, as a CUDA-graph inference server's would.

Correctness: the output of one launch against the same chain in float64 through CuPy
(bf16 weights widened exactly), ||y - ref|| / ||ref|| <= 1e-4 (float32 accumulation).
"""

from __future__ import annotations

import math
from typing import Any

from gpu_kernels import cuda
from gpu_kernels.kernels.base import Param, Workload, relative_error
from gpu_kernels.kernels.gemm import bf16_bits

SOURCE = r"""
// One warp per output row; 8 bf16 weights (16 bytes) per lane and step.
extern "C" __global__ void gemv_bf16(const unsigned short* __restrict__ w,
                                     const float* __restrict__ x, float* __restrict__ y,
                                     const int h) {
    const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= h) return;
    const uint4* wr = reinterpret_cast<const uint4*>(w + (long long)row * h);
    const float4* xv = reinterpret_cast<const float4*>(x);
    float acc = 0.0f;
    for (int j = lane; j < h / 8; j += 32) {
        const uint4 p = wr[j];
        const float4 xa = xv[2 * j];
        const float4 xb = xv[2 * j + 1];
        acc = fmaf(__uint_as_float(p.x << 16), xa.x, acc);
        acc = fmaf(__uint_as_float(p.x & 0xffff0000u), xa.y, acc);
        acc = fmaf(__uint_as_float(p.y << 16), xa.z, acc);
        acc = fmaf(__uint_as_float(p.y & 0xffff0000u), xa.w, acc);
        acc = fmaf(__uint_as_float(p.z << 16), xb.x, acc);
        acc = fmaf(__uint_as_float(p.z & 0xffff0000u), xb.y, acc);
        acc = fmaf(__uint_as_float(p.w << 16), xb.z, acc);
        acc = fmaf(__uint_as_float(p.w & 0xffff0000u), xb.w, acc);
    }
    for (int offset = 16; offset > 0; offset >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if (lane == 0) y[row] = acc;
}
"""
BLOCK = 256  # 8 warps: 8 rows a block
THRESHOLD = 1e-4

PARAMS = (
    Param("hidden", int, 8192, "rows and columns of each layer's weights (a multiple of 8)"),
    Param("layers", int, 8, "GEMVs per request"),
)
PINNED: dict[str, str] = {}


class Infer(Workload):
    kind = "infer"
    metric = "batch-1 GEMV chain throughput"
    unit = "TB/s"
    work_unit = "bytes"

    def __init__(self, cp: Any, hidden: int = 8192, layers: int = 8,
                 seed: int | None = None) -> None:
        super().__init__(cp, seed)
        if hidden % 8 or hidden <= 0 or layers <= 0:
            raise ValueError("hidden must be a positive multiple of 8, layers positive")
        self.h, self.layers = hidden, layers
        scale = cp.float32(1.0 / math.sqrt(hidden))  # keeps |y| near |x| layer after layer
        self.w = cp.empty((layers, hidden, hidden), dtype=cp.uint16)
        for i in range(layers):
            self.w[i] = bf16_bits(cp, self.rng.standard_normal((hidden, hidden),
                                                               dtype=cp.float32) * scale)
        self.x = self.rng.standard_normal(hidden, dtype=cp.float32)
        self.buffers = (cp.empty(hidden, dtype=cp.float32), cp.empty(hidden, dtype=cp.float32))
        self.kernel = cuda.compile_kernel(cp, SOURCE, "gemv_bf16", {})
        self.grid = (hidden * 32 + BLOCK - 1) // BLOCK
        self.work_per_launch = float(self.w.nbytes)
        self.config.update({"hidden": hidden, "layers": layers, "weights": "bf16",
                            "activations": "float32", "weight_bytes": int(self.w.nbytes),
                            "launches_per_request": layers, "block": BLOCK, "grid": self.grid})

    def launch(self) -> None:
        src = self.x
        for i in range(self.layers):
            dst = self.buffers[i % 2]
            self.kernel((self.grid,), (BLOCK,), (self.w[i], src, dst, self.cp.int32(self.h)))
            src = dst

    def output(self) -> Any:
        return self.buffers[(self.layers - 1) % 2]

    def check(self) -> dict[str, Any]:
        """Poisoned output, one request; the chain again in float64 on the device."""
        cp = self.cp
        out = self.output()
        out.fill(cp.nan)
        self.launch()
        cp.cuda.Device().synchronize()
        ref = self.x.astype(cp.float64)
        for i in range(self.layers):
            weights = (self.w[i].astype(cp.uint32) << 16).view(cp.float32).astype(cp.float64)
            ref = weights @ ref
        err = relative_error(cp.asnumpy(out), cp.asnumpy(ref))
        return {"ok": err <= THRESHOLD, "method": f"{self.layers} layers again in float64 "
                "(bf16 weights widened exactly), relative norm of the difference",
                "rel_err": err, "threshold": THRESHOLD}
