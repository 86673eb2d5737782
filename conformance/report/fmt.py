"""Number and text formatting shared by every renderer, so figures read the same everywhere."""

from __future__ import annotations

import math
from typing import Any


def number(value: Any, unit: str = "") -> str:
    """A measured value with sensible precision: 4.09, 48.5, 646, 0.932."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "—" if value is None else str(value)
    magnitude = abs(value)
    if magnitude >= 100 or float(value).is_integer():
        text = f"{value:,.0f}"
    elif magnitude >= 10:
        text = f"{value:.1f}"
    elif magnitude >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3f}"
    return f"{text} {unit}".strip()


def ratio(value: Any, decimals: int = 3) -> str:
    """A dimensionless ratio (aggregate vs solo, Jain index, slowdown) at fixed precision."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "—"
    return f"{value:.{decimals}f}"


def percent(fraction: Any, signed: bool = False) -> str:
    if not isinstance(fraction, int | float) or isinstance(fraction, bool):
        return "—"
    return f"{fraction * 100:+.1f} %" if signed else f"{fraction * 100:.1f} %"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def listing(values: Any, empty: str = "—") -> str:
    """Comma-joined values; a single value as is; None or [] as ``empty``."""
    if values is None or values == []:
        return empty
    if isinstance(values, list | tuple):
        return ", ".join(str(v) for v in values)
    return str(values)


def text(value: Any, empty: str = "—") -> str:
    return empty if value is None or value == "" else str(value)


_CAUSE_PREFIXES = ("likely broken:", "likely cause:", "suspect:")


def cause(diagnosis: str | None) -> str:
    """A diagnosis without a leading "Likely broken:" (the renderers add their own label)."""
    text = (diagnosis or "").strip()
    for prefix in _CAUSE_PREFIXES:
        if text.lower().startswith(prefix):
            return text[len(prefix):].strip()
    return text
