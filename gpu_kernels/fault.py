"""Trigger an illegal address on purpose: a kernel stores 4 TiB past a valid allocation.

After the fault the CUDA context is unusable, so the CLI prints its result and leaves with
os._exit (no CuPy teardown, which would raise again). Exit code of the ``fault`` kind:
0 when the illegal-address error was raised as expected, 1 when no error came.
"""

from __future__ import annotations

import time
from typing import Any

from gpu_kernels import cuda

SOURCE = r"""
extern "C" __global__ void bad_store(float* p, const long long offset) {
    if (threadIdx.x == 0 && blockIdx.x == 0) p[offset] = 1.0f;
}
"""
OFFSET = 1 << 40  # floats: 4 TiB beyond the allocation, far outside any mapping


def trigger(cp: Any) -> dict[str, Any]:
    """Launch the bad store and synchronise; report what CUDA raised (and when)."""
    buf = cp.zeros(1024, dtype=cp.float32)
    kernel = cuda.compile_kernel(cp, SOURCE, "bad_store", {})
    cp.cuda.Device().synchronize()
    t_launch = time.monotonic()
    try:
        kernel((1,), (32,), (buf, cp.int64(OFFSET)))
        cp.cuda.Device().synchronize()
    except Exception as exc:
        message = str(exc)
        return {"raised": True, "error_type": type(exc).__name__, "error": message,
                "illegal_address": "illegal" in message.lower(),
                "t_launch": t_launch, "t_error": time.monotonic()}
    return {"raised": False, "error_type": None, "error": None, "illegal_address": False,
            "t_launch": t_launch, "t_error": None}
