"""FP64 stress: the fp64 FMA chains (fp32.py's code path in double) and DGEMM (``gemm --dtype
fp64``), their datasheet peaks and bars, the closed-form check, and both kinds end to end on
the fake CuPy/NVML (tests/unit/fakes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fakes.harness import bare_env, run_cli
from fakes.harness import fake_env as make_env

from gpu_kernels import cli, result
from gpu_kernels.kernels import fp32, fp64, gemm


def test_fp64_bars_and_datasheet_peaks_on_an_h200() -> None:
    assert result.resolve_bar("gemm-fp64", "TFLOP/s", "NVIDIA H200")["value"] == 50.0
    assert result.resolve_bar("fp64", "TFLOP/s", "NVIDIA H200")["value"] == 30.0
    assert result.resolve_bar("gemm", "TFLOP/s", "NVIDIA H200")["value"] == 700.0
    assert result.resolve_peak("gemm-fp64", "TFLOP/s", "NVIDIA H200") == {
        "value": 67.0, "unit": "TFLOP/s", "source": "H200 datasheet"}
    assert result.resolve_peak("fp64", "TFLOP/s", "NVIDIA H200")["value"] == 34.0
    assert result.resolve_peak("gemm-fp64", "TFLOP/s", "NVIDIA A100") is None


def test_kernel_result_reports_the_ratio_to_the_peak() -> None:
    res = result.kernel_result(
        kind="gemm", metric="fp64 GEMM throughput", unit="TFLOP/s",
        trial_rates=[53.6] * 5, trial_seconds=[0.5] * 5, trial_launches=[25] * 5,
        latencies_ms=[20.0], work_per_launch=2 * 8192.0**3, work_unit="flop",
        correctness={"ok": True}, device={"name": "NVIDIA H200"}, config={}, warmup={},
        bar=result.resolve_bar("gemm-fp64", "TFLOP/s", "NVIDIA H200"),
        peak=result.resolve_peak("gemm-fp64", "TFLOP/s", "NVIDIA H200"))
    assert res["peak_ratio"] == pytest.approx(0.8) and res["met"] is True
    assert res["exit_code"] == 0


def test_double_recurrence_agrees_with_the_closed_form_and_a_skipped_step_does_not() -> None:
    rng = np.random.default_rng(3)
    steps = 4000
    a, b, x0 = fp32.make_inputs(rng, 64, 4, steps, "float64")
    assert a.dtype == b.dtype == x0.dtype == np.float64
    x = x0.copy()
    for _ in range(steps):
        x = a * x + b  # two roundings a step: no closer to the closed form than fma
    exact = fp32.closed_form(a, b, x0, steps)
    assert np.max(np.abs(x - exact) / np.abs(exact)) < fp64.THRESHOLD
    short = fp32.closed_form(a, b, x0, steps - 1)
    assert np.max(np.abs(short - exact) / np.abs(exact)) > 100 * fp64.THRESHOLD


def test_fp64_bits_widen_exactly() -> None:
    values = np.array([1.5, -2.0**-1000, np.pi], dtype=np.float64)
    assert np.array_equal(gemm.to_float64(values.view(np.uint64), "fp64"), values)


def test_fp64_is_a_stress_kind_of_every_experiment() -> None:
    parser = cli.build_parser()
    args = parser.parse_args(["fp64", "--variant", "c8u16", "--seconds", "2"])
    assert args.kind == "fp64" and args.variant == "c8u16"
    args = parser.parse_args(["interference", "--kernel", "fp64", "--fp64-launch-ms", "2"])
    assert args.fp64_launch_ms == 2.0
    assert parser.parse_args(["gemm", "--dtype", "fp64"]).dtype == "fp64"


@pytest.fixture
def fake_env(tmp_path: Path) -> dict[str, str]:
    return make_env(tmp_path)


def test_fp64_fma_on_the_fake_device(fake_env: dict[str, str]) -> None:
    res = run_cli(fake_env, "fp64", "--seconds", "0.2", "--warmup-seconds", "0.05",
                  "--launch-ms", "1", code=1)  # a CPU is far below an H200's bar
    assert res["metric"] == "fp64 FMA throughput" and res["correctness"]["ok"] is True
    assert "closed form" in res["correctness"]["method"]
    assert res["correctness"]["threshold"] == fp64.THRESHOLD
    assert res["bar"]["value"] == 30.0 and res["peak"]["value"] == 34.0
    assert res["met"] is False
    assert res["peak_ratio"] == pytest.approx(res["median"] / 34.0)


def test_dgemm_on_the_fake_device(fake_env: dict[str, str]) -> None:
    res = run_cli(fake_env, "gemm", "--dtype", "fp64", "--size", "256", "--seconds", "0.2",
                  "--warmup-seconds", "0.05", "--no-bar")
    assert res["metric"] == "fp64 GEMM throughput"
    assert res["config"]["accumulate"] == "float64" and res["config"]["backend"] == "matmul"
    assert res["correctness"]["ok"] is True and res["correctness"]["threshold"] == 1e-11
    assert res["bar"] is None and res["peak"]["value"] == 67.0


def test_fp64_without_cupy_exits_3() -> None:
    res = run_cli(bare_env(), "fp64", code=3)
    assert res["kind"] == "fp64" and res["error"]
