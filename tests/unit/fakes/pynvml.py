"""A fake nvidia-ml-py for tests: one healthy H200-like GPU; env vars inject faults.

FAKE_NVML_ECC_UNCORRECTED=N sets the volatile uncorrectable ECC count;
FAKE_NVML_ECC_UNCORRECTED_STEP=N adds N to it at every read (errors during a run);
FAKE_NVML_GPUS=N enumerates N GPUs (distinct UUIDs); NVLink reports "not supported";
FAKE_NVML_POWER_W=W is the power draw (default 75, idle); FAKE_NVML_REASONS=0xMASK the
clocks-event reasons (default 0x1, GpuIdle); FAKE_NVML_XID=N delivers one XID event N;
FAKE_NVML_NO_EVENTS=1 makes event registration unsupported; FAKE_GPU_NAME=NAME is the GPU's
name (here and in the fake CuPy; default "NVIDIA H200").
"""

import os
import time
from types import SimpleNamespace

NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
NVML_TEMPERATURE_GPU = 0
NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1
NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC = 0, 1
NVML_NVLINK_MAX_LINKS = 18


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_Timeout(NVMLError):
    pass


_GPUS = int(os.environ.get("FAKE_NVML_GPUS", "1"))
_reads = {"ecc": 0, "xid_sent": False}
nvmlEventTypeXidCriticalError = 0x8


def nvmlInit():
    pass


def nvmlShutdown():
    pass


def nvmlSystemGetDriverVersion():
    return "580.159.04"


def nvmlSystemGetCudaDriverVersion():
    return 13000


def nvmlSystemGetNVMLVersion():
    return b"13.580.159.04"


def nvmlDeviceGetCount():
    return _GPUS


def nvmlDeviceGetHandleByIndex(i):
    if i >= _GPUS:
        raise NVMLError("invalid argument")
    return i


def nvmlDeviceGetHandleByPciBusId(bus):
    index = int(str(bus).split(":")[-2], 16) - 0x18
    if not 0 <= index < _GPUS:
        raise NVMLError("not found")
    return index


def nvmlDeviceGetHandleByUUID(uuid):
    return 0


def nvmlDeviceGetName(h):
    return os.environ.get("FAKE_GPU_NAME", "NVIDIA H200")


def nvmlDeviceGetUUID(h):
    return f"GPU-35ed54a8-206d-8d3c-72b9-cff17c00af{h:02x}"


def nvmlDeviceGetSerial(h):
    raise NVMLError_NotSupported()


def nvmlDeviceGetPciInfo(h):
    return SimpleNamespace(busId=f"00000000:{0x18 + h:02X}:00.0".encode())


def nvmlDeviceGetMemoryInfo(h):
    total = int(os.environ.get("FAKE_CUPY_TOTAL", "150754820096"))  # the fake CuPy's, when set
    return SimpleNamespace(total=total, used=500 * 2**20, free=total - 500 * 2**20)


def nvmlDeviceGetCudaComputeCapability(h):
    return (9, 0)


def nvmlDeviceGetCurrentClocksEventReasons(h):
    return int(os.environ.get("FAKE_NVML_REASONS", "0x1"), 0)


def nvmlDeviceGetComputeMode(h):
    return 0


def nvmlDeviceGetPowerUsage(h):
    return int(float(os.environ.get("FAKE_NVML_POWER_W", "75")) * 1000)


def nvmlDeviceGetEnforcedPowerLimit(h):
    return 700000


def nvmlDeviceGetUtilizationRates(h):
    return SimpleNamespace(gpu=0, memory=0)


def nvmlDeviceGetPersistenceMode(h):
    return 1


def nvmlDeviceGetComputeRunningProcesses(h):
    return []


def nvmlDeviceGetVbiosVersion(h):
    return "96.00.AF.00.01"


def nvmlDeviceGetEccMode(h):
    return [1, 1]


def nvmlDeviceGetTotalEccErrors(h, kind, counter):
    if kind == NVML_MEMORY_ERROR_TYPE_UNCORRECTED and counter == NVML_VOLATILE_ECC:
        _reads["ecc"] += 1
        step = int(os.environ.get("FAKE_NVML_ECC_UNCORRECTED_STEP", "0"))
        return int(os.environ.get("FAKE_NVML_ECC_UNCORRECTED", "0")) + step * _reads["ecc"]
    return 0


def nvmlDeviceGetRemappedRows(h):
    return (0, 0, False, False)


def nvmlEventSetCreate():
    return SimpleNamespace(devices=[])


def nvmlDeviceRegisterEvents(h, types, event_set):
    if os.environ.get("FAKE_NVML_NO_EVENTS"):
        raise NVMLError_NotSupported("Not Supported")
    event_set.devices.append(h)


def nvmlEventSetWait_v2(event_set, timeout_ms):
    xid = os.environ.get("FAKE_NVML_XID")
    if xid and not _reads["xid_sent"]:
        _reads["xid_sent"] = True
        return SimpleNamespace(device=event_set.devices[0],
                               eventType=nvmlEventTypeXidCriticalError, eventData=int(xid))
    time.sleep(min(timeout_ms, 50) / 1000.0)
    raise NVMLError_Timeout("Timeout")


def nvmlEventSetFree(event_set):
    event_set.devices.clear()


def nvmlDeviceGetMigMode(h):
    return [0, 0]


def nvmlDeviceGetCurrPcieLinkGeneration(h):
    return 1


def nvmlDeviceGetMaxPcieLinkGeneration(h):
    return 5


def nvmlDeviceGetGpuMaxPcieLinkGeneration(h):
    return 5


def nvmlDeviceGetCurrPcieLinkWidth(h):
    return 16


def nvmlDeviceGetMaxPcieLinkWidth(h):
    return 16


def nvmlDeviceGetNvLinkState(h, link):
    raise NVMLError_NotSupported()


def nvmlDeviceGetClockInfo(h, kind):
    return 345 if kind == NVML_CLOCK_SM else 3201


def nvmlDeviceGetMaxClockInfo(h, kind):
    return 1980 if kind == NVML_CLOCK_SM else 3201


def nvmlDeviceGetTemperature(h, sensor):
    return 31


def nvmlDeviceGetTopologyCommonAncestor(a, b):
    return 40
