"""Timing loops. Solo runs time trials with CUDA events; shared runs log completion times.

Solo (:func:`run_trials`): launches go back to back; an event after each launch gives the
per-launch latency and the trial's GPU time, with no host sync inside a trial.

Shared (:func:`run_window`): copies in separate processes agree on host-clock windows
(time.monotonic is one clock for every process of the machine). Each copy keeps ``depth``
launches in flight, waits for the oldest, and logs when it completed; rates over any window
then come from stats.window_rate. Event gaps still give the per-launch latency, which under
time-slicing includes the time the copy's context was switched out.

Requests (:func:`run_requests`): a client that thinks, submits one launch and waits for it,
as a batch-1 inference server does; each request's latency is host time from submission to
the result, what a user of the service waits.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from gpu_kernels.kernels.base import Workload


@dataclass
class Trial:
    gpu_seconds: float
    launches: int
    latencies_ms: list[float]
    host_start: float
    host_end: float


@dataclass
class Completions:
    """What one copy did in a shared run: host times and per-launch latencies.

    From :func:`run_window` the times are when launches completed; from :func:`run_requests`
    when requests were submitted (the latency then runs from that time)."""

    times: list[float] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    error: str | None = None


def warm_up(cp: Any, w: Workload, seconds: float, min_launches: int = 3) -> dict[str, Any]:
    """Synchronised launches for ``seconds`` (module load, clocks up), then one timed launch."""
    start, launches = time.monotonic(), 0
    while launches < min_launches or time.monotonic() - start < seconds:
        w.launch()
        cp.cuda.Device().synchronize()
        launches += 1
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record()
    w.launch()
    e1.record()
    e1.synchronize()
    return {"launches": launches + 1, "seconds": time.monotonic() - start,
            "launch_ms": cp.cuda.get_elapsed_time(e0, e1)}


def run_trials(cp: Any, w: Workload, trials: int, trial_seconds: float,
               launch_ms: float, rest_seconds: float = 0.0) -> list[Trial]:
    """``trials`` trials of about ``trial_seconds`` each, sized from the warm-up launch time.

    ``rest_seconds`` > 0 idles the GPU before each trial: the trials then measure what the
    card does in bursts, before its power limit pulls the clocks down (the "burst" regime);
    0 runs them back to back (the "sustained" regime).
    """
    per_trial = max(3, round(trial_seconds * 1000.0 / max(launch_ms, 1e-3)))
    out = []
    for _ in range(trials):
        if rest_seconds > 0:
            time.sleep(rest_seconds)
        events = [cp.cuda.Event() for _ in range(per_trial + 1)]
        host_start = time.monotonic()
        events[0].record()
        for ev in events[1:]:
            w.launch()
            ev.record()
        events[-1].synchronize()
        host_end = time.monotonic()
        lat = [cp.cuda.get_elapsed_time(a, b) for a, b in pairwise(events)]
        out.append(Trial(gpu_seconds=cp.cuda.get_elapsed_time(events[0], events[-1]) / 1000.0,
                         launches=per_trial, latencies_ms=lat, host_start=host_start,
                         host_end=host_end))
    return out


def sleep_until(t: float) -> None:
    while (left := t - time.monotonic()) > 0:
        time.sleep(min(left, 0.05))


def run_window(cp: Any, w: Workload, t_go: float, t_stop: float, depth: int = 2,
               max_records: int = 200_000) -> Completions:
    """Launch from ``t_go`` until ``t_stop`` (host monotonic clock), logging completions.

    A CUDA error (another process's fault reaching this context, say) ends the loop and is
    recorded; what completed before it stays in the log.
    """
    done = Completions()
    sleep_until(t_go)
    try:
        prev = cp.cuda.Event()
        prev.record()
        pending: deque[tuple[Any, Any]] = deque()
        while time.monotonic() < t_stop and len(done.times) < max_records:
            w.launch()
            ev = cp.cuda.Event()
            ev.record()
            pending.append((prev, ev))
            prev = ev
            if len(pending) > depth:
                _complete(cp, pending.popleft(), done)
        while pending:
            _complete(cp, pending.popleft(), done)
    except Exception as exc:  # CUDA errors of several CuPy classes
        done.error = f"{type(exc).__name__}: {exc}"
    return done


def run_requests(cp: Any, w: Workload, t_go: float, t_stop: float, think_s: float,
                 max_records: int = 500_000) -> Completions:
    """From ``t_go`` to ``t_stop``: think ``think_s``, submit one launch, wait for its result.

    ``times`` are the submission times, ``latencies_ms`` the host time until the result was
    there (time.monotonic, which the parent's windows use). A CUDA error ends the loop."""
    done = Completions()
    sleep_until(t_go)
    try:
        finished = cp.cuda.Event()
        while time.monotonic() < t_stop and len(done.times) < max_records:
            if think_s > 0:
                time.sleep(think_s)
            start = time.monotonic()
            w.launch()
            finished.record()
            finished.synchronize()
            done.latencies_ms.append((time.monotonic() - start) * 1000.0)
            done.times.append(start)
    except Exception as exc:  # CUDA errors of several CuPy classes
        done.error = f"{type(exc).__name__}: {exc}"
    return done


def _complete(cp: Any, pair: tuple[Any, Any], done: Completions) -> None:
    before, after = pair
    after.synchronize()
    done.times.append(time.monotonic())
    done.latencies_ms.append(cp.cuda.get_elapsed_time(before, after))
