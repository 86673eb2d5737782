"""Inline SVG figures of the measurements: kernel results against their bars, interference."""

from __future__ import annotations

import math
from collections.abc import Sequence

from conformance.report import fmt
from conformance.report.measure import Kernel, LatencyCurve, Series
from conformance.report.svg import (
    ACCENT,
    ACCENT_LIGHT,
    BAD,
    GOOD,
    GRID,
    INK,
    MUTED,
    REFERENCE,
    TRACK,
    Svg,
    nice_ticks,
    tick_label,
)
from conformance.report.tables import TIMES

_KERNEL_ROW = 64
_KERNEL_TOP = 44


def kernel_chart(kernels: Sequence[Kernel]) -> str | None:
    """A bullet chart: per kernel, the median (bar), min-max over trials (whisker), the bar.

    Each row has its own scale because kernels report different units (TB/s, TFLOP/s).
    """
    rows = [k for k in kernels if k.median is not None]
    if not rows:
        return None
    width, x0, x1 = 1000, 300, 840
    svg = Svg(width, _KERNEL_TOP + len(rows) * _KERNEL_ROW + 6,
              "Kernel results: median with min-max over trials against the bar")
    _kernel_legend(svg)
    for index, kernel in enumerate(rows):
        _kernel_row(svg, kernel, _KERNEL_TOP + index * _KERNEL_ROW, x0, x1)
    return svg.render()


def _kernel_legend(svg: Svg) -> None:
    y = 16
    svg.rect(0, y - 9, 14, 10, GOOD)
    svg.text(20, y, "median meets the bar", 11, fill=MUTED)
    svg.rect(160, y - 9, 14, 10, BAD)
    svg.text(180, y, "median below the bar", 11, fill=MUTED)
    svg.line(325, y - 4, 355, y - 4, INK, 1.5)
    svg.line(325, y - 9, 325, y + 1, INK, 1.5)
    svg.line(355, y - 9, 355, y + 1, INK, 1.5)
    svg.text(362, y, "min-max over trials", 11, fill=MUTED)
    svg.line(495, y - 11, 495, y + 3, REFERENCE, 2.5)
    svg.text(502, y, "bar (performance floor)", 11, fill=MUTED)


def _kernel_row(svg: Svg, k: Kernel, y: float, x0: float, x1: float) -> None:
    top = max(v for v in (k.median, k.high, k.bar) if v is not None) * 1.08
    ticks = nice_ticks(top)
    scale = ticks[-1] or 1.0

    def x(value: float) -> float:
        return x0 + (x1 - x0) * max(0.0, min(value, scale)) / scale

    svg.text(0, y + 18, k.label, 13, weight="600")
    svg.text(0, y + 35, " · ".join(p for p in (k.device, k.unit) if p), 11, fill=MUTED)
    svg.rect(x0, y + 6, x1 - x0, 26, TRACK)
    for tick in ticks:
        svg.line(x(tick), y + 6, x(tick), y + 32, GRID)
        svg.text(x(tick), y + 46, tick_label(tick, ticks), 10, "middle", MUTED)
    colour = ACCENT if k.met is None else (GOOD if k.met else BAD)
    assert k.median is not None
    svg.rect(x0, y + 11, x(k.median) - x0, 16, colour)
    if k.low is not None and k.high is not None:
        svg.line(x(k.low), y + 19, x(k.high), y + 19, INK, 1.5)
        for end in (k.low, k.high):
            svg.line(x(end), y + 13, x(end), y + 25, INK, 1.5)
    if k.bar is not None:
        svg.line(x(k.bar), y + 2, x(k.bar), y + 36, REFERENCE, 2.5)
    svg.text(x1 + 16, y + 18, fmt.number(k.median, k.unit), 13, weight="600")
    if k.bar is not None:
        state = "" if k.met is None else (" · meets" if k.met else " · below")
        svg.text(x1 + 16, y + 35, f"bar {fmt.number(k.bar)}{state}", 11,
                 fill=MUTED if k.met is None else (GOOD if k.met else BAD))


def interference_chart(series: Series) -> str | None:
    """Two panels per experiment: per-copy slowdown against the fair share N, and the
    aggregate throughput of N copies relative to one copy alone, with the Jain index."""
    points = [p for p in series.points if p.copies > 0]
    if not points:
        return None
    svg = Svg(1000, 310, f"Interference {series.title}: per-copy slowdown and aggregate vs solo")
    _slowdown_panel(svg, series, 56, 460)
    _aggregate_panel(svg, series, 566, 970)
    return svg.render()


_PLOT_TOP, _PLOT_BOTTOM = 44, 240


def _axis(svg: Svg, x0: float, x1: float, ticks: list[float], title: str) -> None:
    svg.text(x0 - 44, 18, title, 13, weight="600")
    for tick in ticks:
        y = _y(tick, ticks[-1])
        svg.line(x0, y, x1, y, GRID)
        svg.text(x0 - 8, y + 4, tick_label(tick, ticks), 10, "end", MUTED)
    svg.line(x0, _PLOT_BOTTOM, x1, _PLOT_BOTTOM, MUTED)


def _y(value: float, scale: float) -> float:
    scale = scale or 1.0
    return _PLOT_BOTTOM - (_PLOT_BOTTOM - _PLOT_TOP) * max(0.0, min(value, scale)) / scale


def _bands(x0: float, x1: float, n: int) -> list[tuple[float, float]]:
    """(centre, width) of n equal category bands."""
    width = (x1 - x0) / n
    return [(x0 + width * (i + 0.5), width) for i in range(n)]


def _slowdown_panel(svg: Svg, series: Series, x0: float, x1: float) -> None:
    points = [p for p in series.points if p.copies > 0]
    top = max([p.copies for p in points] + [v for p in points for v in p.slowdown]) * 1.1
    ticks = nice_ticks(top)
    _axis(svg, x0, x1, ticks, f"Per-copy slowdown vs solo ({TIMES})")
    for point, (cx, band) in zip(points, _bands(x0, x1, len(points)), strict=True):
        y_fair = _y(point.copies, ticks[-1])
        svg.line(cx - band * 0.3, y_fair, cx + band * 0.3, y_fair, REFERENCE, 2, "5 3")
        count = len(point.slowdown)
        for i, value in enumerate(point.slowdown):
            offset = (i - (count - 1) / 2) * min(10.0, band * 0.4 / max(count, 1))
            svg.circle(cx + offset, _y(value, ticks[-1]), 4, ACCENT, stroke="#ffffff",
                       stroke_width=1)
        svg.text(cx, _PLOT_BOTTOM + 18, f"N = {point.copies}", 11, "middle")
    svg.line(x0, 296, x0 + 24, 296, REFERENCE, 2, "5 3")
    svg.text(x0 + 30, 300, f"fair share (N{TIMES})", 11, fill=MUTED)
    svg.circle(x0 + 150, 296, 4, ACCENT)
    svg.text(x0 + 160, 300, "one copy", 11, fill=MUTED)


def _aggregate_threshold(series: Series) -> float | None:
    """The lowest acceptable aggregate vs solo: ``min_aggregate*`` or 1 - ``max_overhead``."""
    for key, value in series.thresholds.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        key = str(key).lower()
        if "aggregate" in key:
            return float(value)
        if key == "max_overhead":
            return 1.0 - float(value)
    return None


def _aggregate_panel(svg: Svg, series: Series, x0: float, x1: float) -> None:
    points = [p for p in series.points if p.copies > 0]
    values = [p.aggregate_vs_solo for p in points if p.aggregate_vs_solo is not None]
    threshold = _aggregate_threshold(series)
    ticks = nice_ticks(max([1.0, *values]) * 1.15)
    _axis(svg, x0, x1, ticks, "Aggregate throughput vs solo")
    for point, (cx, band) in zip(points, _bands(x0, x1, len(points)), strict=True):
        if point.aggregate_vs_solo is not None:
            y = _y(point.aggregate_vs_solo, ticks[-1])
            colour = ACCENT if threshold is None or point.aggregate_vs_solo >= threshold else BAD
            svg.rect(cx - band * 0.22, y, band * 0.44, _PLOT_BOTTOM - y, colour)
            svg.text(cx, y - 6, f"{point.aggregate_vs_solo:.2f}", 11, "middle", weight="600")
        svg.text(cx, _PLOT_BOTTOM + 18, f"N = {point.copies}", 11, "middle")
        jain = "Jain —" if point.jain is None else f"Jain {point.jain:.3f}"
        svg.text(cx, _PLOT_BOTTOM + 33, jain, 10, "middle", MUTED)
    y_solo = _y(1.0, ticks[-1])
    svg.line(x0, y_solo, x1, y_solo, INK, 1, "2 3")
    svg.line(x0, 296, x0 + 24, 296, INK, 1, "2 3")
    svg.text(x0 + 30, 300, "one copy alone = 1.0", 11, fill=MUTED)
    if threshold is not None:
        y_t = _y(threshold, ticks[-1])
        svg.line(x0, y_t, x1, y_t, BAD, 1.5, "6 3")
        svg.line(x0 + 170, 296, x0 + 194, 296, BAD, 1.5, "6 3")
        svg.text(x0 + 200, 300, f"threshold {fmt.number(threshold)}", 11, fill=MUTED)


# One colour per sharing mode, darker with more sharers; dashed for MPS.
_MODE_COLOURS = {"solo": INK, "time-slicing": ACCENT, "mps": REFERENCE}


def latency_cdf_chart(curves: Sequence[LatencyCurve]) -> str | None:
    """The client's latency CDF in each setting (log-scaled latency, quantile 0..1)."""
    drawn = [c for c in curves if len(c.cdf) > 1]
    if not drawn:
        return None
    low = min(x for c in drawn for x, _q in c.cdf if x > 0)
    high = max(x for c in drawn for x, _q in c.cdf)
    lo, hi = math.log10(low), math.log10(max(high, low * 1.01))
    x0, x1, top, bottom = 70, 720, 30, 300
    svg = Svg(1000, 340, "Latency CDF of a small-kernel client, alone and beside sharers")

    def x(us: float) -> float:
        return x0 + (x1 - x0) * (math.log10(max(us, low)) - lo) / (hi - lo)

    def y(q: float) -> float:
        return bottom - (bottom - top) * q

    for q in (0.0, 0.5, 0.9, 0.99, 1.0):
        svg.line(x0, y(q), x1, y(q), GRID)
        svg.text(x0 - 8, y(q) + 4, f"{q:g}", 10, "end", MUTED)
    decade = 10 ** math.floor(lo)
    while decade <= 10 ** hi:
        if decade >= low:
            svg.line(x(decade), top, x(decade), bottom, GRID)
            svg.text(x(decade), bottom + 16, fmt.number(decade / 1000) + " ms", 10, "middle",
                     MUTED)
        decade *= 10
    svg.text(x0, 18, "quantile", 12, weight="600")
    for i, curve in enumerate(drawn):
        colour = _MODE_COLOURS.get(curve.mode, ACCENT_LIGHT)
        svg.polyline([(x(us), y(q)) for us, q in curve.cdf], colour, 2,
                     dash="5 3" if curve.mode == "mps" else None)
        svg.line(740, 40 + i * 20, 770, 40 + i * 20, colour, 2,
                 dash="5 3" if curve.mode == "mps" else None)
        svg.text(778, 44 + i * 20, curve.label, 11)
    return svg.render()
