"""Measurement reading is tolerant of schema drift (gpu_kernels writes it in parallel)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report_fixtures import interference, kernels, make_results

from conformance.report import build_report, measure
from conformance.report.svg import nice_ticks, tick_label


def test_reads_gpu_kernels_shapes() -> None:
    found = measure.kernels({"kernels": kernels()})
    triad = found[0]
    assert (triad.label, triad.unit, triad.device) == ("membw · triad", "TB/s",
                                                       "NVIDIA H200 (GPU 0)")
    assert triad.bar == 4.0 and triad.met is True and triad.trials == 5
    assert triad.low is not None and triad.high is not None and triad.low < triad.high
    series = measure.interference({"interference": interference()})
    assert [s.title for s in series] == ["membw · time-slicing", "gemm · time-slicing"]
    four = series[0].points[-1]
    assert four.copies == 4 and len(four.per_copy) == 4
    assert four.aggregate_vs_solo == pytest.approx(0.93)


def test_reads_plain_numbers_and_derives_what_is_missing() -> None:
    found = measure.kernels({"kernels": [
        {"kind": "membw", "unit": "TB/s", "trials": [4.0, 4.2, 4.1], "bar": 4.15,
         "device": "H200"},
    ]})[0]
    assert found.median == 4.1 and (found.low, found.high) == (4.0, 4.2)
    assert found.met is False and found.device == "H200"
    series = measure.interference({"interference": [
        {"kernel": "fma", "copies": 1, "per_copy": [48.0]},
        {"kernel": "fma", "copies": 2, "per_copy": [21.0, 21.0], "jain": 1.0},
    ]})[0]
    two = series.points[1]
    assert two.slowdown == pytest.approx([48.0 / 21.0] * 2)
    assert two.aggregate_vs_solo == pytest.approx(42.0 / 48.0)


def test_missing_keys_do_not_break_the_report(tmp_path: Path) -> None:
    results = make_results()
    results["measurements"] = {
        "kernels": [{"kind": "gemm"}, {"kind": "fp32", "error": "no GPU", "exit_code": 3},
                    "junk"],
        "interference": [{}, {"copies": 2}],
        "isolation": [{"finding": "no memory isolation"}],
        "scheduling_latency": "n/a",
        "api_requests": {"GET": 12, "LIST": 3},
    }
    html = build_report(results, tmp_path)["html"].read_text()
    assert "error: no GPU" in html and "no memory isolation" in html
    assert "api_requests" in html


def test_latency_is_lower_is_better() -> None:
    assert measure.higher_is_better("TB/s") and measure.higher_is_better("TFLOP/s")
    assert not measure.higher_is_better("ms") and not measure.higher_is_better("s")
    assert measure.higher_is_better("ms", declared=True)


def test_ticks_are_round() -> None:
    assert nice_ticks(4.4) == [0.0, 2.0, 4.0, 6.0]
    assert nice_ticks(1.15) == [0.0, 0.5, 1.0, 1.5]
    assert tick_label(0.5, [0.0, 0.5]) == "0.5" and tick_label(600, [0, 200]) == "600"


def test_pods_against_processes_per_n_with_their_ratio() -> None:
    from conformance.report import html_report, markdown_report

    measurements = {"pod_vs_process": [{"kernel": "membw", "mode": "time-sliced pods",
                                        "node": "h100", "points": [
                                            {"copies": 2, "unit": "TB/s", "pod_aggregate": 3.0,
                                             "process_aggregate": 3.01, "ratio": 0.9967}]}]}
    rows = measure.pod_vs_process(measurements)
    assert [(r.copies, r.ratio) for r in rows] == [(2, 0.9967)]
    text = "\n".join(markdown_report.measurement_lines(measurements, "##"))
    assert "Pods on one GPU against processes in one pod" in text and "0.997" in text
    assert "Other measurements" not in text
    assert "0.997" in html_report.pod_vs_process_block(rows)


def test_the_latency_pods_against_processes_are_no_aggregate_rows() -> None:
    """SHARE-LAT-001's rows (p50/p99/p99.9 per S) have no aggregate to show as one."""
    latency = {"experiment": "latency", "kernel": "infer", "mode": "time-sliced pods",
               "node": "h100", "points": [{"sharers": 1, "unit": "us", "pod_p99": 808.0,
                                           "process_p99": 800.0, "p99_ratio": 1.01}]}
    interference = {"kernel": "membw", "mode": "time-sliced pods", "node": "h100",
                    "points": [{"copies": 2, "pod_aggregate": 3.0, "ratio": 0.9967}]}
    rows = measure.pod_vs_process({"pod_vs_process": [latency, interference]})
    assert [(r.kernel, r.copies) for r in rows] == [("membw", 2)]


def test_the_latency_pods_against_processes_have_their_own_table() -> None:
    """SHARE-LAT-001: per S, each percentile of pods and processes in ms, and the ratio."""
    from conformance.report import html_report, markdown_report

    latency = {"experiment": "latency", "kernel": "infer", "mode": "time-sliced pods",
               "node": "h100", "points": [{"sharers": 2, "unit": "us", "pod_p50": 400.0,
                                           "process_p50": 400.0, "p50_ratio": 1.0,
                                           "pod_p99": 808.0, "process_p99": 800.0,
                                           "p99_ratio": 1.01, "pod_p999": None,
                                           "process_p999": 900.0, "p999_ratio": None}]}
    measurements = {"pod_vs_process": [latency]}
    rows = measure.latency_pod_vs_process(measurements)
    assert [(r.sharers, r.ratios["p99"]) for r in rows] == [(2, 1.01)]
    text = "\n".join(markdown_report.measurement_lines(measurements, "##"))
    assert "sharers in pods against sharers in one pod" in text
    assert "0.808 / 0.800 ms (1.010)" in text and "— / 0.900 ms (—)" in text, text
    assert "1.010" in html_report.latency_pod_vs_process_block(rows)
