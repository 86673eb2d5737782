"""Tensor-core GEMM through cuBLAS: C = A @ B in fp16 or bf16, float32 accumulation.

Backends: ``matmul`` is cupy.matmul (cuBLAS underneath); ``cublas`` calls cublasGemmEx
directly with CUBLAS_COMPUTE_32F, which also serves bf16 on a CuPy without a bfloat16
dtype (the data then live in uint16 arrays). ``auto`` takes matmul where CuPy has the
dtype. Inputs are standard normal (never zeros: predictable data runs faster).
"""

from __future__ import annotations

from typing import Any

from gpu_kernels.kernels.base import Param, Workload, relative_error

# cuBLAS / CUDA enum values (library_types.h, cublas_api.h); stable across CUDA 12 and 13.
CUDA_R_16F, CUDA_R_16BF = 2, 14
CUBLAS_OP_N = 0
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99
# 16-bit patterns: a quiet NaN (the poison) and the exponent mask (all ones = inf/NaN).
NAN_BITS = {"fp16": 0x7E00, "bf16": 0x7FC0}
EXP_MASK = {"fp16": 0x7C00, "bf16": 0x7F80}
CHECK_BLOCK = 128
THRESHOLDS = {"fp16": 5e-3, "bf16": 1e-2}  # ||C - ref|| / ||ref||; output rounding dominates

PARAMS = (
    Param("dtype", str, "fp16", "operand and output type", ("fp16", "bf16")),
    Param("size", int, 16384, "M = N = K (a multiple of 128 keeps cuBLAS on its best tiles; "
          "16384 ran 1-2 % faster than 8192 on an H200)"),
    Param("backend", str, "auto", "cuBLAS entry point", ("auto", "matmul", "cublas")),
    Param("workspace_mib", int, 0, "cuBLAS workspace to set (0 keeps cuBLAS's default)"),
)


def bf16_dtype(cp: Any) -> Any | None:
    """CuPy's bfloat16 dtype (CuPy 14+ with ml_dtypes), or None."""
    try:
        import ml_dtypes

        cp.empty(1, dtype=ml_dtypes.bfloat16)
        return ml_dtypes.bfloat16
    except Exception:
        return None


def to_float64(bits: Any, dtype: str) -> Any:
    """Host uint16 patterns of fp16 or bf16 values as float64."""
    import numpy as np

    bits = np.asarray(bits, dtype=np.uint16)
    if dtype == "fp16":
        return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def bf16_bits(cp: Any, x: Any) -> Any:
    """float32 device array -> bf16 bit patterns (uint16), rounded to nearest even."""
    u = x.view(cp.uint32)
    return ((u + cp.uint32(0x7FFF) + ((u >> 16) & cp.uint32(1))) >> 16).astype(cp.uint16)

PINNED: dict[str, str] = {}  # fixed sizes: nothing to carry from the solo run


class Gemm(Workload):
    kind = "gemm"
    unit = "TFLOP/s"
    work_unit = "flop"

    def __init__(self, cp: Any, dtype: str = "fp16", size: int = 16384, backend: str = "auto",
                 workspace_mib: int = 0, seed: int | None = None) -> None:
        import numpy as np

        super().__init__(cp, seed)
        self.dtype = dtype
        self.metric = f"{dtype} GEMM throughput"
        self.m = self.n = self.k = size
        bf16 = bf16_dtype(cp) if dtype == "bf16" else None
        if backend == "auto":
            backend = "matmul" if dtype == "fp16" or bf16 is not None else "cublas"
        if backend == "matmul" and dtype == "bf16" and bf16 is None:
            raise ValueError("this CuPy has no bfloat16 dtype: use --backend cublas")
        self.backend = backend
        storage = cp.float16 if dtype == "fp16" else (bf16 if backend == "matmul" else cp.uint16)
        self.A = self._random((self.m, self.k), storage)
        self.B = self._random((self.k, self.n), storage)
        self.C = cp.empty((self.m, self.n), dtype=storage)
        self._workspace = self._set_workspace(workspace_mib)
        self._scalars = (np.ones(1, np.float32), np.zeros(1, np.float32))  # host alpha, beta
        self.work_per_launch = 2.0 * self.m * self.n * self.k
        self.config.update({"dtype": dtype, "m": self.m, "n": self.n, "k": self.k,
                            "backend": backend, "accumulate": "float32",
                            "workspace_mib": workspace_mib, "inputs": "standard normal"})

    def _random(self, shape: tuple[int, int], storage: Any) -> Any:
        cp = self.cp
        x = self.rng.standard_normal(shape, dtype=cp.float32)
        if self.dtype == "fp16":
            return x.astype(cp.float16)
        return bf16_bits(cp, x).view(storage)

    def _set_workspace(self, mib: int) -> Any:
        if mib <= 0:
            return None
        cp = self.cp
        buf = cp.empty(mib * 2**20, dtype=cp.uint8)
        cp.cuda.cublas.setWorkspace(cp.cuda.device.get_cublas_handle(), buf.data.ptr,
                                    buf.nbytes)
        return buf

    def launch(self) -> None:
        cp = self.cp
        if self.backend == "matmul":
            cp.matmul(self.A, self.B, out=self.C)
            return
        alpha, beta = self._scalars
        dt = CUDA_R_16F if self.dtype == "fp16" else CUDA_R_16BF
        # Row-major C = A @ B is column-major C^T = B^T @ A^T: pass B first.
        cp.cuda.cublas.gemmEx(
            cp.cuda.device.get_cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N,
            self.n, self.m, self.k, alpha.ctypes.data,
            self.B.data.ptr, dt, self.n, self.A.data.ptr, dt, self.k,
            beta.ctypes.data, self.C.data.ptr, dt, self.n,
            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP)

    def check(self) -> dict[str, Any]:
        """Poisoned C, one launch; every element finite; sub-blocks vs float64 on the host."""
        import numpy as np

        cp = self.cp
        bits = self.C.view(cp.uint16)
        bits.fill(NAN_BITS[self.dtype])
        self.launch()
        cp.cuda.Device().synchronize()
        mask = EXP_MASK[self.dtype]
        nonfinite = int(((bits & cp.uint16(mask)) == cp.uint16(mask)).sum())
        rng = np.random.default_rng(self.seed)
        errors = []
        a_bits, b_bits = self.A.view(cp.uint16), self.B.view(cp.uint16)
        for _ in range(3):
            r = int(rng.integers(0, self.m - CHECK_BLOCK + 1))
            c = int(rng.integers(0, self.n - CHECK_BLOCK + 1))
            a = to_float64(cp.asnumpy(a_bits[r:r + CHECK_BLOCK, :]), self.dtype)
            b = to_float64(cp.asnumpy(b_bits[:, c:c + CHECK_BLOCK]), self.dtype)
            out = to_float64(cp.asnumpy(bits[r:r + CHECK_BLOCK, c:c + CHECK_BLOCK]), self.dtype)
            errors.append(relative_error(out, a @ b))
        threshold = THRESHOLDS[self.dtype]
        worst = max(errors)
        return {"ok": nonfinite == 0 and worst <= threshold,
                "method": f"3 random {CHECK_BLOCK}x{CHECK_BLOCK} blocks of C vs float64 "
                          "products of the same operands; every element finite",
                "nonfinite": nonfinite, "rel_err": errors, "max_rel_err": worst,
                "threshold": threshold}
