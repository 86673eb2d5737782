"""A numpy stand-in for the parts of CuPy that gpu_kernels uses: tests without a GPU.

Only on sys.path in tests that put it there. Kernels run on the CPU, synchronously: the
stream triad/copy, the FMA chains in float32 (through gpu_kernels' own reference
recurrence) or float64, the GEMV chain, verify.py's compare, checksum and bit flip, and the
bad store (the next synchronisation raises an illegal-address error). A file lock held
during each launch serialises launches across processes, as time-slicing does on a GPU.
Device memory is accounted across processes in FAKE_CUPY_DIR (FAKE_CUPY_TOTAL bytes).
FAKE_CUPY_DEVICES=N shows N devices (distinct UUIDs and PCI bus ids); FAKE_CUPY_GPU_INDEX=K
makes device 0 the host's GPU K (what a container given GPU K sees), FAKE_CUPY_MIG_INSTANCE=J
a MIG instance J of it (its own UUID, the GPU's PCI bus id). Under the fake MPS
daemon (CUDA_MPS_PIPE_DIRECTORY) a default pinned memory limit caps each process as the H100
showed: its free memory is the limit less its context, and allocations beyond that fail.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
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
    float64,
    int32,
    int64,
    isfinite,
    matmul,
    maximum,
    nan,
    uint8,
    uint16,
    uint32,
    uint64,
    zeros,
)

__version__ = "0.0.0-fake"
if "FAKE_CUPY_DIR" not in os.environ:  # the first process of a run: its copies inherit it
    os.environ["FAKE_CUPY_DIR"] = tempfile.mkdtemp(prefix="fake-cupy-")
    atexit.register(shutil.rmtree, os.environ["FAKE_CUPY_DIR"], True)
_DIR = os.environ["FAKE_CUPY_DIR"]
_TOTAL = int(os.environ.get("FAKE_CUPY_TOTAL", str(16 * 2**30)))
_KERNEL_S = float(os.environ.get("FAKE_CUPY_KERNEL_S", "0.002"))
_DEVICES = int(os.environ.get("FAKE_CUPY_DEVICES", "1"))
_GPU_INDEX = int(os.environ.get("FAKE_CUPY_GPU_INDEX", "0"))
_MIG_INSTANCE = os.environ.get("FAKE_CUPY_MIG_INSTANCE")
_state = {"faulted": False, "used": 0, "device": 0}
_memories: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_MPS_CONTEXT = 144 * 2**20  # a client's view on the H100: 20389 MiB limit, 19.77 GiB free


class CUDARuntimeError(RuntimeError):
    pass


class OutOfMemoryError(MemoryError):
    pass


def asnumpy(x):
    return np.array(x)  # a copy, as a device-to-host copy is


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


def _mps_room() -> int | None:
    """What the fake MPS daemon's pinned memory limit leaves this process, or None."""
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY")
    try:
        with open(os.path.join(pipe or "", "fake_pinned_mem_limit")) as f:
            limit = int(f.read())
    except (OSError, ValueError):
        return None
    return max(0, limit - _MPS_CONTEXT - _state["used"])


def _free() -> int:
    free = _TOTAL - _used_by_all()
    room = _mps_room()
    return free if room is None else min(free, room)


class Memory:
    def __init__(self, size: int) -> None:
        free = _free()
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
    return _free(), _TOTAL


class Device:
    def __init__(self, index: int | None = None) -> None:
        self.id = _state["device"] if index is None else index
        self.pci_bus_id = f"0000:{0x18 + self.id + _GPU_INDEX:02X}:00.0"
        self.attributes = {"MultiProcessorCount": 1}

    def use(self) -> None:
        _state["device"] = self.id

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


_HANDOFF_S = 0.05  # the longest a process that ended a launch waits for a waiter to start one
_HANDOFF_POLL_S = 0.0002


def _count(name: str, delta: int) -> int:
    """A counter shared by the processes on the fake GPU: add ``delta``, return the value."""
    with open(os.path.join(_DIR, f"gpu.{name}"), "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        value = int(f.read() or 0) + delta
        if delta:
            f.seek(0)
            f.truncate()
            f.write(str(value))
        return value


class _GpuLock:
    """One launch at a time across processes, handed round as a GPU's time slices are: a
    process that ended a launch while another waits lets that one start first. (flock alone
    is not fair: two sharers relaunching at once took it back and forth, and on a loaded
    machine a third process waited out a whole measured window: a latency point with n=0.)"""

    def __enter__(self):
        self.f = open(os.path.join(_DIR, "gpu.lock"), "w")
        _count("waiting", 1)
        fcntl.flock(self.f, fcntl.LOCK_EX)
        _count("waiting", -1)
        self.turn = _count("turns", 1)

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()
        if _count("waiting", 0) > 0:
            deadline = time.monotonic() + _HANDOFF_S
            while _count("turns", 0) == self.turn and time.monotonic() < deadline:
                time.sleep(_HANDOFF_POLL_S)


class RawKernel:
    def __init__(self, source: str, name: str, options=()) -> None:
        self.name = name
        self.defines = {o[2:].split("=")[0]: _define(o.split("=")[1]) for o in options
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
                _fma_chains(args, self.defines)
            elif self.name in _KERNELS:
                _KERNELS[self.name](*args)
            time.sleep(max(0.0, _KERNEL_S - (time.perf_counter() - start)))


def _define(value: str) -> int | str:
    try:
        return int(value)
    except ValueError:
        return value


def _fma_chains(args, defines) -> None:
    from gpu_kernels.kernels.fp32 import reference

    a, b, x0, out, outer = args
    steps = int(outer) * defines["UNROLL"]
    if defines.get("REAL") == "double":
        x = x0.copy()
        for _ in range(steps):
            x = a * x + b
        out[:] = x
    else:
        out[:] = reference(a, b, x0, steps)


def _compare_words(out, ref, n4, counter) -> None:
    counter[0] += np.uint64(np.count_nonzero(out != ref))


def _checksum_words(words, n4, acc) -> None:
    from gpu_kernels.verify import checksum_reference

    acc[0] = np.uint64((int(acc[0]) + checksum_reference(words)) % 2**64)


def _flip_bit(words, word, mask) -> None:
    words[int(word)] ^= np.uint32(mask)


def _gemv_bf16(w, x, y, h) -> None:
    h = int(h)
    weights = (w.reshape(-1).astype(np.uint32) << 16).view(np.float32).reshape(h, h)
    y[:] = weights @ x


_KERNELS = {"compare_words": _compare_words, "checksum_words": _checksum_words,
            "flip_bit": _flip_bit, "gemv_bf16": _gemv_bf16}


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
    return _DEVICES


def _properties(index: int) -> dict:
    mig = 0xaf if _MIG_INSTANCE is None else 0x80 + int(_MIG_INSTANCE)
    uuid = bytes.fromhex("35ed54a8206d8d3c72b9cff17c00af00")[:14] + bytes([mig,
                                                                         index + _GPU_INDEX])
    name = os.environ.get("FAKE_GPU_NAME", "NVIDIA H200").encode()
    return {"name": name, "uuid": uuid,
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
