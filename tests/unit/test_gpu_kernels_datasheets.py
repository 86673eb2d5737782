"""Datasheet peaks and bars of the GPUs users run most (issue 32 point 5): each found by its
exact NVML name, each with its source, bars by one rule; end to end on the fake device named
as an H100 (where the kernels reported ``bar: null, peak: null``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.harness import fake_env as make_env
from fakes.harness import run_cli

from gpu_kernels import datasheets, result

NVML_NAMES = {  # what nvidia-smi --query-gpu=name prints -> the datasheet model
    "NVIDIA H100 80GB HBM3": "H100 SXM", "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H100 NVL": "H100 NVL", "NVIDIA H200": "H200", "NVIDIA GH200 480GB": "GH200",
    "NVIDIA B200": "B200", "NVIDIA A100-SXM4-80GB": "A100 SXM4 80GB",
    "NVIDIA A100-SXM4-40GB": "A100 SXM4 40GB", "NVIDIA A100 80GB PCIe": "A100 80GB PCIe",
    "NVIDIA L40S": "L40S", "NVIDIA L4": "L4", "NVIDIA A10": "A10", "Tesla T4": "T4",
}
KEYS = ("membw", "fp32", "fp64", "gemm-fp64", "gemm")


@pytest.mark.parametrize("name,model", sorted(NVML_NAMES.items()))
def test_every_common_gpu_has_peaks_bars_and_a_source(name: str, model: str) -> None:
    sheet = datasheets.lookup(name)
    assert sheet is not None and sheet.model == model
    assert "datasheet" in sheet.source and "https://www.nvidia.com/" in sheet.source
    assert {"membw", "fp32", "gemm"} <= set(sheet.peaks) <= set(KEYS)
    for key in sheet.peaks:
        peak = result.resolve_peak(key, "u", name)
        bar = result.resolve_bar(key, "u", name)
        assert peak == {"value": sheet.peaks[key], "unit": "u", "source": f"{model} datasheet"}
        assert bar is not None and bar["source"] == f"default for {model}"
        assert 0.7 * peak["value"] - 1e-9 <= bar["value"] < peak["value"]


def test_the_h100_sxm_gets_the_rule_and_the_h200_keeps_the_design_card() -> None:
    assert result.resolve_peak("membw", "TB/s", "NVIDIA H100 80GB HBM3")["value"] == 3.35
    assert result.resolve_bar("fp32", "TFLOP/s", "NVIDIA H100 80GB HBM3")["value"] == 60.3
    assert result.resolve_bar("membw", "TB/s", "NVIDIA H100 80GB HBM3")["value"] == 2.78
    # the rule's fractions are the design card's H200 bars over the H200 datasheet
    h200 = datasheets.lookup("NVIDIA H200")
    for key, fraction in datasheets.BAR_FRACTION.items():
        assert h200.bars[key] / h200.peaks[key] == pytest.approx(fraction, abs=0.02)


def test_names_are_matched_exactly_not_by_substring() -> None:
    assert datasheets.lookup("NVIDIA GH200 480GB").model == "GH200"  # contains "H200"
    assert datasheets.lookup("NVIDIA H200 NVL").model == "H200 NVL"
    assert datasheets.lookup("nvidia  h100 pcie").model == "H100 PCIe"
    assert datasheets.lookup("NVIDIA A100") is None and datasheets.lookup(None) is None
    # FP64 the datasheet does not give: no peak and no bar, not a made-up one
    assert result.resolve_peak("fp64", "TFLOP/s", "NVIDIA L40S") is None
    assert result.resolve_bar("gemm-fp64", "TFLOP/s", "Tesla T4") is None


def test_each_nvml_name_belongs_to_one_datasheet() -> None:
    names = [n.lower() for d in datasheets.DATASHEETS for n in d.names]
    assert len(names) == len(set(names))


def test_an_h100_run_reports_its_bar_and_peak(tmp_path: Path) -> None:
    env = make_env(tmp_path, FAKE_GPU_NAME="NVIDIA H100 80GB HBM3")
    res = run_cli(env, "membw", "--mib", "4", "--seconds", "0.2", "--warmup-seconds", "0.05",
                  code=1)
    assert res["device"]["name"] == "NVIDIA H100 80GB HBM3"
    assert res["peak"] == {"value": 3.35, "unit": "TB/s", "source": "H100 SXM datasheet"}
    assert res["bar"]["value"] == 2.78 and res["met"] is False  # a CPU is far below it
    assert res["peak_ratio"] == pytest.approx(res["median"] / 3.35)
