"""Tensor-core GEMM through cuBLAS: C = A @ B in fp16 or bf16 (float32 accumulation) or fp64.

Backends: ``matmul`` is cupy.matmul (cuBLAS underneath); ``cublas`` calls cublasGemmEx
directly with CUBLAS_COMPUTE_32F (64F for fp64), which also serves bf16 on a CuPy without a
bfloat16 dtype (the data then live in uint16 arrays). ``auto`` takes matmul where CuPy has
the dtype. Inputs are standard normal (never zeros: predictable data runs faster).

fp64 is DGEMM: since Ampere cuBLAS runs it on the FP64 tensor cores (DMMA), whose H200 peak
is 67 TFLOP/s against 34 for the FP64 lanes; a rate above 34 shows the tensor cores ran.
"""

from __future__ import annotations

from typing import Any

from gpu_kernels.kernels.base import Param, Workload, relative_error

# cuBLAS / CUDA enum values (library_types.h, cublas_api.h); stable across CUDA 12 and 13.
CUDA_TYPES = {"fp16": 2, "bf16": 14, "fp64": 1}  # CUDA_R_16F, CUDA_R_16BF, CUDA_R_64F
COMPUTE_TYPES = {"fp16": 68, "bf16": 68, "fp64": 70}  # CUBLAS_COMPUTE_32F, _64F
CUBLAS_OP_N = 0
CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99
# Bit patterns, in unsigned words of the element's width: a quiet NaN (the poison) and the
# exponent mask (all ones = inf/NaN).
BITS = {"fp16": "uint16", "bf16": "uint16", "fp64": "uint64"}
NAN_BITS = {"fp16": 0x7E00, "bf16": 0x7FC0, "fp64": 0x7FF8000000000000}
EXP_MASK = {"fp16": 0x7C00, "bf16": 0x7F80, "fp64": 0x7FF0000000000000}
CHECK_BLOCK = 128
# ||C - ref|| / ||ref||; output rounding dominates (fp64: ~sqrt(K) * 2^-53, far below 1e-11)
THRESHOLDS = {"fp16": 5e-3, "bf16": 1e-2, "fp64": 1e-11}

PARAMS = (
    Param("dtype", str, "fp16", "operand and output type", ("fp16", "bf16", "fp64")),
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
    """Host bit patterns (uint16 of fp16 or bf16, uint64 of fp64) as float64."""
    import numpy as np

    bits = np.asarray(bits, dtype=BITS[dtype])
    if dtype == "fp64":
        return bits.view(np.float64)
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
        self.bar_key = "gemm-fp64" if dtype == "fp64" else "gemm"
        self.m = self.n = self.k = size
        bf16 = bf16_dtype(cp) if dtype == "bf16" else None
        if backend == "auto":
            backend = "matmul" if dtype != "bf16" or bf16 is not None else "cublas"
        if backend == "matmul" and dtype == "bf16" and bf16 is None:
            raise ValueError("this CuPy has no bfloat16 dtype: use --backend cublas")
        self.backend = backend
        storage = {"fp16": cp.float16, "fp64": cp.float64}.get(
            dtype, bf16 if backend == "matmul" else cp.uint16)
        self.A = self._random((self.m, self.k), storage)
        self.B = self._random((self.k, self.n), storage)
        self.C = cp.empty((self.m, self.n), dtype=storage)
        self._workspace = self._set_workspace(workspace_mib)
        scalar = np.float64 if dtype == "fp64" else np.float32
        self._scalars = (np.ones(1, scalar), np.zeros(1, scalar))  # host alpha, beta
        self.work_per_launch = 2.0 * self.m * self.n * self.k
        self.config.update({"dtype": dtype, "m": self.m, "n": self.n, "k": self.k,
                            "backend": backend,
                            "accumulate": "float64" if dtype == "fp64" else "float32",
                            "workspace_mib": workspace_mib, "inputs": "standard normal"})

    def _random(self, shape: tuple[int, int], storage: Any) -> Any:
        cp = self.cp
        if self.dtype == "fp64":
            return self.rng.standard_normal(shape, dtype=cp.float64)
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
        dt = CUDA_TYPES[self.dtype]
        # Row-major C = A @ B is column-major C^T = B^T @ A^T: pass B first.
        cp.cuda.cublas.gemmEx(
            cp.cuda.device.get_cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N,
            self.n, self.m, self.k, alpha.ctypes.data,
            self.B.data.ptr, dt, self.n, self.A.data.ptr, dt, self.k,
            beta.ctypes.data, self.C.data.ptr, dt, self.n,
            COMPUTE_TYPES[self.dtype], CUBLAS_GEMM_DEFAULT_TENSOR_OP)

    def output(self) -> Any:
        return self.C

    def check(self) -> dict[str, Any]:
        """Poisoned C, one launch; every element finite; sub-blocks vs float64 on the host."""
        import numpy as np

        cp = self.cp
        word = getattr(cp, BITS[self.dtype])
        bits = self.C.view(word)
        bits.fill(word(NAN_BITS[self.dtype]))
        self.launch()
        cp.cuda.Device().synchronize()
        mask = word(EXP_MASK[self.dtype])
        nonfinite = int(((bits & mask) == mask).sum())
        rng = np.random.default_rng(self.seed)
        errors = []
        a_bits, b_bits = self.A.view(word), self.B.view(word)
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
