"""Result objects built from fabricated timings: schema shape, bars, sharing figures, findings."""

from __future__ import annotations

import json
import math

import pytest

from gpu_kernels import analysis, result
from gpu_kernels.analysis import Thresholds

DEVICE = {"name": "NVIDIA H200", "uuid": "GPU-0", "pci_bus_id": "0000:18:00.0",
          "driver_version": "580.159.04", "cuda_runtime_version": "13.2",
          "cuda_driver_version": "13.0", "cupy_version": "14.2.0"}
KERNEL_KEYS = {"schema", "schema_version", "kind", "started", "metric", "unit", "median", "mean",
               "min", "max", "stdev", "cv", "trials", "trial_seconds", "trial_launches",
               "latency_ms", "work_per_launch", "work_unit", "warmup", "config", "correctness",
               "stability", "bar", "met", "device", "samples", "ok", "exit_code"}


def kernel(rates: list[float], ok: bool = True, device: dict | None = None,
           bar_override: float | None = None) -> dict:
    dev = device or DEVICE
    return result.kernel_result(
        kind="membw", metric="bandwidth (triad)", unit="TB/s", trial_rates=rates,
        trial_seconds=[0.5] * len(rates), trial_launches=[600] * len(rates),
        latencies_ms=[0.8, 0.81, 0.79, 0.9], work_per_launch=3 * 2**30, work_unit="bytes",
        correctness={"ok": ok, "max_rel_err": 0.0}, device=dev, config={"variant": "v"},
        warmup={"launches": 10, "seconds": 1.0, "launch_ms": 0.8},
        samples=[{"n": 5, "sm_clock_mhz_min": 1980, "throttle_reasons": []}] * len(rates),
        bar=result.resolve_bar("membw", "TB/s", dev["name"], bar_override))


def test_kernel_result_schema_and_statistics() -> None:
    res = kernel([4.2, 4.3, 4.25, 4.28, 4.22])
    assert set(res) >= KERNEL_KEYS
    assert res["schema"] == result.SCHEMA and res["schema_version"] == 1
    assert res["median"] == 4.25 and res["min"] == 4.2 and res["max"] == 4.3
    assert res["trials"] == [4.2, 4.3, 4.25, 4.28, 4.22]
    assert 0 < res["cv"] < 0.02 and res["stability"]["ok"] is True
    assert res["latency_ms"]["p50"] == pytest.approx(0.805)
    assert res["bar"] == {"value": 4.0, "op": ">=", "unit": "TB/s",
                          "source": "default for H200"}
    assert res["met"] is True and res["ok"] is True and res["exit_code"] == 0
    assert len(res["samples"]) == 5
    line = result.dumps(res)
    assert "\n" not in line and json.loads(line)["median"] == 4.25


def test_missed_bar_or_failed_check_exits_1() -> None:
    missed = kernel([3.9, 3.95, 3.92, 3.91, 3.93])
    assert missed["met"] is False and missed["exit_code"] == 1
    wrong = kernel([4.3] * 5, ok=False)
    assert wrong["met"] is True and wrong["ok"] is False and wrong["exit_code"] == 1


def test_no_bar_off_h200_and_override() -> None:
    # a GPU without a datasheet entry (the A100 has one since issue 32: gpu_kernels/datasheets)
    other = kernel([1.0] * 5, device={**DEVICE, "name": "NVIDIA GeForce RTX 4090"})
    assert other["bar"] is None and other["met"] is None and other["exit_code"] == 0
    forced = kernel([1.0] * 5, device={**DEVICE, "name": "NVIDIA A100"}, bar_override=1.5)
    assert forced["bar"]["source"] == "--bar" and forced["met"] is False
    assert result.resolve_bar("gemm", "TFLOP/s", "NVIDIA H200", disabled=True) is None
    assert result.resolve_bar("gemm", "TFLOP/s", "NVIDIA H200")["value"] == 700.0
    assert result.resolve_bar("fp32", "TFLOP/s", "NVIDIA H200")["value"] == 60.0


def test_dumps_turns_nan_into_null() -> None:
    line = result.dumps({"a": float("nan"), "b": [1.0, float("inf")], "c": {"d": 2}})
    assert json.loads(line) == {"a": None, "b": [1.0, None], "c": {"d": 2}}


def worker_result(period_s: float, start: float = 100.0, seconds: float = 8.0,
                  work: float = 1e12, ok: bool = True, error: str | None = None) -> dict:
    """A copy that completed one launch of ``work`` every ``period_s`` seconds."""
    n = int(seconds / period_s)
    return {"kind": "membw", "unit": "TB/s", "scale": 1e12, "work_per_launch": work,
            "times": [start + period_s * (i + 1) for i in range(n)],
            "latencies_ms": [period_s * 1000.0] * n, "pid": 1,
            "correctness": {"ok": ok}, "error": error}


def test_copy_figures_over_a_window() -> None:
    figs = analysis.copy_figures(worker_result(0.25), 101.0, 106.0, trials=5)
    assert figs["rate"] == pytest.approx(4.0)
    assert figs["trials"] == pytest.approx([4.0] * 5)
    assert figs["cv"] == pytest.approx(0.0, abs=1e-9)
    assert figs["latency_p50_ms"] == pytest.approx(250.0)
    assert figs["launches"] == 21 and figs["correct"] is True


def shared_point(periods: list[float], solo_period: float = 0.25, **kw) -> dict:
    solo = analysis.copy_figures(worker_result(solo_period), 101.0, 106.0, 5)["rate"]
    per_copy = [analysis.copy_figures(worker_result(p, **kw), 101.0, 106.0, 5)
                for p in periods]
    return analysis.point(experiment="interference", kernel="membw", mode="time-slicing",
                          per_copy=per_copy, solo_rates=[solo] * len(periods),
                          limits=Thresholds())


def test_fair_time_slicing_point_passes() -> None:
    pt = shared_point([1.0, 1.0, 1.0, 1.0])  # four copies, each 1/4 of solo
    assert pt["copies"] == 4 and pt["verdict"] == "pass" and pt["reasons"] == []
    assert pt["slowdown"] == pytest.approx([4.0] * 4)
    assert pt["normalized_progress"] == pytest.approx([1.0] * 4)
    assert pt["aggregate_vs_solo"] == pytest.approx(1.0)
    assert pt["overhead"] == pytest.approx(0.0, abs=1e-9)
    assert pt["jain"] == pytest.approx(1.0)
    assert pt["latency_p50_ms"] == pytest.approx([1000.0] * 4)
    for key in ("experiment", "kernel", "copies", "per_copy", "slowdown", "aggregate_vs_solo",
                "jain", "latency_p50_ms", "latency_p99_ms", "verdict", "thresholds", "mode"):
        assert key in pt
    assert all("rate" in c for c in pt["per_copy"])


def test_unfair_or_lossy_points_fail() -> None:
    hog = shared_point([0.3, 3.0])  # one copy gets most of the GPU
    assert hog["verdict"] == "fail" and any("Jain" in r for r in hog["reasons"])
    lossy = shared_point([0.625, 0.625])  # together only 80 % of solo
    assert lossy["overhead"] == pytest.approx(0.2)
    assert lossy["verdict"] == "fail" and any("overhead" in r for r in lossy["reasons"])
    wrong = shared_point([0.5, 0.5], ok=False)
    assert wrong["verdict"] == "fail"


def test_solo_point_is_the_baseline() -> None:
    pt = shared_point([0.25])
    assert pt["verdict"] == "baseline" and pt["aggregate_vs_solo"] == pytest.approx(1.0)


HOG = {"fraction": 0.88, "requested_bytes": 110 * 2**30, "held_bytes": 110 * 2**30,
       "succeeded": True, "total_bytes": 140 * 2**30, "error": None}


def test_memory_finding_without_isolation() -> None:
    big = {"succeeded": False, "requested_bytes": 35 * 2**30, "free_seen_bytes": 17 * 2**30,
           "error": "OutOfMemoryError: out of memory"}
    found = analysis.memory_finding("time-slicing", HOG, {"free_bytes": 1}, big,
                                    {"succeeded": True}, {"succeeded": True})
    assert found["isolated"] is False and found["mode"] == "memory"
    assert found["requirement"] == "SHARE-ISO-001"
    assert "No memory isolation" in found["finding"] and "35.0 GiB failed" in found["finding"]
    assert found["details"]["other_allocation_after_holder_exit"] == "succeeded"
    assert all(not isinstance(v, dict | list) for v in found["details"].values())


def test_memory_finding_is_inconclusive_when_the_request_fails_without_the_holder() -> None:
    # measured on the H100 under MPS with 4 replicas: the other copy asked 19.79 GiB of a
    # 19.77 GiB view; the same request failed with the holder gone too
    oom = {"succeeded": False, "requested_bytes": int(19.79 * 2**30),
           "free_seen_bytes": int(19.77 * 2**30), "error": "cudaErrorMemoryAllocation"}
    found = analysis.memory_finding("mps", HOG, {"free_bytes": 1}, oom, {"succeeded": True},
                                    oom)
    assert found["isolated"] is None and "No memory isolation" not in found["finding"]
    assert "says nothing about isolation" in found["finding"]


def test_memory_finding_when_the_holder_is_limited() -> None:
    limited = {**HOG, "succeeded": False, "held_bytes": 70 * 2**30, "error": "OOM"}
    found = analysis.memory_finding("mps", limited, {"free_bytes": 1}, None, None, None)
    assert found["isolated"] is True and "limit" in found["finding"]


def test_memory_finding_names_a_client_view_smaller_than_the_gpu() -> None:
    # a client whose CUDA reports half the GPU as its total (e.g. a 2-replica pinned limit)
    half = {**HOG, "total_bytes": 70 * 2**30, "held_bytes": 61 * 2**30}
    found = analysis.memory_finding("mps", half, {"free_bytes": 1}, {"succeeded": True},
                                    {"succeeded": True}, {"succeeded": True},
                                    gpu_total_bytes=140 * 2**30)
    assert found["isolated"] is True and found["details"]["gpu_total_gib"] == 140.0
    assert "each copy sees 70.0 GiB of the GPU's 140.0 GiB" in found["finding"]
    whole = analysis.memory_finding("time-slicing", HOG, {"free_bytes": 1}, {"succeeded": True},
                                    {"succeeded": True}, {"succeeded": True},
                                    gpu_total_bytes=140 * 2**30)
    assert "sees" not in whole["finding"]


def test_fault_finding_survivor_and_victim() -> None:
    faulter = {"error": "cudaErrorIllegalAddress: an illegal memory access was encountered",
               "illegal_address": True}
    phases = analysis.fault_phases(101.0, 103.0, 103.2, 106.0)
    assert phases["during"] == (103.0, 103.7) and phases["after"] == (103.7, 106.0)
    alive = analysis.fault_finding("time-slicing", worker_result(0.25), None, faulter, phases)
    assert alive["isolated"] is True and alive["details"]["other_survived"] is True
    assert alive["details"]["after_vs_before"] == pytest.approx(1.0)
    assert "did not stop the other" in alive["finding"]

    died = worker_result(0.25, seconds=2.5, error="CUDARuntimeError: cudaErrorIllegalAddress")
    dead = analysis.fault_finding("mps", died, None, faulter, phases)
    assert dead["isolated"] is False and dead["details"]["other_rate_after"] == 0.0
    assert "No fault isolation" in dead["finding"] and dead["requirement"] == "SHARE-ISO-002"

    gone = analysis.fault_finding("mps", None, "worker 7 exited (code 1)", faulter, phases)
    assert gone["isolated"] is False and math.isclose(gone["details"]["other_rate_before"], 0)


def test_copies_doing_different_work_are_not_compared() -> None:
    solo = analysis.copy_figures(worker_result(0.25), 101.0, 106.0, 5)["rate"]
    per_copy = [analysis.copy_figures(worker_result(0.5, work=w), 101.0, 106.0, 5)
                for w in (1e12, 4e10)]
    pt = analysis.point(experiment="interference", kernel="fp32", mode="mps",
                        per_copy=per_copy, solo_rates=[solo] * 2, limits=Thresholds())
    assert pt["verdict"] == "fail" and any("different work" in r for r in pt["reasons"])


def test_shared_copies_reuse_the_solo_sizing() -> None:
    from gpu_kernels import kernels

    config = {"outer_loops": 2124, "variant": "c16u16"}
    assert kernels.pinned("fp32", {"outer": 0, "launch_ms": 4.0}, config)["outer"] == 2124
    assert kernels.pinned("membw", {"mib": 1024}, {"elements": 5}) == {"mib": 1024}
