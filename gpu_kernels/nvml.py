"""NVML access through nvidia-ml-py (``import pynvml``), imported lazily.

Every query goes through :func:`query`, which turns "not supported" and other NVML errors
into ``None`` so one missing field never loses the rest of an inventory or a sample.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Self

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


class _Watcher:
    """A thread with its own NVML session and the handle of one GPU, run while a block runs.

    Without NVML (or a handle) it does nothing, and ``error`` says why."""

    def __init__(self, pci_bus_id: str | None = None, uuid: str | None = None,
                 index: int = 0) -> None:
        self.error: str | None = None
        self._where = (pci_bus_id, uuid, index)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._session: Any = None

    def __enter__(self) -> Self:
        try:
            self._session = session()
            pynvml = self._session.__enter__()
            handle = handle_for(pynvml, *self._where)
            self._setup(pynvml, handle)
        except Exception as exc:
            self.error = str(exc) or type(exc).__name__
            self._close_session()
            return self
        self._thread = threading.Thread(target=self._loop, args=(pynvml, handle), daemon=True)
        self._thread.start()
        return self

    def _setup(self, pynvml: Any, handle: Any) -> None:
        """Before the thread starts; an exception disables the watcher."""

    def _step(self, pynvml: Any, handle: Any) -> None:
        raise NotImplementedError

    def _teardown(self, pynvml: Any) -> None:
        """After the thread stopped."""

    def _loop(self, pynvml: Any, handle: Any) -> None:
        while not self._stop.is_set():
            try:
                self._step(pynvml, handle)
            except Exception as exc:  # an NVML error that is not a timeout ends the watch
                self.error = f"{type(exc).__name__}: {exc}"
                return

    def _close_session(self) -> None:
        if self._session is not None:
            self._session.__exit__(None, None, None)
            self._session = None

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._teardown(load())
        self._close_session()


class Sampler(_Watcher):
    """Samples one GPU every ``period`` seconds on a thread, while a measurement runs.

    With no NVML (or no handle) it samples nothing and every summary says ``{"n": 0}``.
    """

    def __init__(self, pci_bus_id: str | None = None, uuid: str | None = None,
                 index: int = 0, period: float = 0.1) -> None:
        super().__init__(pci_bus_id, uuid, index)
        self.period = period
        self.samples: list[dict[str, Any]] = []

    def _step(self, pynvml: Any, handle: Any) -> None:
        self.samples.append(sample(pynvml, handle))
        self._stop.wait(self.period)

    def summary(self, start: float, end: float) -> dict[str, Any]:
        return summarize_samples(list(self.samples), start, end)


class XidWatcher(_Watcher):
    """Collects the XID events NVML reports for one GPU (nvmlEventTypeXidCriticalError).

    ``events`` holds {"xid", "t"} (host monotonic time); ``error`` says why none could be
    watched (event registration is not supported on every platform)."""

    POLL_MS = 500

    def __init__(self, pci_bus_id: str | None = None, uuid: str | None = None,
                 index: int = 0) -> None:
        super().__init__(pci_bus_id, uuid, index)
        self.events: list[dict[str, Any]] = []
        self._set: Any = None

    def _setup(self, pynvml: Any, handle: Any) -> None:
        events = pynvml.nvmlEventSetCreate()
        try:
            pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, events)
        except Exception:
            query(pynvml.nvmlEventSetFree, events)
            raise
        self._set = events

    def _step(self, pynvml: Any, handle: Any) -> None:
        wait = getattr(pynvml, "nvmlEventSetWait_v2", None) or pynvml.nvmlEventSetWait
        try:
            data = wait(self._set, self.POLL_MS)
        except pynvml.NVMLError_Timeout:
            return
        self.events.append({"xid": int(data.eventData), "t": time.monotonic()})

    def _teardown(self, pynvml: Any) -> None:
        if self._set is not None:
            query(pynvml.nvmlEventSetFree, self._set)

    def report(self, start: float | None = None) -> dict[str, Any]:
        """{"supported", "count", "events": [{"xid", "t_s"}], "error"}; t_s from ``start``."""
        t0 = start if start is not None else 0.0
        events = [{"xid": e["xid"], "t_s": round(e["t"] - t0, 3)} for e in self.events]
        return {"supported": self._set is not None, "count": len(events), "events": events,
                "error": self.error}


def ecc(pynvml: Any, handle: Any) -> dict[str, Any]:
    """ECC mode and the volatile and aggregate corrected/uncorrected error counts."""
    modes = query(pynvml.nvmlDeviceGetEccMode, handle)
    if modes is None:
        return {"supported": False, "current": None, "pending": None}

    def count(kind: int, counter: int) -> int | None:
        return query(pynvml.nvmlDeviceGetTotalEccErrors, handle, kind, counter)

    unc, cor = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
    vol, agg = pynvml.NVML_VOLATILE_ECC, pynvml.NVML_AGGREGATE_ECC
    return {
        "supported": True,
        "current": ENABLED.get(modes[0], str(modes[0])),
        "pending": ENABLED.get(modes[1], str(modes[1])),
        "volatile_uncorrected": count(unc, vol),
        "volatile_corrected": count(cor, vol),
        "aggregate_uncorrected": count(unc, agg),
        "aggregate_corrected": count(cor, agg),
    }


def health(pci_bus_id: str | None = None, uuid: str | None = None,
           index: int = 0) -> dict[str, Any]:
    """The counters a stress run compares before and after: ECC errors and remapped rows."""
    try:
        with session() as pynvml:
            handle = handle_for(pynvml, pci_bus_id, uuid, index)
            rows = query(pynvml.nvmlDeviceGetRemappedRows, handle)
            return {"nvml": True, "ecc": ecc(pynvml, handle), "remapped_rows": None
                    if rows is None else {"correctable": int(rows[0]),
                                          "uncorrectable": int(rows[1]),
                                          "pending": bool(rows[2]), "failure": bool(rows[3])}}
    except Exception as exc:  # no pynvml, no libnvidia-ml, no handle
        return {"nvml": False, "error": str(exc)}


def total_memory(index: int = 0) -> int | None:
    """A GPU's memory in bytes as NVML reports it (what the device plugin divides by its MPS
    replicas), or None without NVML."""
    try:
        with session() as pynvml:
            info = query(pynvml.nvmlDeviceGetMemoryInfo, pynvml.nvmlDeviceGetHandleByIndex(index))
    except NvmlUnavailable:
        return None
    return None if info is None else int(info.total)


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
