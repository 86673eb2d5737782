"""Result objects of the CLI (schema in README.md), built from plain numbers. No GPU needed."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gpu_kernels import datasheets, stats

SCHEMA = "gpu_kernels.result"
SCHEMA_VERSION = 1

DEFAULT_MAX_CV = 0.02  # perf.md §5: flag solo microbenchmarks above about 2 %

EXIT_OK = 0
EXIT_FAILED = 1  # a correctness check or a threshold (bar, verdict) failed
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3  # no CuPy, no GPU or no NVML: the check could not run


def resolve_bar(key: str, unit: str, device_name: str | None, override: float | None = None,
                disabled: bool = False) -> dict[str, Any] | None:
    """The bar a median must reach: --bar, else the GPU's default, else none.

    ``key`` is the workload's bar key: its kind, or "gemm-fp64" for DGEMM. The default is the
    datasheet rule of :mod:`gpu_kernels.datasheets` for the GPU named ``device_name``."""
    if disabled:
        return None
    if override is not None:
        return {"value": float(override), "op": ">=", "unit": unit, "source": "--bar"}
    sheet = datasheets.lookup(device_name)
    value = sheet.bar(key) if sheet else None
    if sheet is None or value is None:
        return None
    return {"value": value, "op": ">=", "unit": unit, "source": f"default for {sheet.model}"}


def resolve_peak(key: str, unit: str, device_name: str | None) -> dict[str, Any] | None:
    """The datasheet peak of the GPU named ``device_name`` for ``key``, or None."""
    sheet = datasheets.lookup(device_name)
    value = sheet.peak(key) if sheet else None
    if sheet is None or value is None:
        return None
    return {"value": value, "unit": unit, "source": f"{sheet.model} datasheet"}


def bar_met(bar: Mapping[str, Any] | None, median: float | None) -> bool | None:
    if bar is None:
        return None
    return median is not None and median >= float(bar["value"])


def header(kind: str) -> dict[str, Any]:
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "kind": kind,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def kernel_result(
    *,
    kind: str,
    metric: str,
    unit: str,
    trial_rates: Sequence[float],
    trial_seconds: Sequence[float],
    trial_launches: Sequence[int],
    latencies_ms: Sequence[float],
    work_per_launch: float,
    work_unit: str,
    correctness: Mapping[str, Any],
    device: Mapping[str, Any],
    config: Mapping[str, Any],
    warmup: Mapping[str, Any],
    samples: Sequence[Mapping[str, Any]] = (),
    bar: Mapping[str, Any] | None = None,
    max_cv: float = DEFAULT_MAX_CV,
    peak: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One timed kernel's result: per-trial figures, their statistics, check, bar, device."""
    summary = stats.summarize(trial_rates)
    median = summary["median"]
    met = bar_met(bar, summary["median"])
    correct = bool(correctness.get("ok"))
    ok = correct and met is not False
    result = header(kind)
    result.update({
        "metric": metric,
        "unit": unit,
        **{k: summary[k] for k in ("median", "mean", "min", "max", "stdev", "cv")},
        "trials": [float(r) for r in trial_rates],
        "trial_seconds": [float(s) for s in trial_seconds],
        "trial_launches": [int(n) for n in trial_launches],
        "latency_ms": stats.latency_summary(latencies_ms),
        "work_per_launch": work_per_launch,
        "work_unit": work_unit,
        "warmup": dict(warmup),
        "config": dict(config),
        "correctness": dict(correctness),
        "stability": {"max_cv": max_cv,
                      "ok": summary["cv"] is not None and summary["cv"] <= max_cv},
        "bar": dict(bar) if bar is not None else None,
        "met": met,
        "peak": dict(peak) if peak is not None else None,
        "peak_ratio": (median / float(peak["value"])
                       if peak is not None and median is not None else None),
        "device": dict(device),
        "samples": [dict(s) for s in samples],
        "ok": ok,
        "exit_code": EXIT_OK if ok else EXIT_FAILED,
    })
    return result


def error_result(kind: str, error: str, exit_code: int = EXIT_UNAVAILABLE,
                 **extra: Any) -> dict[str, Any]:
    """A result for a run that could not measure anything (no CuPy, no GPU, a crash)."""
    result = header(kind)
    result.update({"ok": False, "error": error, "exit_code": exit_code, **extra})
    return result


def _clean(value: Any) -> Any:
    """JSON-safe copy: NaN and infinities become null (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def dumps(result: Mapping[str, Any]) -> str:
    """One line of strict JSON."""
    return json.dumps(_clean(result), separators=(",", ":"), allow_nan=False)
