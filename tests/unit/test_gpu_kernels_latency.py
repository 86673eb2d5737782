"""The ``latency`` kind: percentiles, CDF points, slowdowns, the implied time slice and the
finding on fabricated requests; the inference-like client's check; and the experiment end
to end on the fake CuPy/NVML/MPS (tests/unit/fakes), where only the plumbing is real."""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from fakes.harness import FAKES, ROOT, run_cli, usage_error
from fakes.harness import fake_env as make_env

from gpu_kernels import analysis, stats


def test_percentile_keys_and_tail_summary() -> None:
    assert [stats.percentile_key(q) for q in (50, 99, 99.9)] == ["p50", "p99", "p999"]
    lat = stats.latency_summary([float(i) for i in range(1, 1001)], (50.0, 99.0, 99.9))
    assert lat["n"] == 1000 and lat["p999"] == pytest.approx(999.001)
    assert set(lat) == {"n", "p50", "p99", "p999", "min", "max", "mean"}


def test_cdf_points_are_monotone_from_min_to_max() -> None:
    values = [5.0, 1.0, 3.0, 2.0, 4.0] * 50
    cdf = stats.cdf_points(values)
    assert cdf[0] == [1.0, 0.0] and cdf[-1] == [5.0, 1.0]
    assert [q for _, q in cdf] == list(stats.CDF_QUANTILES)
    assert all(a[0] <= b[0] and a[1] < b[1] for a, b in pairwise(cdf))
    assert stats.cdf_points([]) == []


def test_linear_fit() -> None:
    slope, intercept = stats.linear_fit([1, 2, 4, 8], [1.5, 3.5, 7.5, 15.5])
    assert slope == pytest.approx(2.0) and intercept == pytest.approx(-0.5)
    assert stats.linear_fit([4, 4], [1.0, 2.0]) is None


def client(latencies_ms: list[float], start: float = 100.0, gap: float = 0.002,
           ok: bool = True) -> dict[str, Any]:
    return {"times": [start + gap * i for i in range(len(latencies_ms))],
            "latencies_ms": latencies_ms, "correctness": {"ok": ok}, "error": None}


def sharer(rate: float) -> dict[str, Any]:
    return {"kernel": "gemm", "unit": "TFLOP/s", "rate": rate, "correct": True, "error": None}


def point(mode: str, sharers: int, latencies_ms: list[float]) -> dict[str, Any]:
    return analysis.latency_point(mode=mode, sharers=sharers, client=client(latencies_ms),
                                  start=100.0, end=200.0,
                                  sharer_figures=[sharer(600.0 / max(sharers, 1))] * sharers)


def test_a_point_counts_only_requests_inside_the_window() -> None:
    c = client([0.3] * 10 + [50.0] * 5, start=99.99)  # the first 5 before the window
    pt = analysis.latency_point(mode="solo", sharers=0, client=c, start=100.0, end=200.0)
    assert pt["n"] == 10 and pt["latency_us"]["max"] == 50000.0
    assert pt["p999_reliable"] is False and pt["client_correct"] is True
    assert pt["sharer_rates"] == [] and pt["sharers_correct"] is True


def time_sliced(quantum_ms: float = 2.0, solo_ms: float = 0.3) -> list[dict[str, Any]]:
    """Requests that wait uniformly up to N slices beside N sharers."""
    solo = point("solo", 0, [solo_ms] * 2000)
    pts = [point("time-slicing", n, [solo_ms + quantum_ms * n * i / 1999 for i in range(2000)])
           for n in (1, 2, 4, 8)]
    pts.append(point("mps", 4, [solo_ms * 1.5] * 2000))
    for p in [solo, *pts]:
        analysis.with_slowdowns(p, solo)
    return [solo, *pts]


def test_slowdowns_and_the_implied_time_slice() -> None:
    solo, *pts = time_sliced(quantum_ms=2.0)
    assert solo["slowdown"] == {"p50": 1.0, "p99": 1.0, "p999": 1.0}
    n8 = pts[3]
    assert n8["sharers"] == 8 and n8["p999_reliable"] is True
    assert n8["slowdown"]["p99"] == pytest.approx((0.3 + 16 * 0.99) / 0.3, rel=1e-3)
    assert n8["implied_quantum_ms"] == pytest.approx(2.0 * 0.99, rel=1e-3)
    assert n8["sharer_aggregate"] == pytest.approx(600.0)
    assert pts[-1]["implied_quantum_ms"] is None and pts[-1]["slowdown"]["p99"] == 1.5
    q = analysis.implied_quantum(pts)
    assert q["ms"] == pytest.approx(1.98, rel=1e-3) and q["from_sharers"] == [1, 2, 4, 8]
    assert q["intercept_ms"] == pytest.approx(0.3, abs=1e-3)


def test_phase_locked_requests_imply_the_same_slice() -> None:
    """After a fixed think time each request waits N whole slices less the think time (as
    on the H200: p50 and p99 within 5 %), and the slope still gives the slice."""
    solo = point("solo", 0, [0.36] * 2000)
    pts = [analysis.with_slowdowns(point("time-slicing", n, [2.3 * n - 1.06 + 0.36] * 2000),
                                   solo) for n in (1, 2, 4, 8)]
    q = analysis.implied_quantum(pts)
    assert q["ms"] == pytest.approx(2.3) and q["intercept_ms"] == pytest.approx(-0.7)
    assert pts[0]["implied_quantum_ms"] == pytest.approx(1.24)  # per point: biased low
    one = analysis.implied_quantum(pts[:1])
    assert one["ms"] == pytest.approx(1.24) and one["intercept_ms"] is None


def test_finding_gives_the_numbers() -> None:
    solo, *pts = time_sliced()
    text = analysis.latency_finding("8 x 8192^2 bf16 GEMV layers", "gemm", solo, pts,
                                    analysis.implied_quantum(pts))
    assert "0.30/0.30/0.30 ms alone" in text
    assert "under time-slicing" in text and "N=8 8.30/" in text and "under mps" in text
    assert "a time slice of about 2.0 ms" in text


def test_infer_client_checks_against_float64(tmp_path: Path) -> None:
    code = ("from gpu_kernels import cuda, kernels\n"
            "cp = cuda.load()\n"
            "w = kernels.build('infer', cp, {'hidden': 64, 'layers': 3, 'seed': 1})\n"
            "ok = w.check()\n"
            "w.launch = lambda: None\n"  # nothing written: the poisoned output must fail
            "bad = w.check()\n"
            "print(ok['ok'], bad['ok'], w.config['launches_per_request'], w.work_per_launch)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": f"{FAKES}{os.pathsep}{ROOT}",
                               "FAKE_CUPY_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "3", str(3 * 64 * 64 * 2.0)]


@pytest.fixture
def fake_env(tmp_path: Path) -> dict[str, str]:
    return make_env(tmp_path)


def cli(env: dict[str, str], *args: str, code: int = 0) -> dict[str, Any]:
    return run_cli(env, "latency", *args, code=code)


def test_latency_solo_time_sliced_and_mps(fake_env: dict[str, str]) -> None:
    res = cli(fake_env, "--seconds", "0.8", "--sharers", "1,2", "--mps-sharers", "1",
              "--stress", "membw", "--membw-mib", "4", "--infer-hidden", "128",
              "--infer-layers", "2", "--think-ms", "0.5")
    assert res["kind"] == "latency" and res["requirement"] == "SHARE-LAT-001"
    assert [(p["mode"], p["sharers"]) for p in res["points"]] == [
        ("solo", 0), ("time-slicing", 1), ("time-slicing", 2), ("mps", 1)]
    for p in res["points"]:
        assert p["n"] > 0 and p["client_correct"] and p["sharers_correct"]
        assert set(p["latency_us"]) >= {"p50", "p90", "p99", "p999", "max"}
        assert len(p["cdf"]) == len(stats.CDF_QUANTILES) and p["cdf"][-1][1] == 1.0
        assert len(p["sharer_rates"]) == p["sharers"]
    assert res["points"][0]["slowdown"]["p99"] == 1.0
    assert res["quantum"]["from_sharers"] == [1, 2] and res["quantum"]["ms"] is not None
    assert "alone" in res["finding"] and "under mps" in res["finding"]
    assert res["client"]["config"]["hidden"] == 128 and res["client"]["think_ms"] == 0.5
    assert res["mps"]["stopped"] is True and res["ok"] is True


def test_mps_points_without_mps_exit_3_before_measuring(fake_env: dict[str, str]) -> None:
    env = {**fake_env, "PATH": "/usr/bin:/bin"}
    res = cli(env, "--mps-sharers", "1", code=3)
    assert "nvidia-cuda-mps-control" in res["error"]


@pytest.mark.parametrize("args", [("--think-ms", "-1"), ("--sharers", "0"),
                                  ("--stress", "warp"), ("--mps-sharers", "a")])
def test_usage_errors(args: tuple[str, ...]) -> None:
    usage_error("latency", *args)
