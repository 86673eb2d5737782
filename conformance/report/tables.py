"""The measurement tables as plain text (headers and rows), shared by HTML and Markdown."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from conformance.report import fmt
from conformance.report.measure import (
    LATENCY_PERCENTILES,
    Isolation,
    Kernel,
    LatencyPodVsProcess,
    PodVsProcess,
    Series,
)

DASH = "\u2013"  # en dash for ranges
TIMES = "\u00d7"  # multiplication sign for "N x slower"

Table = tuple[list[str], list[list[str]]]

KERNEL_HEADERS = ["Kernel", "Device", "Median", f"Min {DASH} max", "CV", "Trials", "Bar",
                  "Meets bar"]
KERNEL_MET_COLUMN = 7
INTERFERENCE_VERDICT_COLUMN = 7
ISOLATION_COLUMN = 2


def yes_no(flag: bool | None, yes: str = "yes", no: str = "no") -> str:
    return "—" if flag is None else (yes if flag else no)


def span(values: Sequence[float], show: Callable[[Any], str] = fmt.number) -> str:
    """"low to high" of some values, one value when they agree, a dash when there are none."""
    if not values:
        return "—"
    low, high = min(values), max(values)
    return show(low) if low == high else f"{show(low)} {DASH} {show(high)}"


def kernel_table(kernels: Sequence[Kernel]) -> Table:
    rows = []
    for k in kernels:
        bar = fmt.number(k.bar, k.unit) if k.bar is not None else "—"
        if k.bar is not None and k.bar_source:
            bar += f" ({k.bar_source})"
        low_high = [v for v in (k.low, k.high) if v is not None]
        rows.append([
            k.label, fmt.text(k.device),
            f"error: {k.error}" if k.error else fmt.number(k.median, k.unit),
            span(low_high) if len(low_high) == 2 else "—",
            fmt.percent(k.cv), fmt.text(k.trials), bar, yes_no(k.met),
        ])
    return KERNEL_HEADERS, rows


def interference_table(series: Series) -> Table:
    unit = f" ({series.unit})" if series.unit else ""
    headers = ["N copies", f"Per-copy rate{unit}", f"Slowdown ({TIMES})", "Aggregate vs solo",
               "Jain index", "p50 latency (ms)", "p99 latency (ms)", "Verdict"]
    rows = [
        [str(p.copies), span(p.per_copy), span(p.slowdown, lambda v: fmt.ratio(v, 2)),
         fmt.ratio(p.aggregate_vs_solo), fmt.ratio(p.jain), fmt.number(p.latency_p50_ms),
         fmt.number(p.latency_p99_ms), p.verdict or "—"]
        for p in series.points
    ]
    return headers, rows


def thresholds(series: Series) -> str:
    return "; ".join(f"{k} {v}" for k, v in series.thresholds.items())


def pod_vs_process_table(rows: Sequence[PodVsProcess]) -> Table:
    return (["Kernel", "Pods", "Node", "N", "Pods' aggregate", "Processes' aggregate",
             "Pods / processes"],
            [[r.kernel, r.mode, r.node, str(r.copies),
              f"{fmt.number(r.pods)} {r.unit}".strip(),
              f"{fmt.number(r.processes)} {r.unit}".strip(), fmt.ratio(r.ratio, 3)]
             for r in rows])


def latency_pod_vs_process_table(rows: Sequence[LatencyPodVsProcess]) -> Table:
    """Per S: each percentile as pods / processes in ms, and the ratio."""
    def cell(r: LatencyPodVsProcess, k: str) -> str:
        ms = [None if v is None else v / 1000 for v in (r.pods[k], r.processes[k])]
        return (f"{fmt.number(ms[0])} / {fmt.number(ms[1])} ms "
                f"({fmt.ratio(r.ratios[k], 3)})")
    return (["Pods", "Node", "S", "p50 pods / processes", "p99 pods / processes",
             "p99.9 pods / processes"],
            [[r.mode, r.node, str(r.sharers), *(cell(r, k) for k in LATENCY_PERCENTILES)]
             for r in rows])


def isolation_table(findings: Sequence[Isolation]) -> Table:
    rows = [[f.title, fmt.text(f.sharing), yes_no(f.isolated, "isolated", "not isolated"),
             f.finding, f.details] for f in findings]
    return ["Experiment", "Sharing", "Isolation", "Finding", "Details"], rows


def latency_table(latency: Mapping[str, Any]) -> Table:
    return (["Samples", "p50 (s)", "p99 (s)", "max (s)"],
            [[fmt.text(latency.get("samples")),
              *(fmt.number(latency.get(k)) for k in ("p50_s", "p99_s", "max_s"))]])


def tail_latency_table(curves) -> Table:
    """p50/p99/p99.9 of the client per setting, and its p99 slowdown against running alone."""
    rows = [[c.label, *(fmt.number(None if v is None else v / 1000) for v in
                        (c.p50_us, c.p99_us, c.p999_us)),
             fmt.ratio(c.p99_slowdown) if c.p99_slowdown is not None else "—"] for c in curves]
    return ["Setting", "p50 (ms)", "p99 (ms)", "p99.9 (ms)", f"p99 slowdown ({TIMES})"], rows
