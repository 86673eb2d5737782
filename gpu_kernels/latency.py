"""Tail latency under sharing (the ``latency`` kind), recorded as a finding (SHARE-LAT-001).

What time-slicing exists for is small inference, and what its users feel under sharing is
the latency of each request, not the throughput. A client process (kernels/infer.py: a
batch-1 GEMV chain of a few hundred microseconds, with think time between requests) is
measured alone, then beside N sharers running a throughput stress kernel as separate
processes on the same GPU (time-slicing: each process its own context), then the same under
a private MPS daemon. Each run uses the sharing experiments' machinery (interference.gather):
every process prepares, then all start at one instant and the client's requests submitted
inside the measured window count.

Per point: p50, p90, p99, p99.9 (us), the slowdown of each over the solo run, a compact CDF,
the sharers' rates; over the time-slicing points, the time slice the p99s imply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpu_kernels import analysis, kernels, mps, nvml
from gpu_kernels.interference import Window, gather, stress_spec
from gpu_kernels.procs import WorkerError, WorkerUnavailable
from gpu_kernels.result import EXIT_FAILED, EXIT_OK, header

REQUIREMENT = "SHARE-LAT-001"


def client_spec(options: Mapping[str, Any], think_ms: float, device: int) -> dict[str, Any]:
    return {"role": "latency", "kind": "infer", "options": dict(options),
            "think_s": think_ms / 1000.0, "device": device}


def measure(mode: str, sharers: int, client: Mapping[str, Any], stress: Mapping[str, Any],
            window: Window, env: Mapping[str, str] | None
            ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One point: the client beside ``sharers`` copies of the stress kernel."""
    try:
        run = gather([client, *[stress] * sharers], window, env)
    except WorkerUnavailable:  # cannot run here: exit 3, not a failed point
        raise
    except WorkerError as exc:
        return {"mode": mode, "sharers": sharers, "n": 0, "latency_us": {},
                "cdf": [], "client_correct": False, "sharers_correct": False,
                "error": f"{exc} {exc.stderr_tail}".strip()}, None
    figures = [analysis.copy_figures(r, run.t0, run.t1, window.trials)
               for r in run.results[1:]]
    point = analysis.latency_point(mode=mode, sharers=sharers, client=run.results[0],
                                   start=run.t0, end=run.t1, sharer_figures=figures)
    point["nvml"] = run.seen["nvml"]
    return point, {**run.seen, "client_config": run.readies[0]["config"],
                   "sharer_configs": [r["config"] for r in run.readies[1:]]}


def run(*, client_options: Mapping[str, Any], think_ms: float, stress_kind: str,
        stress_options: Mapping[str, Any], sharers: Sequence[int],
        mps_sharers: Sequence[int], window: Window, device: int = 0) -> dict[str, Any]:
    """The ``latency`` kind's result: solo, each time-sliced N, each N under MPS."""
    if mps_sharers:
        mps.require()
    client = client_spec(client_options, think_ms, device)
    stress = stress_spec(stress_kind, stress_options, device)
    mig = nvml.mig_mode(device)
    solo, seen = measure("solo", 0, client, stress, window, None)
    if seen is None:
        raise RuntimeError(f"the solo client did not run: {solo['error']}")
    points = [solo]
    plan = [("time-slicing", n) for n in sorted(set(sharers))]
    session = None
    for mode, n in plan:
        point, seen_n = measure(mode, n, client, stress, window, None)
        if seen_n and seen_n["sharer_configs"]:  # later sharers reuse this launch sizing
            stress = stress_spec(stress_kind, kernels.pinned(
                stress_kind, dict(stress_options), seen_n["sharer_configs"][0]), device)
        points.append(point)
    if mps_sharers:
        with mps.daemon() as session:
            points += [measure("mps", n, client, stress, window, session.env)[0]
                       for n in sorted(set(mps_sharers))]
    for p in points:
        analysis.with_slowdowns(p, solo)
    quantum = analysis.implied_quantum(points)
    cfg = seen["client_config"]
    described = (f"{cfg['layers']} x {cfg['hidden']}^2 bf16 GEMV layers, {think_ms:g} ms "
                 "think time")
    finding = analysis.latency_finding(described, stress_kind, solo, points[1:], quantum)
    ok = all(p.get("client_correct") and p.get("sharers_correct", True) and not p.get("error")
             for p in points)
    out = header("latency")
    out.update({
        "experiment": "latency",
        "requirement": REQUIREMENT,
        "client": {"kernel": "infer", "config": cfg, "think_ms": think_ms},
        "stress": {"kernel": stress_kind, "options": dict(stress_options)},
        "window": {"seconds": window.seconds, "ramp_s": window.ramp},
        "points": points,
        "quantum": quantum,
        "finding": finding,
        "device": seen["identity"],
        "mps": session.info if session else None,
        "mig": mig,
        "ok": ok,
        "exit_code": EXIT_OK if ok else EXIT_FAILED,
    })
    return out
