"""The DCGM metrics parser counts GPUs by UUID per series (what STACK-DCGM-002 compares)."""

from conformance.suites.stack.test_dcgm import gpus_by_metric

SAMPLE = """# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",Hostname="n0"} 3
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",Hostname="n0"} 0
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",Hostname="n0"} 120
"""


def test_counts_gpus_per_series():
    assert gpus_by_metric(SAMPLE) == {"DCGM_FI_DEV_GPU_UTIL": {"GPU-a", "GPU-b"},
                                      "DCGM_FI_DEV_FB_USED": {"GPU-a"}}
