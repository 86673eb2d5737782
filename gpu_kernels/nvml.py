"""NVML access through nvidia-ml-py (``import pynvml``), imported lazily.

Every query goes through :func:`query`, which turns "not supported" and other NVML errors
into ``None`` so one missing field never loses the rest of an inventory or a sample.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

# Clocks-event ("throttle") reason bits of nvml.h, with the names NVML gives them.
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "GpuIdle",
    0x2: "ApplicationsClocksSetting",
    0x4: "SwPowerCap",
    0x8: "HwSlowdown",
    0x10: "SyncBoost",
    0x20: "SwThermalSlowdown",
    0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown",
    0x100: "DisplayClockSetting",
    0x200: "BoardLimit",
    0x400: "Reliability",
}
COMPUTE_MODES = {0: "Default", 1: "ExclusiveThread", 2: "Prohibited", 3: "ExclusiveProcess"}
TOPOLOGY_LEVELS = {0: "INTERNAL", 10: "SINGLE", 20: "MULTIPLE", 30: "HOSTBRIDGE", 40: "NODE",
                   50: "SYSTEM"}
ENABLED = {0: "Disabled", 1: "Enabled"}


class NvmlUnavailable(RuntimeError):
    """pynvml is not installed or NVML could not be initialised."""


def decode_reasons(mask: int | None) -> list[str]:
    """Names of the set bits of a clocks-event mask (unknown bits as hex)."""
    if mask is None:
        return []
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    if unknown:
        names.append(hex(unknown))
    return names


def text(value: Any) -> Any:
    """NVML strings arrive as bytes in some pynvml versions."""
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def query(fn: Callable[..., Any], *args: Any) -> Any:
    """Call an NVML function; None when the GPU or driver does not support it."""
    try:
        return text(fn(*args))
    except Exception:  # pynvml.NVMLError and its many subclasses; also missing symbols
        return None


def load() -> Any:
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable("nvidia-ml-py (pynvml) is not installed") from exc
    return pynvml


@contextmanager
def session() -> Iterator[Any]:
    """nvmlInit ... nvmlShutdown around a block; yields the pynvml module."""
    pynvml = load()
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        raise NvmlUnavailable(f"nvmlInit failed: {exc}") from exc
    try:
        yield pynvml
    finally:
        query(pynvml.nvmlShutdown)


def clocks_event_reasons(pynvml: Any, handle: Any) -> int | None:
    fn = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return query(fn, handle)


def handle_for(pynvml: Any, pci_bus_id: str | None = None, uuid: str | None = None,
               index: int = 0) -> Any:
    """The NVML handle of the CUDA device, found by PCI bus id, then UUID, then index."""
    if pci_bus_id:
        handle = query(pynvml.nvmlDeviceGetHandleByPciBusId, pci_bus_id)
        if handle is not None:
            return handle
    if uuid:
        handle = query(pynvml.nvmlDeviceGetHandleByUUID, uuid)
        if handle is not None:
            return handle
    return pynvml.nvmlDeviceGetHandleByIndex(index)


def sample(pynvml: Any, handle: Any) -> dict[str, Any]:
    """Clocks, temperature, power, utilisation and clocks-event reasons, now."""
    power_mw = query(pynvml.nvmlDeviceGetPowerUsage, handle)
    util = query(pynvml.nvmlDeviceGetUtilizationRates, handle)
    mask = clocks_event_reasons(pynvml, handle)
    return {
        "t": time.monotonic(),
        "sm_clock_mhz": query(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM),
        "mem_clock_mhz": query(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_MEM),
        "temperature_c": query(pynvml.nvmlDeviceGetTemperature, handle,
                               pynvml.NVML_TEMPERATURE_GPU),
        "power_w": None if power_mw is None else power_mw / 1000.0,
        "utilization_pct": None if util is None else util.gpu,
        "reasons_mask": mask,
    }


def summarize_samples(samples: Sequence[Mapping[str, Any]], start: float,
                      end: float) -> dict[str, Any]:
    """One trial's NVML figures: the samples inside [start, end], else the nearest one."""
    inside = [s for s in samples if start <= s["t"] <= end]
    if not inside and samples:
        inside = [min(samples, key=lambda s: min(abs(s["t"] - start), abs(s["t"] - end)))]
    if not inside:
        return {"n": 0}

    def values(key: str) -> list[float]:
        return [s[key] for s in inside if s.get(key) is not None]

    def pick(key: str, fn: Callable[[list[float]], float]) -> float | None:
        data = values(key)
        return fn(data) if data else None

    mask = 0
    for s in inside:
        mask |= s.get("reasons_mask") or 0
    return {
        "n": len(inside),
        "sm_clock_mhz_min": pick("sm_clock_mhz", min),
        "sm_clock_mhz_mean": pick("sm_clock_mhz", lambda d: sum(d) / len(d)),
        "mem_clock_mhz": pick("mem_clock_mhz", max),
        "temperature_c_max": pick("temperature_c", max),
        "power_w_mean": pick("power_w", lambda d: sum(d) / len(d)),
        "power_w_max": pick("power_w", max),
        "utilization_pct_mean": pick("utilization_pct", lambda d: sum(d) / len(d)),
        "throttle_reasons": decode_reasons(mask),
    }


class Sampler:
    """Samples one GPU every ``period`` seconds on a thread, while a measurement runs.

    With no NVML (or no handle) it samples nothing and every summary says ``{"n": 0}``.
    """

    def __init__(self, pci_bus_id: str | None = None, uuid: str | None = None,
                 index: int = 0, period: float = 0.1) -> None:
        self.period = period
        self.samples: list[dict[str, Any]] = []
        self.error: str | None = None
        self._where = (pci_bus_id, uuid, index)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Sampler:
        try:
            self._session = session()
            pynvml = self._session.__enter__()
            handle = handle_for(pynvml, *self._where)
        except Exception as exc:
            self.error = str(exc)
            self._session = None
            return self
        self._thread = threading.Thread(target=self._run, args=(pynvml, handle), daemon=True)
        self._thread.start()
        return self

    def _run(self, pynvml: Any, handle: Any) -> None:
        while not self._stop.is_set():
            self.samples.append(sample(pynvml, handle))
            self._stop.wait(self.period)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._session is not None:
            self._session.__exit__(None, None, None)

    def summary(self, start: float, end: float) -> dict[str, Any]:
        return summarize_samples(list(self.samples), start, end)


def mig_mode(index: int = 0) -> dict[str, Any] | None:
    """{"current", "pending"} MIG mode of a GPU, or None without NVML / MIG support."""
    try:
        with session() as pynvml:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            modes = query(pynvml.nvmlDeviceGetMigMode, handle)
    except NvmlUnavailable:
        return None
    if modes is None:
        return {"supported": False, "current": None, "pending": None}
    return {"supported": True, "current": ENABLED.get(modes[0], str(modes[0])),
            "pending": ENABLED.get(modes[1], str(modes[1]))}
