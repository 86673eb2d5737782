"""CuPy access, imported lazily so the package imports (and its tests run) without CuPy.

Works with cupy-cuda12x and cupy-cuda13x alike: only APIs common to both are used.
"""

from __future__ import annotations

from typing import Any

from gpu_kernels import nvml


class CupyUnavailable(RuntimeError):
    """CuPy is not installed, or it finds no CUDA device."""


def _cupy() -> Any:
    try:
        import cupy
    except ImportError as exc:
        raise CupyUnavailable("CuPy is not installed (pip install cupy-cuda12x or "
                              "cupy-cuda13x)") from exc
    return cupy


def device_count() -> int:
    """How many CUDA devices this process sees (creates no context); raises CupyUnavailable."""
    try:
        return int(_cupy().cuda.runtime.getDeviceCount())
    except CupyUnavailable:
        raise
    except Exception as exc:
        raise CupyUnavailable(f"CUDA found no usable device: {exc}") from exc


def load(device: int = 0) -> Any:
    """The cupy module with ``device`` made current; raises CupyUnavailable."""
    count = device_count()
    if device >= count:
        raise CupyUnavailable(f"device {device} requested, CUDA sees {count}")
    cupy = _cupy()
    cupy.cuda.Device(device).use()
    return cupy


def version_text(raw: int) -> str:
    """CUDA's integer version (13020) as "13.2"."""
    return f"{raw // 1000}.{(raw % 1000) // 10}"


def format_uuid(raw: Any) -> str | None:
    """CUDA's 16 UUID bytes in NVML's form, GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx."""
    if isinstance(raw, str):
        raw = raw.encode("latin-1")
    if not isinstance(raw, bytes | bytearray) or len(raw) < 16:
        return None
    h = bytes(raw[:16]).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def identity(cp: Any, device: int = 0) -> dict[str, Any]:
    """Who measured: the CUDA device, the CUDA versions, CuPy, and NVML's view of the GPU."""
    props = cp.cuda.runtime.getDeviceProperties(device)
    name = props.get("name", b"")
    ident: dict[str, Any] = {
        "index": device,
        "name": name.decode() if isinstance(name, bytes) else str(name),
        "uuid": format_uuid(props.get("uuid")),
        "pci_bus_id": cp.cuda.Device(device).pci_bus_id,
        "compute_capability": f"{props.get('major')}.{props.get('minor')}",
        "sm_count": props.get("multiProcessorCount"),
        "memory_total_bytes": props.get("totalGlobalMem"),
        "l2_cache_bytes": props.get("l2CacheSize"),
        "cuda_runtime_version": version_text(cp.cuda.runtime.runtimeGetVersion()),
        "cuda_driver_version": version_text(cp.cuda.runtime.driverGetVersion()),
        "cupy_version": cp.__version__,
    }
    ident.update(_nvml_identity(ident["pci_bus_id"], ident["uuid"], device))
    return ident


def _nvml_identity(pci_bus_id: str, uuid: str | None, index: int) -> dict[str, Any]:
    try:
        with nvml.session() as pynvml:
            handle = nvml.handle_for(pynvml, pci_bus_id, uuid, index)
            mode = nvml.query(pynvml.nvmlDeviceGetComputeMode, handle)
            mig = nvml.query(pynvml.nvmlDeviceGetMigMode, handle)
            limit = nvml.query(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle)
            return {
                "nvml": True,
                "driver_version": nvml.query(pynvml.nvmlSystemGetDriverVersion),
                "nvml_uuid": nvml.query(pynvml.nvmlDeviceGetUUID, handle),
                "compute_mode": None if mode is None else nvml.COMPUTE_MODES.get(mode),
                "mig_mode": None if mig is None else nvml.ENABLED.get(mig[0]),
                "power_limit_w": None if limit is None else limit / 1000.0,
                "sm_clock_max_mhz": nvml.query(pynvml.nvmlDeviceGetMaxClockInfo, handle,
                                               pynvml.NVML_CLOCK_SM),
            }
    except Exception as exc:  # no pynvml, no libnvidia-ml, or an odd handle lookup
        return {"nvml": False, "nvml_error": str(exc)}


def compile_kernel(cp: Any, source: str, name: str, defines: dict[str, int | str]) -> Any:
    """A RawKernel built for the current device, with -D defines; compiled now, not lazily."""
    options = ("-std=c++17", *(f"-D{k}={v}" for k, v in defines.items()))
    kernel = cp.RawKernel(source, name, options=options)
    compile_now = getattr(kernel, "compile", None)
    if compile_now is not None:
        compile_now()
    else:  # older CuPy compiles on first attribute access
        _ = kernel.num_regs
    return kernel


def blocks_per_sm(cp: Any, kernel: Any, block: int) -> int:
    """Resident blocks per SM for ``kernel`` at ``block`` threads (occupancy API, else regs)."""
    try:
        n = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, block, 0)
        if n > 0:
            return int(n)
    except Exception:
        pass
    regs = max(1, int(getattr(kernel, "num_regs", 32)))
    return max(1, min(2048 // block, 65536 // (((regs + 7) // 8) * 8 * block)))


def sm_count(cp: Any) -> int:
    dev = cp.cuda.Device()
    return int(dev.attributes["MultiProcessorCount"])


def print_result(kind: str, produce) -> int:
    """Run ``produce()`` and print its result as one JSON line; no CuPy becomes an error result
    (exit 3, "could not run here"). Returns the exit code, for the entry points' ``main``."""
    from gpu_kernels import result

    try:
        out = produce()
    except CupyUnavailable as exc:
        out = result.error_result(kind, str(exc))
    print(result.dumps(out), flush=True)
    return int(out["exit_code"])
