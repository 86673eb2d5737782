"""Read measurements from results, tolerant of missing or differently shaped keys.

The kernel/interference/isolation objects are written by ``gpu_kernels`` (schema in
``gpu_kernels/README.md``); this module reads what it finds and derives what it can
(min/max from trials, slowdown from per-copy rates, aggregate from the solo run) so a
schema that gains or loses a field degrades a figure rather than breaking the report.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from conformance.report.model import as_list


def num(value: Any) -> float | None:
    """A float for a real number (not a bool, not NaN), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value)


def nums(value: Any, keys: tuple[str, ...] = ("value", "rate", "median")) -> list[float]:
    """Numbers from a list of numbers or of objects holding one under ``keys``."""
    out = []
    for item in as_list(value):
        if isinstance(item, Mapping):
            item = next((item[k] for k in keys if num(item.get(k)) is not None), None)
        if (n := num(item)) is not None:
            out.append(n)
    return out


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


@dataclass(frozen=True)
class Kernel:
    kind: str
    metric: str
    unit: str
    device: str
    median: float | None
    low: float | None
    high: float | None
    bar: float | None
    met: bool | None
    cv: float | None
    trials: int | None
    higher_is_better: bool = True
    bar_source: str = ""
    error: str = ""

    @property
    def label(self) -> str:
        return " · ".join(p for p in (self.kind, self.metric) if p) or "kernel"

    @property
    def key(self) -> str:
        return f"kernel {self.label}"


def higher_is_better(unit: str, declared: Any = None) -> bool:
    """Throughputs (…/s, FLOP, B/s) improve upwards; latencies and times improve downwards."""
    if isinstance(declared, bool):
        return declared
    unit = unit.strip().lower()
    return not (unit in {"s", "ms", "us", "µs", "ns", "seconds", "sec"} or unit.endswith("ms"))


def device_name(device: Any) -> str:
    """A device's name from an identity object ({"name", "uuid", ...}) or a plain string."""
    if isinstance(device, Mapping):
        name = device.get("name") or device.get("product") or device.get("uuid") or ""
        index = device.get("index")
        return f"{name} (GPU {index})" if name and index is not None else str(name)
    return "" if device is None else str(device)


def bar_of(bar: Any) -> tuple[float | None, str, str]:
    """(value, comparison, source) of a bar given as a number or as {"value", "op", ...}."""
    if isinstance(bar, Mapping):
        return num(bar.get("value")), str(bar.get("op") or ">="), str(bar.get("source") or "")
    return num(bar), ">=", ""


def kernels(measurements: Mapping[str, Any]) -> list[Kernel]:
    found = []
    for obj in as_list(measurements.get("kernels")):
        if not isinstance(obj, Mapping):
            continue
        values = next((nums(obj[k]) for k in ("trials", "values", "samples")
                       if isinstance(obj.get(k), list)), [])
        median = num(obj.get("median"))
        if median is None and values:
            median = statistics.median(values)
        low = num(obj.get("min"))
        high = num(obj.get("max"))
        if values:
            low = min(values) if low is None else low
            high = max(values) if high is None else high
        unit = str(obj.get("unit") or "")
        better_up = higher_is_better(unit, obj.get("higher_is_better"))
        bar, op, bar_source = bar_of(obj.get("bar"))
        met = obj.get("met") if isinstance(obj.get("met"), bool) else None
        if met is None and bar is not None and median is not None:
            met = median <= bar if op.startswith("<") else median >= bar
        trials = obj.get("trials")
        found.append(Kernel(
            kind=str(obj.get("kind") or ""), metric=str(obj.get("metric") or ""), unit=unit,
            device=device_name(obj.get("device")), median=median, low=low, high=high, bar=bar,
            met=met, cv=num(obj.get("cv")),
            trials=len(trials) if isinstance(trials, list) else (
                int(trials) if num(trials) is not None else None),
            higher_is_better=better_up, bar_source=bar_source,
            error=str(obj.get("error") or ""),
        ))
    return found


@dataclass(frozen=True)
class Point:
    """One interference measurement: N copies sharing the GPU."""

    copies: int
    per_copy: list[float]
    slowdown: list[float]
    aggregate_vs_solo: float | None
    jain: float | None
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    verdict: str | None


@dataclass
class Series:
    """Points of one experiment (kernel and sharing mode) at increasing N."""

    experiment: str
    kernel: str
    mode: str
    unit: str
    thresholds: dict[str, Any] = field(default_factory=dict)
    points: list[Point] = field(default_factory=list)

    @property
    def title(self) -> str:
        experiment = "" if self.experiment == "interference" else self.experiment
        return " · ".join(p for p in (experiment, self.kernel, self.mode) if p) or "interference"

    def key(self, copies: int, figure: str) -> str:
        return f"interference {self.title} N={copies} {figure}"


def _worst(value: Any) -> float | None:
    values = nums(value)
    return max(values) if values else None


def interference(measurements: Mapping[str, Any]) -> list[Series]:
    groups: dict[tuple[str, str, str], Series] = {}
    raw: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for obj in as_list(measurements.get("interference")):
        if not isinstance(obj, Mapping):
            continue
        key = (str(obj.get("experiment") or ""), str(obj.get("kernel") or obj.get("kind") or ""),
               str(obj.get("mode") or ""))
        if key not in groups:
            groups[key] = Series(*key, unit=str(obj.get("unit") or ""),
                                 thresholds=dict(obj.get("thresholds") or {}))
        raw.setdefault(key, []).append(obj)
    for key, series in groups.items():
        objs = raw[key]
        solo = next((_mean(nums(o.get("per_copy"))) for o in objs
                     if num(o.get("copies")) == 1), None)
        for obj in objs:
            series.points.append(_point(obj, solo))
        series.points.sort(key=lambda p: p.copies)
    return list(groups.values())


def _point(obj: Mapping[str, Any], solo: float | None) -> Point:
    per_copy = nums(obj.get("per_copy"))
    copies = int(num(obj.get("copies")) or len(per_copy) or 0)
    slowdown = nums(obj.get("slowdown"))
    if not slowdown and solo and per_copy:
        slowdown = [solo / rate for rate in per_copy if rate > 0]
    aggregate = num(obj.get("aggregate_vs_solo"))
    if aggregate is None and solo and per_copy:
        aggregate = sum(per_copy) / solo
    return Point(
        copies=copies, per_copy=per_copy, slowdown=slowdown, aggregate_vs_solo=aggregate,
        jain=num(obj.get("jain")), latency_p50_ms=_worst(obj.get("latency_p50_ms")),
        latency_p99_ms=_worst(obj.get("latency_p99_ms")),
        verdict=str(obj["verdict"]) if obj.get("verdict") is not None else None,
    )


@dataclass(frozen=True)
class Isolation:
    experiment: str
    mode: str  # what was isolated (memory, fault) or the sharing mode in older results
    sharing: str
    finding: str
    isolated: bool | None
    details: str

    @property
    def title(self) -> str:
        if self.experiment == "isolation" and self.mode:
            return f"{self.mode} isolation"
        return " · ".join(p for p in (self.experiment, self.mode) if p) or "isolation"


def _details(details: Any) -> str:
    if isinstance(details, Mapping):
        return "; ".join(f"{k}: {v}" for k, v in details.items() if v is not None)
    return "" if details is None else str(details)


def isolation(measurements: Mapping[str, Any]) -> list[Isolation]:
    found = []
    for obj in as_list(measurements.get("isolation")):
        if not isinstance(obj, Mapping):
            continue
        isolated = obj.get("isolated")
        found.append(Isolation(
            experiment=str(obj.get("experiment") or ""), mode=str(obj.get("mode") or ""),
            sharing=str(obj.get("sharing") or ""), finding=str(obj.get("finding") or ""),
            isolated=isolated if isinstance(isolated, bool) else None,
            details=_details(obj.get("details")),
        ))
    return found


KNOWN_FAMILIES = ("kernels", "interference", "isolation", "scheduling_latency", "tail_latency",
                  "pod_vs_process")


@dataclass(frozen=True)
class PodVsProcess:
    """Per N: N pods on one GPU against N processes in one pod (the control)."""

    kernel: str
    mode: str
    node: str
    copies: int
    unit: str
    pods: float | None
    processes: float | None
    ratio: float | None


def pod_vs_process(measurements: Mapping[str, Any]) -> list[PodVsProcess]:
    rows = []
    for obj in as_list(measurements.get("pod_vs_process")):
        if not isinstance(obj, Mapping) or obj.get("experiment", "interference") != "interference":
            continue  # SHARE-LAT-001's rows: latency_pod_vs_process
        for p in as_list(obj.get("points")):
            if isinstance(p, Mapping):
                rows.append(PodVsProcess(
                    str(obj.get("kernel") or ""), str(obj.get("mode") or ""),
                    str(obj.get("node") or ""), int(num(p.get("copies")) or 0),
                    str(p.get("unit") or ""), num(p.get("pod_aggregate")),
                    num(p.get("process_aggregate")), num(p.get("ratio"))))
    return rows


@dataclass(frozen=True)
class LatencyPodVsProcess:
    """Per S sharers: the latency client's percentiles with the sharers in pods against the
    same sharers as processes in one pod (SHARE-LAT-001's control), microseconds."""

    mode: str
    node: str
    sharers: int
    pods: dict[str, float | None]       # p50, p99, p999
    processes: dict[str, float | None]
    ratios: dict[str, float | None]


LATENCY_PERCENTILES = ("p50", "p99", "p999")


def latency_pod_vs_process(measurements: Mapping[str, Any]) -> list[LatencyPodVsProcess]:
    rows = []
    for obj in as_list(measurements.get("pod_vs_process")):
        if not isinstance(obj, Mapping) or obj.get("experiment") != "latency":
            continue
        for p in as_list(obj.get("points")):
            if isinstance(p, Mapping):
                rows.append(LatencyPodVsProcess(
                    str(obj.get("mode") or ""), str(obj.get("node") or ""),
                    int(num(p.get("sharers")) or 0),
                    {k: num(p.get(f"pod_{k}")) for k in LATENCY_PERCENTILES},
                    {k: num(p.get(f"process_{k}")) for k in LATENCY_PERCENTILES},
                    {k: num(p.get(f"{k}_ratio")) for k in LATENCY_PERCENTILES}))
    return rows


@dataclass
class LatencyCurve:
    """One setting of a tail-latency experiment: the client's latency distribution."""

    label: str  # "alone", "time-slicing, 2 sharers", "MPS, 4 sharers"
    mode: str
    sharers: int
    p50_us: float | None
    p99_us: float | None
    p999_us: float | None
    p99_slowdown: float | None
    cdf: list[tuple[float, float]] = field(default_factory=list)  # (latency us, quantile)


@dataclass
class TailLatency:
    title: str
    finding: str
    quantum_ms: float | None
    curves: list[LatencyCurve]


def tail_latency(measurements: Mapping[str, Any]) -> list[TailLatency]:
    """gpu_kernels ``latency`` results (family ``tail_latency``), one per experiment."""
    out = []
    for doc in as_list(measurements.get("tail_latency")):
        if not isinstance(doc, Mapping):
            continue
        curves = []
        for p in as_list(doc.get("points")):
            if not isinstance(p, Mapping):
                continue
            lat = p.get("latency_us") if isinstance(p.get("latency_us"), Mapping) else {}
            slow = p.get("slowdown") if isinstance(p.get("slowdown"), Mapping) else {}
            mode, sharers = str(p.get("mode") or "?"), int(num(p.get("sharers")) or 0)
            label = "alone" if mode == "solo" else (
                f"{'MPS' if mode == 'mps' else mode}, {sharers} sharer{'s' * (sharers != 1)}")
            cdf = [(float(x), float(q)) for x, q in as_list(p.get("cdf"))
                   if num(x) is not None and num(q) is not None]
            curves.append(LatencyCurve(label, mode, sharers, num(lat.get("p50")),
                                       num(lat.get("p99")), num(lat.get("p999")),
                                       num(slow.get("p99")), cdf))
        quantum = doc.get("quantum") if isinstance(doc.get("quantum"), Mapping) else {}
        out.append(TailLatency(str(doc.get("device") or "tail latency under sharing")
                               if isinstance(doc.get("device"), str) else
                               "tail latency under sharing", str(doc.get("finding") or ""),
                               num(quantum.get("ms")), curves))
    return out


def other_families(measurements: Mapping[str, Any]) -> dict[str, Any]:
    """Measurement families this report has no figure for (shown raw)."""
    return {k: v for k, v in measurements.items() if k not in KNOWN_FAMILIES and v}


def scheduling_latency(measurements: Mapping[str, Any]) -> dict[str, Any] | None:
    data = measurements.get("scheduling_latency")
    if not isinstance(data, Mapping):
        return None
    figures: dict[str, float | None] = {k: num(data.get(k)) for k in ("p50_s", "p99_s", "max_s")}
    samples = num(data.get("samples"))
    return {"samples": None if samples is None else int(samples), **figures}
