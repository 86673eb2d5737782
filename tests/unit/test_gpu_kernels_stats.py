"""gpu_kernels.stats on known inputs (no GPU)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpu_kernels import stats


def test_jain_of_equal_shares_is_one() -> None:
    assert stats.jain([0.25, 0.25, 0.25, 0.25]) == pytest.approx(1.0)
    assert stats.jain([3.0, 3.0]) == pytest.approx(1.0)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_jain_of_one_hog_is_one_over_n(n: int) -> None:
    assert stats.jain([1.0] + [0.0] * (n - 1)) == pytest.approx(1.0 / n)


def test_jain_known_value_and_edge_cases() -> None:
    # (1 + 3)^2 / (2 * (1 + 9)) = 16 / 20
    assert stats.jain([1.0, 3.0]) == pytest.approx(0.8)
    assert stats.jain([]) is None
    assert stats.jain([0.0, 0.0]) is None
    with pytest.raises(ValueError):
        stats.jain([1.0, -1.0])


@pytest.mark.parametrize("q", [0, 1, 25, 50, 90, 99, 100])
def test_percentile_matches_numpy_linear(q: float) -> None:
    data = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.5]
    assert stats.percentile(data, q) == pytest.approx(float(np.percentile(data, q)))


def test_percentile_rejects_bad_q_and_ignores_nan() -> None:
    with pytest.raises(ValueError):
        stats.percentile([1.0], 101)
    assert stats.percentile([1.0, float("nan"), 3.0], 50) == 2.0
    assert stats.percentile([], 50) is None


def test_median_stdev_cv() -> None:
    data = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
    assert stats.median(data) == 4.5
    assert stats.stdev(data) == pytest.approx(float(np.std(data, ddof=1)))
    assert stats.cv(data) == pytest.approx(float(np.std(data, ddof=1) / np.mean(data)))
    assert stats.stdev([3.0]) == 0.0
    assert stats.cv([0.0, 0.0]) is None


def test_summarize_shape() -> None:
    s = stats.summarize([1.0, 2.0, 3.0])
    assert s == {"n": 3, "median": 2.0, "mean": 2.0, "min": 1.0, "max": 3.0,
                 "stdev": 1.0, "cv": 0.5}


def test_latency_summary() -> None:
    lat = stats.latency_summary([float(i) for i in range(1, 101)])
    assert lat["n"] == 100 and lat["min"] == 1.0 and lat["max"] == 100.0
    assert lat["p50"] == pytest.approx(50.5)
    assert lat["p99"] == pytest.approx(99.01)


def test_slowdown_progress_aggregate_overhead() -> None:
    solo = 4.0
    shared = [1.0, 1.0, 1.0, 1.0]  # four copies each got exactly 1/4
    assert stats.slowdown(solo, 1.0) == 4.0
    assert stats.normalized_progress(solo, 1.0, 4) == pytest.approx(1.0)
    agg = stats.aggregate_vs_solo([solo] * 4, shared)
    assert agg == pytest.approx(1.0)
    assert stats.overhead(agg) == pytest.approx(0.0)
    # 7 % lost: each copy got 0.93/4 of solo
    agg = stats.aggregate_vs_solo([solo] * 2, [solo * 0.93 / 2] * 2)
    assert stats.overhead(agg) == pytest.approx(0.07)
    assert stats.slowdown(solo, 0.0) is None
    with pytest.raises(ValueError):
        stats.aggregate_vs_solo([1.0], [1.0, 1.0])


def test_mixed_aggregate_uses_each_kernels_own_solo() -> None:
    # membw 4 TB/s solo got 2; fp32 60 TFLOP/s solo got 30: together one whole GPU
    assert stats.aggregate_vs_solo([4.0, 60.0], [2.0, 30.0]) == pytest.approx(1.0)


def test_progress_interpolates_between_completions() -> None:
    times = [1.0, 2.0, 3.0, 4.0]
    assert stats.progress_at(times, 0.5) == 0.0
    assert stats.progress_at(times, 1.0) == 1.0
    assert stats.progress_at(times, 2.5) == pytest.approx(2.5)
    assert stats.progress_at(times, 9.0) == 4.0


def test_window_rate_of_a_steady_stream() -> None:
    times = [0.01 * i for i in range(1, 1001)]  # one launch every 10 ms for 10 s
    assert stats.window_rate(times, 2.0, 7.0, work=5.0) == pytest.approx(500.0)
    assert stats.window_rate(times, 2.003, 2.517, work=1.0) == pytest.approx(100.0)
    assert stats.window_rate(times, 3.0, 3.0, work=1.0) is None


def test_split_windows() -> None:
    parts = stats.split_windows(10.0, 15.0, 5)
    assert parts[0] == (10.0, 11.0) and parts[-1] == (14.0, 15.0)
    assert math.isclose(sum(b - a for a, b in parts), 5.0)
    with pytest.raises(ValueError):
        stats.split_windows(1.0, 1.0, 3)
