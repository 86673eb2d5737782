"""A fake nvidia-ml-py for tests: one healthy H200-like GPU; env vars inject faults.

FAKE_NVML_ECC_UNCORRECTED=N sets the volatile uncorrectable ECC count;
FAKE_NVML_GPUS=N enumerates N GPUs (distinct UUIDs); NVLink reports "not supported".
"""

import os
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


_GPUS = int(os.environ.get("FAKE_NVML_GPUS", "1"))


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
    return 0


def nvmlDeviceGetHandleByUUID(uuid):
    return 0


def nvmlDeviceGetName(h):
    return "NVIDIA H200"


def nvmlDeviceGetUUID(h):
    return f"GPU-35ed54a8-206d-8d3c-72b9-cff17c00af{h:02x}"


def nvmlDeviceGetSerial(h):
    raise NVMLError_NotSupported()


def nvmlDeviceGetPciInfo(h):
    return SimpleNamespace(busId=f"00000000:{0x18 + h:02X}:00.0".encode())


def nvmlDeviceGetMemoryInfo(h):
    return SimpleNamespace(total=150754820096, used=500 * 2**20, free=150754820096 - 500 * 2**20)


def nvmlDeviceGetCudaComputeCapability(h):
    return (9, 0)


def nvmlDeviceGetCurrentClocksEventReasons(h):
    return 0x1


def nvmlDeviceGetComputeMode(h):
    return 0


def nvmlDeviceGetPowerUsage(h):
    return 75000


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
        return int(os.environ.get("FAKE_NVML_ECC_UNCORRECTED", "0"))
    return 0


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
