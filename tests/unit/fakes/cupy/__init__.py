"""A numpy stand-in for the parts of CuPy that gpu_kernels uses: tests without a GPU.

Only on sys.path in tests that put it there. Kernels run on the CPU, synchronously: the
stream triad/copy, the FMA chains (through gpu_kernels' own reference recurrence) and the
bad store (the next synchronisation raises an illegal-address error). A file lock held
during each launch serialises launches across processes, as time-slicing does on a GPU.
Device memory is accounted across processes in FAKE_CUPY_DIR (FAKE_CUPY_TOTAL bytes).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
import weakref
from types import SimpleNamespace

import numpy as np
from numpy import (  # noqa: F401  (re-exported like CuPy's names)
    abs,
    asarray,
    concatenate,
    empty,
    empty_like,
    float16,
    float32,
    int32,
    int64,
    isfinite,
    matmul,
    maximum,
    nan,
    uint8,
    uint16,
    uint32,
    zeros,
)

__version__ = "0.0.0-fake"
_DIR = os.environ.setdefault("FAKE_CUPY_DIR", tempfile.mkdtemp(prefix="fake-cupy-"))
_TOTAL = int(os.environ.get("FAKE_CUPY_TOTAL", str(16 * 2**30)))
_KERNEL_S = float(os.environ.get("FAKE_CUPY_KERNEL_S", "0.002"))
_state = {"faulted": False, "used": 0}
_memories: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class CUDARuntimeError(RuntimeError):
    pass


class OutOfMemoryError(MemoryError):
    pass


def asnumpy(x):
    return np.asarray(x)


def _check() -> None:
    if _state["faulted"]:
        raise CUDARuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")


def _publish_used() -> None:
    with open(os.path.join(_DIR, f"used.{os.getpid()}"), "w") as f:
        f.write(str(_state["used"]))


def _used_by_all() -> int:
    total = 0
    for name in os.listdir(_DIR):
        if not name.startswith("used."):
            continue
        pid = int(name.split(".")[1])
        try:
            os.kill(pid, 0)
            with open(os.path.join(_DIR, name)) as f:
                total += int(f.read() or 0)
        except (ProcessLookupError, ValueError, OSError):
            continue
    return total


class Memory:
    def __init__(self, size: int) -> None:
        free = _TOTAL - _used_by_all()
        if size > free:
            raise OutOfMemoryError(f"Out of memory allocating {size:,} bytes")
        self.size, self.ptr, self.pattern = size, id(self), 0
        _memories[self.ptr] = self
        _state["used"] += size
        _publish_used()

    def __del__(self) -> None:
        if not hasattr(self, "size"):
            return  # __init__ raised: nothing was accounted
        _state["used"] -= self.size
        with contextlib.suppress(Exception):  # interpreter shutdown
            _publish_used()


class MemoryPointer:
    def __init__(self, mem: Memory, offset: int) -> None:
        self.mem = mem


def ndarray(shape, dtype=float, memptr=None):
    """Only the memhog's read-back: a zero-copy view of the memset pattern."""
    return np.broadcast_to(np.asarray(memptr.mem.pattern, dtype=dtype), shape)


def _memset(ptr: int, value: int, size: int) -> None:
    _memories[ptr].pattern = value


def _mem_get_info() -> tuple[int, int]:
    return _TOTAL - _used_by_all(), _TOTAL


class Device:
    def __init__(self, index: int = 0) -> None:
        self.id = index
        self.pci_bus_id = "0000:18:00.0"
        self.attributes = {"MultiProcessorCount": 1}

    def use(self) -> None:
        pass

    def synchronize(self) -> None:
        _check()


class Event:
    def __init__(self, *args, **kwargs) -> None:
        self.t = None

    def record(self, stream=None) -> None:
        _check()
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        _check()


def get_elapsed_time(a: Event, b: Event) -> float:
    return (b.t - a.t) * 1000.0


class _GpuLock:
    def __enter__(self):
        self.f = open(os.path.join(_DIR, "gpu.lock"), "w")
        fcntl.flock(self.f, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


class RawKernel:
    def __init__(self, source: str, name: str, options=()) -> None:
        self.name = name
        self.defines = {o[2:].split("=")[0]: int(o.split("=")[1]) for o in options
                        if o.startswith("-D")}
        self.num_regs = 32

    def compile(self) -> None:
        pass

    def __call__(self, grid, block, args) -> None:
        _check()
        if self.name == "bad_store":
            _state["faulted"] = True
            return
        with _GpuLock():
            start = time.perf_counter()
            if self.name == "stream":
                a, b, c, s, _ = args
                a[:] = b + s * c if self.defines.get("TRIAD") else b
            elif self.name == "fma_chains":
                from gpu_kernels.kernels.fp32 import reference

                a, b, x0, out, outer = args
                out[:] = reference(a, b, x0, int(outer) * self.defines["UNROLL"])
            time.sleep(max(0.0, _KERNEL_S - (time.perf_counter() - start)))


class RandomState:
    def __init__(self, seed=None) -> None:
        self.g = np.random.default_rng(seed)

    def random_sample(self, size=None, dtype=float):
        return self.g.random(size, dtype=dtype)

    def standard_normal(self, size=None, dtype=float):
        return self.g.standard_normal(size, dtype=dtype)


random = SimpleNamespace(RandomState=RandomState)


class _Pool:
    def free_all_blocks(self) -> None:
        pass


def get_default_memory_pool() -> _Pool:
    return _Pool()


def _device_count() -> int:
    if os.environ.get("FAKE_CUPY_NO_DEVICE"):
        raise CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
    return 1


def _properties(index: int) -> dict:
    return {"name": b"NVIDIA H200", "uuid": bytes.fromhex("35ed54a8206d8d3c72b9cff17c00af00"),
            "major": 9, "minor": 0, "multiProcessorCount": 1, "totalGlobalMem": _TOTAL,
            "l2CacheSize": 50 * 2**20}


cuda = SimpleNamespace(
    runtime=SimpleNamespace(getDeviceCount=_device_count, getDeviceProperties=_properties,
                            runtimeGetVersion=lambda: 13020, driverGetVersion=lambda: 13000,
                            memGetInfo=_mem_get_info, memset=_memset,
                            CUDARuntimeError=CUDARuntimeError),
    Device=Device, Event=Event, get_elapsed_time=get_elapsed_time, Memory=Memory,
    MemoryPointer=MemoryPointer, driver=SimpleNamespace(), memory=SimpleNamespace(
        OutOfMemoryError=OutOfMemoryError),
)
