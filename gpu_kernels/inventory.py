"""The node's GPU inventory read through NVML, as a plain dict that verdicts.py judges."""

from __future__ import annotations

from typing import Any

from gpu_kernels import nvml
from gpu_kernels.nvml import ENABLED, query


def _cuda_version(raw: int | None) -> str | None:
    """NVML's integer CUDA version (13000) as "13.0"."""
    if raw is None:
        return None
    return f"{raw // 1000}.{(raw % 1000) // 10}"


def _mig(pynvml: Any, handle: Any) -> dict[str, Any]:
    modes = query(pynvml.nvmlDeviceGetMigMode, handle)
    if modes is None:
        return {"supported": False, "current": None, "pending": None}
    return {"supported": True, "current": ENABLED.get(modes[0], str(modes[0])),
            "pending": ENABLED.get(modes[1], str(modes[1]))}


def _pcie(pynvml: Any, handle: Any) -> dict[str, Any]:
    return {
        "gen_current": query(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
        "gen_max": query(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
        "gpu_gen_max": query(pynvml.nvmlDeviceGetGpuMaxPcieLinkGeneration, handle),
        "width_current": query(pynvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
        "width_max": query(pynvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
    }


def _nvlink(pynvml: Any, handle: Any) -> dict[str, Any]:
    states = []
    for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
        state = query(pynvml.nvmlDeviceGetNvLinkState, handle, link)
        if state is None:
            break  # links are numbered densely; the first unsupported one ends the list
        states.append(ENABLED.get(state, str(state)))
    return {"supported": bool(states), "links": len(states),
            "active_links": sum(s == "Enabled" for s in states)}


def _gpu(pynvml: Any, index: int, driver: str | None, cuda: str | None) -> dict[str, Any]:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    memory = query(pynvml.nvmlDeviceGetMemoryInfo, handle)
    pci = query(pynvml.nvmlDeviceGetPciInfo, handle)
    cc = query(pynvml.nvmlDeviceGetCudaComputeCapability, handle)
    mask = nvml.clocks_event_reasons(pynvml, handle)
    mode = query(pynvml.nvmlDeviceGetComputeMode, handle)
    power_mw = query(pynvml.nvmlDeviceGetPowerUsage, handle)
    limit_mw = query(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle)
    util = query(pynvml.nvmlDeviceGetUtilizationRates, handle)
    persistence = query(pynvml.nvmlDeviceGetPersistenceMode, handle)
    procs = query(pynvml.nvmlDeviceGetComputeRunningProcesses, handle)
    return {
        "index": index,
        "name": query(pynvml.nvmlDeviceGetName, handle),
        "uuid": query(pynvml.nvmlDeviceGetUUID, handle),
        "serial": query(pynvml.nvmlDeviceGetSerial, handle),
        "pci_bus_id": None if pci is None else nvml.text(pci.busId),
        "memory_total_bytes": None if memory is None else int(memory.total),
        "memory_used_bytes": None if memory is None else int(memory.used),
        "driver_version": driver,
        "cuda_driver_version": cuda,
        "vbios_version": query(pynvml.nvmlDeviceGetVbiosVersion, handle),
        "compute_capability": None if cc is None else f"{cc[0]}.{cc[1]}",
        "compute_mode": None if mode is None else nvml.COMPUTE_MODES.get(mode, str(mode)),
        "persistence_mode": None if persistence is None else ENABLED.get(persistence),
        "ecc": nvml.ecc(pynvml, handle),
        "mig": _mig(pynvml, handle),
        "clocks_event_reasons": {"mask": mask, "names": nvml.decode_reasons(mask)},
        "clocks_mhz": {
            "sm": query(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM),
            "mem": query(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_MEM),
            "sm_max": query(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM),
            "mem_max": query(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_MEM),
        },
        "pcie": _pcie(pynvml, handle),
        "nvlink": _nvlink(pynvml, handle),
        "power_w": None if power_mw is None else power_mw / 1000.0,
        "power_limit_w": None if limit_mw is None else limit_mw / 1000.0,
        "temperature_c": query(pynvml.nvmlDeviceGetTemperature, handle,
                               pynvml.NVML_TEMPERATURE_GPU),
        "utilization_gpu_pct": None if util is None else util.gpu,
        "compute_processes": None if procs is None else len(procs),
    }


def _topology(pynvml: Any, count: int) -> list[dict[str, Any]]:
    pairs = []
    for a in range(count):
        for b in range(a + 1, count):
            level = query(pynvml.nvmlDeviceGetTopologyCommonAncestor,
                          pynvml.nvmlDeviceGetHandleByIndex(a),
                          pynvml.nvmlDeviceGetHandleByIndex(b))
            pairs.append({"gpu_a": a, "gpu_b": b,
                          "common_ancestor": nvml.TOPOLOGY_LEVELS.get(level, level)})
    return pairs


def collect() -> dict[str, Any]:
    """Everything the STACK-NODE checks judge, for every GPU NVML enumerates."""
    with nvml.session() as pynvml:
        driver = query(pynvml.nvmlSystemGetDriverVersion)
        cuda = _cuda_version(query(pynvml.nvmlSystemGetCudaDriverVersion))
        count = query(pynvml.nvmlDeviceGetCount) or 0
        return {
            "nvml_version": query(pynvml.nvmlSystemGetNVMLVersion),
            "driver_version": driver,
            "cuda_driver_version": cuda,
            "gpu_count": count,
            "gpus": [_gpu(pynvml, i, driver, cuda) for i in range(count)],
            "topology": _topology(pynvml, count),
        }
