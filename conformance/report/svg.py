"""A few SVG primitives in pure Python: enough for bullet charts, bars and dot plots.

Everything is escaped here; callers pass plain text. The output is an inline ``<svg>``
element with a title for screen readers and no external references.
"""

from __future__ import annotations

import math
from html import escape

INK = "#1f2328"
MUTED = "#57606a"
GRID = "#d8dee4"
TRACK = "#eef1f4"
ACCENT = "#2f5d8a"
ACCENT_LIGHT = "#9db7d1"
GOOD = "#1a7f37"
BAD = "#c62828"
REFERENCE = "#6e4b00"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Liberation Sans', Arial, sans-serif"


def _n(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _attrs(attrs: dict[str, object]) -> str:
    return "".join(
        f' {key.rstrip("_").replace("_", "-")}="{escape(str(value), quote=True)}"'
        for key, value in attrs.items() if value is not None
    )


class Svg:
    """An SVG canvas that collects elements and renders them as one inline element."""

    def __init__(self, width: int, height: int, label: str) -> None:
        self.width, self.height, self.label = width, height, label
        self._parts: list[str] = []

    def rect(self, x: float, y: float, w: float, h: float, fill: str, **attrs: object) -> None:
        self._parts.append(
            f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(max(w, 0))}" height="{_n(max(h, 0))}"'
            f' fill="{fill}"{_attrs(attrs)}/>'
        )

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = INK,
             width: float = 1, dash: str | None = None) -> None:
        self._parts.append(
            f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" stroke="{stroke}"'
            f' stroke-width="{_n(width)}"{_attrs({"stroke_dasharray": dash})}/>'
        )

    def circle(self, cx: float, cy: float, r: float, fill: str, **attrs: object) -> None:
        self._parts.append(
            f'<circle cx="{_n(cx)}" cy="{_n(cy)}" r="{_n(r)}" fill="{fill}"{_attrs(attrs)}/>'
        )

    def text(self, x: float, y: float, content: str, size: float = 12, anchor: str = "start",
             fill: str = INK, weight: str | None = None) -> None:
        self._parts.append(
            f'<text x="{_n(x)}" y="{_n(y)}" font-size="{_n(size)}" text-anchor="{anchor}"'
            f' fill="{fill}"{_attrs({"font_weight": weight})}>{escape(content)}</text>'
        )

    def polyline(self, points: list[tuple[float, float]], stroke: str, width: float = 2,
                 dash: str | None = None) -> None:
        coords = " ".join(f"{_n(x)},{_n(y)}" for x, y in points)
        self._parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{stroke}"'
            f' stroke-width="{_n(width)}"{_attrs({"stroke_dasharray": dash})}/>'
        )

    def render(self) -> str:
        label = escape(self.label, quote=True)
        return (
            f'<svg class="chart" viewBox="0 0 {self.width} {self.height}" width="{self.width}"'
            f' height="{self.height}" role="img" aria-label="{label}"'
            f' font-family="{escape(FONT, quote=True)}"><title>{label}</title>'
            + "".join(self._parts) + "</svg>"
        )


def tick_label(value: float, ticks: list[float]) -> str:
    """A tick value with as many decimals as the tick step needs (0, 0.25, 0.5 ...)."""
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    decimals = 0
    while decimals < 6 and abs(step * 10**decimals - round(step * 10**decimals)) > 1e-9:
        decimals += 1
    return f"{value:,.{decimals}f}"


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 up to at least ``top`` (steps of 1, 2, 2.5 or 5 x 10^k)."""
    if not math.isfinite(top) or top <= 0:
        return [0.0, 1.0]
    raw = top / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    ticks = [0.0]
    while ticks[-1] < top - 1e-12:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks
