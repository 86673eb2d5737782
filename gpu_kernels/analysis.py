"""From what the copies logged to the figures and findings of the sharing experiments. Pure.

Inputs are the workers' "result" messages (completion ``times``, ``latencies_ms``,
``work_per_launch``, ``scale``, ``unit``, ``correctness``, ``error``) and the host-clock
windows the parent set, so every function here runs on fabricated numbers in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from gpu_kernels import stats

GIB = 2**30


@dataclass(frozen=True)
class Thresholds:
    """When a shared run passes: sharing overhead, fairness; CV only flags instability."""

    max_overhead: float = 0.15
    min_jain: float = 0.90
    max_cv: float = 0.05

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def rate(result: Mapping[str, Any], start: float, end: float) -> float:
    """A copy's rate (in its unit) over [start, end]; 0 when it completed nothing."""
    value = stats.window_rate(result.get("times") or [], start, end, result["work_per_launch"])
    return 0.0 if value is None else value / result["scale"]


def copy_figures(result: Mapping[str, Any], start: float, end: float,
                 trials: int) -> dict[str, Any]:
    """One copy over the measured window: rate, per-trial rates, CV, latencies, check."""
    times = result.get("times") or []
    trial_rates = [rate(result, a, b) for a, b in stats.split_windows(start, end, trials)]
    inside = [lat for t, lat in zip(times, result.get("latencies_ms") or [], strict=False)
              if start <= t <= end]
    lat = stats.latency_summary(inside)
    return {
        "kernel": result.get("kind"),
        "pid": result.get("pid"),
        "rate": rate(result, start, end),
        "unit": result.get("unit"),
        "trials": trial_rates,
        "cv": stats.cv(trial_rates),
        "launches": lat["n"],
        "latency_p50_ms": lat["p50"],
        "latency_p99_ms": lat["p99"],
        "latency_max_ms": lat["max"],
        "work_per_launch": result.get("work_per_launch"),
        "correct": bool((result.get("correctness") or {}).get("ok")),
        "error": result.get("error"),
    }


def judge(copies: int, aggregate: float | None, jain: float | None,
          per_copy: Sequence[Mapping[str, Any]], limits: Thresholds) -> tuple[str, list[str]]:
    """pass/fail of one shared run (N=1 is the baseline: only its check can fail it)."""
    reasons = [f"copy {i}: {c['error'] or 'result check failed'}"
               for i, c in enumerate(per_copy) if c.get("error") or not c.get("correct")]
    if copies > 1:
        lost = stats.overhead(aggregate)
        if lost is None or lost > limits.max_overhead:
            reasons.append(f"sharing overhead {_pct(lost)} > {_pct(limits.max_overhead)}")
        if jain is None or jain < limits.min_jain:
            reasons.append(f"Jain index {_num(jain)} < {limits.min_jain}")
    if reasons:
        return "fail", reasons
    return ("baseline" if copies == 1 else "pass"), []


def point(*, experiment: str, kernel: str, mode: str, per_copy: list[dict[str, Any]],
          solo_rates: Sequence[float], limits: Thresholds) -> dict[str, Any]:
    """One interference point: N copies' figures against their solo rates."""
    n = len(per_copy)
    rates = [c["rate"] for c in per_copy]
    slowdowns = [stats.slowdown(s, r) for s, r in zip(solo_rates, rates, strict=True)]
    progress = [stats.normalized_progress(s, r, n) for s, r in zip(solo_rates, rates,
                                                                     strict=True)]
    for c, sd, x in zip(per_copy, slowdowns, progress, strict=True):
        c["slowdown"], c["progress"] = sd, x
    aggregate = stats.aggregate_vs_solo(solo_rates, rates)
    jain = stats.jain([x or 0.0 for x in progress])
    verdict, reasons = judge(n, aggregate, jain, per_copy, limits)
    sizes = {(c.get("kernel"), c.get("work_per_launch")) for c in per_copy}
    if len(sizes) > len({c.get("kernel") for c in per_copy}):
        verdict = "fail"
        reasons.append("copies of one kernel did different work per launch: not comparable")
    cvs = [c["cv"] for c in per_copy if c["cv"] is not None]
    units = {c["unit"] for c in per_copy}
    return {
        "experiment": experiment,
        "kernel": kernel,
        "mode": mode,
        "unit": units.pop() if len(units) == 1 else "mixed",
        "copies": n,
        "per_copy": per_copy,
        "solo_rates": list(solo_rates),
        "slowdown": slowdowns,
        "normalized_progress": progress,
        "aggregate_vs_solo": aggregate,
        "overhead": stats.overhead(aggregate),
        "jain": jain,
        "latency_p50_ms": [c["latency_p50_ms"] for c in per_copy],
        "latency_p99_ms": [c["latency_p99_ms"] for c in per_copy],
        "cv_max": max(cvs) if cvs else None,
        "stable": bool(cvs) and max(cvs) <= limits.max_cv,
        "verdict": verdict,
        "reasons": reasons,
        "thresholds": limits.as_dict(),
    }


def _aggregate(point: Mapping[str, Any]) -> float | None:
    copies = point.get("per_copy")
    return sum(c["rate"] for c in copies) if copies else None


def _percentile(key: str) -> Callable[[Mapping[str, Any]], float | None]:
    return lambda point: (point.get("latency_us") or {}).get(key)


@dataclass(frozen=True)
class Compared:
    """What :func:`pod_vs_process` compares: the key that pairs a pod point with its process
    point (the N), each figure by name with the key of its pods/processes ratio (None: shown
    side by side, no ratio), and the unit where the points do not carry one."""

    by: str
    figures: tuple[tuple[str, Callable[[Mapping[str, Any]], float | None], str | None], ...]
    unit: str | None = None


INTERFERENCE = Compared("copies", (("aggregate", _aggregate, "ratio"),
                                   ("jain", lambda p: p.get("jain"), None)))
LATENCY = Compared("sharers", tuple((k, _percentile(k), f"{k}_ratio")
                                    for k in ("p50", "p99", "p999")), unit="us")


def pod_vs_process(pod_points: Sequence[Mapping[str, Any]],
                   proc_points: Sequence[Mapping[str, Any]],
                   compared: Compared = INTERFERENCE) -> list[dict[str, Any]]:
    """Per N: each figure of the pods, the processes' (the control) and their ratio; an N whose
    first figure is missing on either side has no row (the first process point of an N
    counts)."""
    by_n: dict[Any, Mapping[str, Any]] = {}
    for q in proc_points:
        by_n.setdefault(q.get(compared.by), q)
    out = []
    for p in pod_points:
        q = by_n.get(p.get(compared.by))
        first = compared.figures[0][1]
        if q is None or first(p) is None or first(q) is None:
            continue
        row: dict[str, Any] = {compared.by: p[compared.by],
                               "unit": p.get("unit") or compared.unit}
        for name, figure, ratio in compared.figures:
            pod, proc = figure(p), figure(q)
            row.update({f"pod_{name}": pod, f"process_{name}": proc})
            if ratio:
                row[ratio] = pod / proc if pod is not None and proc else None
        out.append(row)
    return out


def memory_finding(mode: str, hog: Mapping[str, Any], probe_ready: Mapping[str, Any] | None,
                   big: Mapping[str, Any] | None, small: Mapping[str, Any] | None,
                   after_release: Mapping[str, Any] | None,
                   probe_error: str | None = None,
                   gpu_total_bytes: int | None = None,
                   own_share_bytes: int | None = None,
                   beyond_share: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What one copy holding most memory did to another copy's allocations.

    ``gpu_total_bytes`` is the GPU's memory as NVML reports it: where a copy's CUDA sees a
    smaller total, the finding says so first. ``own_share_bytes`` is what the other copy saw
    free before the holder started: under MPS with a per-client pinned memory limit that is
    the limit (less the copy's context) while the total stays the GPU's, as the H100 showed;
    ``beyond_share`` is its attempt 1 GiB past that share, which fails where the limit holds.
    A request that fails again once the holder is gone failed on the copy's own share, not on
    the holder: the finding is then inconclusive (isolated None), never "no isolation".
    """
    details: dict[str, Any] = {
        "sharing": mode,
        "holder_requested_gib": _gib(hog.get("requested_bytes")),
        "holder_held_gib": _gib(hog.get("held_bytes")),
        "holder_fraction_of_free": hog.get("fraction"),
        "total_gib": _gib(hog.get("total_bytes")),
        "holder_error": hog.get("error"),
        "other_saw_free_alone_gib": _gib(own_share_bytes),
        "other_saw_free_gib": _gib((big or {}).get("free_seen_bytes")),
        "other_requested_gib": _gib((big or {}).get("requested_bytes")),
        "other_allocation": _outcome(big),
        "other_1gib_allocation": _outcome(small),
        "other_allocation_after_holder_exit": _outcome(after_release),
        "other_beyond_share_requested_gib": _gib((beyond_share or {}).get("requested_bytes")),
        "other_beyond_share_allocation": _outcome(beyond_share),
        "other_start_error": probe_error,
        "gpu_total_gib": _gib(gpu_total_bytes),
    }
    who = (f"Under {mode}" + _limited_view(hog.get("total_bytes"), gpu_total_bytes)
           + _share_view(mode, own_share_bytes, gpu_total_bytes))
    held = f"{details['holder_held_gib']} GiB"
    isolated: bool | None
    if not hog.get("succeeded"):
        finding = (f"{who}, one copy could not take {_pct(hog.get('fraction'))} of free memory "
                   f"(got {held}: {hog.get('error')}): a per-copy memory limit is in effect")
        isolated = True
    elif probe_ready is None:
        finding = (f"{who}, while one copy held {held} another copy could not even start: "
                   f"{probe_error}. No memory isolation.")
        isolated = False
    elif big is not None and not big.get("succeeded") and after_release is not None \
            and not after_release.get("succeeded"):
        finding = (f"{who}, another copy's request for {details['other_requested_gib']} GiB "
                   f"failed while one copy held {held} ({_short(big.get('error'))}) and failed "
                   f"again after the holder exited: the request is above what that copy may "
                   f"take on its own, so this run says nothing about isolation.")
        isolated = None
    elif big is not None and not big.get("succeeded"):
        finding = (f"{who}, while one copy held {held} of {details['total_gib']} GiB, another "
                   f"copy's request for {details['other_requested_gib']} GiB failed "
                   f"({_short(big.get('error'))}); it saw {details['other_saw_free_gib']} GiB "
                   f"free, a 1 GiB request {_outcome(small)}, and after the holder exited the "
                   f"same request {_outcome(after_release)}. No memory isolation: memory goes "
                   "to whoever allocates first.")
        isolated = False
    else:
        finding = (f"{who}, another copy still got {details['other_requested_gib']} GiB while "
                   f"one copy held {held}: memory was not exhausted or is partitioned"
                   + _beyond_share_clause(details, beyond_share))
        isolated = True
    return {"experiment": "isolation", "mode": "memory", "requirement": "SHARE-ISO-001",
            "sharing": mode, "finding": finding, "isolated": isolated, "details": details}


def _share_view(mode: str, own_share: int | None, gpu_total_bytes: int | None) -> str:
    """", where a copy on its own sees N GiB free of the GPU's M GiB" for a share's view."""
    if not own_share or not gpu_total_bytes or own_share >= 0.9 * gpu_total_bytes:
        return ""
    why = " (a per-client memory limit)" if mode == "mps" else ""
    return (f", where a copy on its own sees {_gib(own_share)} GiB free of the GPU's "
            f"{_gib(gpu_total_bytes)} GiB{why}")


def _beyond_share_clause(details: Mapping[str, Any],
                         beyond_share: Mapping[str, Any] | None) -> str:
    if beyond_share is None:
        return ""
    asked = (f"; its request for {details['other_beyond_share_requested_gib']} GiB, 1 GiB "
             "beyond its own share, ")
    if beyond_share.get("succeeded"):
        return asked + "succeeded: that share is not a limit"
    return asked + f"failed ({_short(beyond_share.get('error'))}): the limit is enforced"


def _limited_view(seen_bytes: int | None, gpu_total_bytes: int | None) -> str:
    """", where each copy sees N GiB of the GPU's M GiB" when a copy sees less than the GPU."""
    if not seen_bytes or not gpu_total_bytes or seen_bytes >= 0.98 * gpu_total_bytes:
        return ""
    return (f", where each copy sees {_gib(seen_bytes)} GiB of the GPU's "
            f"{_gib(gpu_total_bytes)} GiB (a per-client memory limit)")


def fault_phases(t0: float, t_fault: float, t_faulter_exit: float, t_end: float,
                 settle: float = 0.5) -> dict[str, tuple[float, float]]:
    """before: until the fault; during: the fault until ``settle`` after the faulter exited."""
    during_end = min(t_faulter_exit + settle, t_end)
    return {"before": (t0, t_fault), "during": (t_fault, during_end),
            "after": (during_end, t_end)}


def fault_finding(mode: str, victim: Mapping[str, Any] | None, victim_error: str | None,
                  faulter: Mapping[str, Any] | None,
                  phases: Mapping[str, tuple[float, float]],
                  rates: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Did the copy that did not fault keep running, at what speed, with right results?

    ``rates`` (before, during, after) where the victim measured them itself (a pod, whose
    completion times stay in it), else they come from its completions over ``phases``."""
    if rates is None:
        rates = {name: (rate(victim, *window) if victim else 0.0) for name, window in
                 phases.items()}
    before = rates["before"]
    err = victim_error or (victim or {}).get("error")
    correct = bool(((victim or {}).get("correctness") or {}).get("ok"))
    survived = err is None and victim is not None and rates["after"] > 0
    details = {
        "sharing": mode,
        "faulter_error": _short((faulter or {}).get("error")) or "no error raised",
        "faulter_illegal_address": (faulter or {}).get("illegal_address"),
        "other_survived": survived,
        "other_error": _short(err),
        "other_rate_before": before,
        "other_rate_during": rates["during"],
        "other_rate_after": rates["after"],
        "unit": (victim or {}).get("unit"),
        "during_vs_before": _ratio(rates["during"], before),
        "after_vs_before": _ratio(rates["after"], before),
        "other_results_correct": correct if err is None else None,
    }
    unit = details["unit"] or ""
    who = f"Under {mode}"
    if survived:
        speed = details["after_vs_before"]
        finding = (f"{who}, one copy's illegal address ({details['faulter_error']}) did not stop "
                   f"the other: it ran at {before:.3g} {unit} before, {rates['during']:.3g} "
                   f"during and {rates['after']:.3g} after (after/before {_num(speed)}), and its "
                   f"results checked {'correct' if correct else 'WRONG'}.")
        isolated: bool | None = correct and speed is not None and speed >= 0.9
    else:
        finding = (f"{who}, one copy's illegal address ({details['faulter_error']}) also ended "
                   f"the other copy: {details['other_error'] or 'it stopped making progress'}. "
                   "No fault isolation.")
        isolated = False
    return {"experiment": "isolation", "mode": "fault", "requirement": "SHARE-ISO-002",
            "sharing": mode, "finding": finding, "isolated": isolated, "details": details}


# --- tail latency of a client beside sharers ------------------------------------------------

LATENCY_POINTS = (50.0, 90.0, 99.0, 99.9)
MIN_FOR_P999 = 1000  # requests below which the p99.9 is one of the last few samples


def client_latency(client: Mapping[str, Any], start: float, end: float) -> dict[str, Any]:
    """The client's requests submitted inside [start, end]: how many, percentiles (us), a
    CDF, its check (computed where the completion times are: the worker's parent, or the pod
    itself, gpu_kernels.podcopy)."""
    lat_us = [lat * 1000.0 for t, lat in zip(client.get("times") or [],
                                             client.get("latencies_ms") or [], strict=False)
              if start <= t <= end]
    summary = {k: round(v, 1) if isinstance(v, float) else v
               for k, v in stats.latency_summary(lat_us, LATENCY_POINTS).items()}
    return {
        "n": summary["n"],
        "latency_us": summary,
        "p999_reliable": summary["n"] >= MIN_FOR_P999,
        "cdf": stats.cdf_points(lat_us),
        "client_correct": bool((client.get("correctness") or {}).get("ok")),
        "client_error": client.get("error"),
    }


def latency_point(*, mode: str, sharers: int, client: Mapping[str, Any], start: float,
                  end: float, sharer_figures: Sequence[Mapping[str, Any]] = ()
                  ) -> dict[str, Any]:
    """The client's requests submitted inside [start, end] beside ``sharers``."""
    return latency_point_of(mode, sharers, client_latency(client, start, end), sharer_figures)


def latency_point_of(mode: str, sharers: int, latency: Mapping[str, Any],
                     sharer_figures: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A point from the client's :func:`client_latency` and the sharers' figures."""
    rates = [f["rate"] for f in sharer_figures]
    return {
        "mode": mode,
        "sharers": sharers,
        **latency,
        "sharer_kernel": sharer_figures[0]["kernel"] if sharer_figures else None,
        "sharer_unit": sharer_figures[0]["unit"] if sharer_figures else None,
        "sharer_rates": rates,
        "sharer_aggregate": sum(rates) if rates else None,
        "sharers_correct": all(f["correct"] and not f["error"] for f in sharer_figures),
    }


def _ratio_or_none(a: Any, b: Any) -> float | None:
    return a / b if a is not None and b else None


def with_slowdowns(point: dict[str, Any], solo: Mapping[str, Any]) -> dict[str, Any]:
    """``point`` with its percentiles over the solo run's, and for time-slicing the slice
    length one sharer adds to the p99: (p99 - solo p50) / sharers, in ms."""
    lat, base = point.get("latency_us") or {}, solo.get("latency_us") or {}
    point["slowdown"] = {k: _ratio_or_none(lat.get(k), base.get(k))
                         for k in ("p50", "p99", "p999")}
    extra = (None if lat.get("p99") is None or base.get("p50") is None or not point["sharers"]
             else (lat["p99"] - base["p50"]) / 1000.0)
    point["p99_added_ms"] = extra
    point["implied_quantum_ms"] = (extra / point["sharers"]
                                   if extra is not None and point["mode"] == "time-slicing"
                                   else None)
    return point


def implied_quantum(points: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The time slice the time-slicing points imply: the slope of their p99 over the number
    of sharers. A request waits for up to N sharers' slices; whether it arrives at a random
    phase of the rotation (p99 ~ 0.99 N q + service) or, after a fixed think time, at the same
    phase each time (every request waits N q - think + service), the p99 grows by about one
    slice q per sharer; the intercept absorbs the think time and the service time. With one
    point only: (p99 - solo p50) / N."""
    ts = [p for p in points if p["mode"] == "time-slicing" and p.get("p99_added_ms") is not None]
    xs = [p["sharers"] for p in ts]
    fit = stats.linear_fit(xs, [p["latency_us"]["p99"] / 1000.0 for p in ts])
    if fit is None:
        slope = ts[0]["implied_quantum_ms"] if ts else None
        intercept = None
        method = "(p99 - solo p50) / N of the one time-slicing point"
    else:
        slope, intercept = fit
        method = "least-squares slope of the p99 against the number of time-sliced sharers"
    return {"ms": slope, "intercept_ms": intercept, "from_sharers": xs,
            "per_point_ms": [p["implied_quantum_ms"] for p in ts], "method": method}


def _ms(us: float | None) -> str:
    return "n/a" if us is None else f"{us / 1000.0:.2f}"


def _times(x: float | None) -> str:
    return "n/a" if x is None else f"x{x:.1f}"


def latency_finding(client: str, stress: str, solo: Mapping[str, Any],
                    points: Sequence[Mapping[str, Any]], quantum: Mapping[str, Any]) -> str:
    """One paragraph: the client's latency alone, beside each set of sharers, the slice."""
    base = solo.get("latency_us") or {}
    parts = [f"A batch-1 inference client ({client}) took p50/p99/p99.9 "
             f"{_ms(base.get('p50'))}/{_ms(base.get('p99'))}/{_ms(base.get('p999'))} ms alone."]
    for mode in dict.fromkeys(p["mode"] for p in points):  # time-slicing, mps, mig
        group = [p for p in points if p["mode"] == mode and p.get("n")]
        if not group:
            continue
        rows = "; ".join(
            f"N={p['sharers']} {_ms(p['latency_us']['p50'])}/{_ms(p['latency_us']['p99'])}/"
            f"{_ms(p['latency_us']['p999'])} ms (p99 {_times(p['slowdown']['p99'])})"
            for p in group)
        parts.append(f"Beside N sharers running {stress} under {mode}, p50/p99/p99.9: {rows}.")
    if quantum.get("ms") is not None:
        parts.append(f"Under time-slicing the p99 grows by about {quantum['ms']:.2f} ms per "
                     f"sharer: a time slice of about {quantum['ms']:.1f} ms.")
    failed = [p for p in points if not p.get("n")]
    if failed:
        parts.append("No requests measured for: " + ", ".join(
            f"{p['mode']} N={p['sharers']}" for p in failed) + ".")
    return " ".join(parts)


def _outcome(attempt: Mapping[str, Any] | None) -> str:
    if attempt is None:
        return "not tried"
    return "succeeded" if attempt.get("succeeded") else f"failed ({_short(attempt.get('error'))})"


def _short(text: Any, limit: int = 120) -> str | None:
    if text is None:
        return None
    text = str(text).splitlines()[0] if str(text) else ""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _gib(nbytes: Any) -> float | None:
    return None if nbytes is None else round(nbytes / GIB, 2)


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"
