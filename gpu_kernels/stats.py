"""Statistics for trials and for sharing experiments. Pure Python: no GPU, no numpy.

Conventions (perf.md §5):
- ``slowdown`` of a copy = solo_rate / shared_rate (its time per unit of work, shared over
  solo). Under fair time-slicing of N copies it is about N.
- normalised progress x_i = shared_rate_i / (solo_rate_i / N): 1.0 is a perfect 1/N share.
- Jain's index J = (sum x)^2 / (n * sum x^2), in [1/n, 1], computed on x_i.
- ``aggregate_vs_solo`` = sum_i shared_rate_i / solo_rate_i (1.0: sharing costs nothing);
  ``overhead`` = 1 - aggregate_vs_solo (negative when sharing gains, as under MPS).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence


def _finite(values: Sequence[float]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def mean(values: Sequence[float]) -> float | None:
    data = _finite(values)
    return math.fsum(data) / len(data) if data else None


def median(values: Sequence[float]) -> float | None:
    return percentile(values, 50.0)


def stdev(values: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1); 0.0 for one value, None for none."""
    data = _finite(values)
    if not data:
        return None
    if len(data) == 1:
        return 0.0
    m = math.fsum(data) / len(data)
    return math.sqrt(math.fsum((v - m) ** 2 for v in data) / (len(data) - 1))


def cv(values: Sequence[float]) -> float | None:
    """Coefficient of variation stdev / mean (None when the mean is 0 or there are no data)."""
    m, s = mean(values), stdev(values)
    if m is None or s is None or m == 0:
        return None
    return s / abs(m)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation (numpy's default method)."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q} outside 0..100")
    data = sorted(_finite(values))
    if not data:
        return None
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summarize(values: Sequence[float]) -> dict[str, float | int | None]:
    """median, mean, min, max, stdev, cv and n of a list of trial figures."""
    data = _finite(values)
    return {
        "n": len(data),
        "median": median(data),
        "mean": mean(data),
        "min": min(data) if data else None,
        "max": max(data) if data else None,
        "stdev": stdev(data),
        "cv": cv(data),
    }


def percentile_key(q: float) -> str:
    """50 -> "p50", 99.9 -> "p999": the key a percentile is reported under."""
    return "p" + f"{q:g}".replace(".", "")


def latency_summary(latencies: Sequence[float], points: Sequence[float] = (50.0, 90.0, 99.0)
                    ) -> dict[str, float | int | None]:
    """n, the percentiles ``points`` (keys as :func:`percentile_key`), min, max and mean."""
    data = sorted(_finite(latencies))
    return {
        "n": len(data),
        **{percentile_key(q): percentile(data, q) for q in points},
        "min": data[0] if data else None,
        "max": data[-1] if data else None,
        "mean": mean(data),
    }


# Where a CDF is sampled: the body in 5 % steps, the tail ever finer up to the maximum.
CDF_QUANTILES = (0.0, 0.01, 0.02, *(i / 20 for i in range(1, 20)), 0.97, 0.98, 0.99, 0.995,
                 0.998, 0.999, 1.0)


def cdf_points(values: Sequence[float], quantiles: Sequence[float] = CDF_QUANTILES,
               digits: int = 1) -> list[list[float]]:
    """A compact empirical CDF: [value, quantile] pairs, values rounded to ``digits``."""
    data = sorted(_finite(values))
    if not data:
        return []
    return [[round(percentile(data, 100.0 * q) or 0.0, digits), q] for q in quantiles]


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """Least-squares (slope, intercept) of y = slope x + intercept; None without two
    distinct x."""
    pairs = [(float(x), float(y)) for x, y in zip(xs, ys, strict=True)
             if x is not None and y is not None and math.isfinite(x) and math.isfinite(y)]
    if len({x for x, _ in pairs}) < 2:
        return None
    mx = math.fsum(x for x, _ in pairs) / len(pairs)
    my = math.fsum(y for _, y in pairs) / len(pairs)
    slope = (math.fsum((x - mx) * (y - my) for x, y in pairs)
             / math.fsum((x - mx) ** 2 for x, _ in pairs))
    return slope, my - slope * mx
def jain(values: Sequence[float]) -> float | None:
    """Jain's fairness index of non-negative shares; None for no data or all zeros."""
    data = _finite(values)
    if not data:
        return None
    if any(v < 0 for v in data):
        raise ValueError("Jain's index needs non-negative values")
    square_sum = math.fsum(v * v for v in data)
    if square_sum == 0:
        return None
    return math.fsum(data) ** 2 / (len(data) * square_sum)


def slowdown(solo_rate: float, shared_rate: float) -> float | None:
    """solo_rate / shared_rate; None when the copy made no progress."""
    if shared_rate <= 0 or solo_rate <= 0:
        return None
    return solo_rate / shared_rate


def normalized_progress(solo_rate: float, shared_rate: float, copies: int) -> float | None:
    """x = shared_rate / (solo_rate / copies): 1.0 when a copy gets exactly its 1/N share."""
    if solo_rate <= 0 or copies < 1:
        return None
    return shared_rate * copies / solo_rate


def aggregate_vs_solo(solo_rates: Sequence[float], shared_rates: Sequence[float]) -> float | None:
    """sum(shared_i / solo_i): the fraction of one solo GPU's work the N copies got together."""
    if len(solo_rates) != len(shared_rates) or not shared_rates:
        raise ValueError("need one solo rate per shared copy")
    if any(s <= 0 for s in solo_rates):
        return None
    return math.fsum(sh / so for so, sh in zip(solo_rates, shared_rates, strict=True))


def overhead(aggregate: float | None) -> float | None:
    """1 - aggregate_vs_solo: the share of the GPU lost to sharing."""
    return None if aggregate is None else 1.0 - aggregate


def progress_at(times: Sequence[float], t: float) -> float:
    """Launches completed by time t, interpolated linearly between completion timestamps.

    ``times`` are the sorted host times at which successive launches completed. Before the
    first completion the count is 0; after the last it stays at len(times). Interpolation
    removes most of the +-1 launch quantisation of a plain count over a window.
    """
    k = bisect_right(times, t)
    if k == 0:
        return 0.0
    if k == len(times):
        return float(k)
    prev, nxt = times[k - 1], times[k]
    frac = 0.0 if nxt <= prev else (t - prev) / (nxt - prev)
    return k + frac


def window_rate(times: Sequence[float], start: float, end: float, work: float) -> float | None:
    """Work per second completed inside [start, end] (None for an empty window)."""
    if end <= start:
        return None
    return (progress_at(times, end) - progress_at(times, start)) * work / (end - start)


def split_windows(start: float, end: float, parts: int) -> list[tuple[float, float]]:
    """[start, end] cut into ``parts`` equal consecutive windows (the trials of a run)."""
    if parts < 1 or end <= start:
        raise ValueError("need parts >= 1 and end > start")
    step = (end - start) / parts
    return [(start + i * step, start + (i + 1) * step) for i in range(parts)]
