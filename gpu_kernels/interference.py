"""Interference: a kernel alone, then in N concurrent processes on one GPU.

Separate processes share the GPU the way time-sliced pods do (each its own CUDA context;
or one MPS server with --mps). Every copy prepares, reports ready, and starts at one
agreed host-clock instant; all copies measure over the same window and keep running a
little past it, so no copy's window sees the GPU with fewer sharers than N.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpu_kernels import analysis, kernels, mps, nvml, stats
from gpu_kernels.analysis import Thresholds
from gpu_kernels.procs import Worker, WorkerError, WorkerUnavailable, close_all
from gpu_kernels.result import EXIT_FAILED, EXIT_OK, header

READY_TIMEOUT_S = 300.0  # N processes importing CuPy and compiling at once can be slow


@dataclass(frozen=True)
class Window:
    """The measured window: ``seconds`` cut into ``trials``, after ``lead`` + ``ramp``."""

    seconds: float = 3.0
    trials: int = 5
    lead: float = 0.3  # from "go" to the first launch, so every copy has read "go"
    ramp: float = 0.5  # launches before the window opens (time-slicing settles)
    tail: float = 0.4  # launches after it closes (nobody finishes early inside the window)


def stress_spec(kind: str, options: Mapping[str, Any] | None, device: int) -> dict[str, Any]:
    return {"role": "stress", "kind": kind, "options": dict(options or {}), "device": device}


@dataclass
class Run:
    """What one run of copies together produced: their messages and the measured window."""

    readies: list[dict[str, Any]]
    results: list[dict[str, Any]]
    t0: float
    t1: float
    seen: dict[str, Any]


def gather(specs: Sequence[Mapping[str, Any]], window: Window,
           env: Mapping[str, str] | None) -> Run:
    """Start the copies, let them prepare, start them together, collect what they logged."""
    workers = [Worker(spec, env) for spec in specs]
    try:
        readies = [w.expect("ready", READY_TIMEOUT_S) for w in workers]
        ident = readies[0]["identity"]
        t_go = time.monotonic() + window.lead
        t0 = t_go + window.ramp
        t1 = t0 + window.seconds
        t_stop = t1 + window.tail
        with nvml.Sampler(ident.get("pci_bus_id"), ident.get("uuid"),
                          ident.get("index", 0)) as sampler:
            for w in workers:
                w.send("go", t_go=t_go, t_stop=t_stop)
            results = [w.expect("result", window.lead + window.ramp + window.seconds
                                + window.tail + 120.0) for w in workers]
        trial_windows = stats.split_windows(t0, t1, window.trials)
        seen = {"identity": ident, "configs": [r["config"] for r in readies],
                "nvml": [sampler.summary(a, b) for a, b in trial_windows],
                "window_s": window.seconds, "trials": window.trials}
        return Run(readies, results, t0, t1, seen)
    finally:
        close_all(workers)


def measure(specs: Sequence[Mapping[str, Any]], window: Window,
            env: Mapping[str, str] | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run the copies together once; each copy's figures, and what the parent saw."""
    run = gather(specs, window, env)
    return [analysis.copy_figures(r, run.t0, run.t1, window.trials) for r in run.results], \
        run.seen


def _failed_point(experiment: str, kernel: str, mode: str, copies: int,
                  exc: WorkerError) -> dict[str, Any]:
    return {"experiment": experiment, "kernel": kernel, "mode": mode, "copies": copies,
            "per_copy": [], "verdict": "fail",
            "reasons": [f"{exc} {exc.stderr_tail}".strip()]}


def homogeneous(kind: str, counts: Sequence[int], options: Mapping[str, Any], window: Window,
                limits: Thresholds, device: int, mode: str,
                env: Mapping[str, str] | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Solo first (it normalises every other point, and its sizing is pinned for the
    shared runs), then each N in ``counts``."""
    spec = stress_spec(kind, options, device)
    points: list[dict[str, Any]] = []
    seen: dict[str, Any] = {}
    solo = None
    for n in sorted({1, *counts}):
        try:
            per_copy, seen_n = measure([spec] * n, window, env)
        except WorkerUnavailable:  # cannot run here: exit 3, not a failed point
            raise
        except WorkerError as exc:
            if n == 1:
                raise
            points.append(_failed_point("interference", kind, mode, n, exc))
            continue
        if n == 1:
            solo, seen = per_copy[0]["rate"], seen_n
            spec = stress_spec(kind, kernels.pinned(kind, dict(options), seen_n["configs"][0]),
                               device)
        pt = analysis.point(experiment="interference", kernel=kind, mode=mode,
                            per_copy=per_copy, solo_rates=[solo] * n, limits=limits)
        pt["nvml"] = seen_n["nvml"]
        points.append(pt)
    return points, seen


def mixed(kinds: Sequence[str], options: Mapping[str, Mapping[str, Any]], window: Window,
          limits: Thresholds, device: int, mode: str,
          env: Mapping[str, str] | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Each kernel alone, then one copy of each together."""
    specs = [stress_spec(k, options.get(k), device) for k in kinds]
    points, solos, seen = [], [], {}
    for i, spec in enumerate(specs):
        per_copy, seen = measure([spec], window, env)
        specs[i] = stress_spec(spec["kind"], kernels.pinned(spec["kind"], spec["options"],
                                                            seen["configs"][0]), device)
        solos.append(per_copy[0]["rate"])
        points.append(analysis.point(experiment="interference-mix", kernel=spec["kind"],
                                     mode=mode, per_copy=per_copy, solo_rates=solos[-1:],
                                     limits=limits))
    label = "+".join(kinds)
    try:
        per_copy, seen_mix = measure(specs, window, env)
    except WorkerUnavailable:  # cannot run here: exit 3, not a failed point
        raise
    except WorkerError as exc:
        points.append(_failed_point("interference-mix", label, mode, len(specs), exc))
        return points, seen
    pt = analysis.point(experiment="interference-mix", kernel=label, mode=mode,
                        per_copy=per_copy, solo_rates=solos, limits=limits)
    pt["nvml"] = seen_mix["nvml"]
    points.append(pt)
    return points, seen


def run(*, kernel: str | None, counts: Sequence[int], mix: Sequence[str] | None,
        options: Mapping[str, Mapping[str, Any]], window: Window, limits: Thresholds,
        device: int = 0, use_mps: bool = False,
        mps_replicas: int | None = None) -> dict[str, Any]:
    """The ``interference`` kind's result: every point, the verdict, MPS/MIG state
    (``mps_replicas``: MPS with the device plugin's per-client defaults for that many)."""
    mig = nvml.mig_mode(device)
    with mps.optional_daemon(use_mps, mps_replicas, device) as session:
        mode, env = mps.sharing_mode(session), session.env if session else None
        if mix:
            points, seen = mixed(mix, options, window, limits, device, mode, env)
        else:
            assert kernel is not None
            points, seen = homogeneous(kernel, counts, options.get(kernel, {}), window,
                                       limits, device, mode, env)
    failed = any(p["verdict"] == "fail" for p in points)
    result = header("interference")
    result.update({
        "experiment": "interference-mix" if mix else "interference",
        "kernel": "+".join(mix) if mix else kernel,
        "mode": mode,
        "requirement": "SHARE-INT-001",
        "thresholds": limits.as_dict(),
        "window": {"seconds": window.seconds, "trials": window.trials, "ramp_s": window.ramp},
        "points": points,
        "verdict": "fail" if failed else "pass",
        "device": seen.get("identity"),
        "kernel_configs": seen.get("configs"),
        "mps": session.info if session else None,
        "mig": mig,
        "ok": not failed,
        "exit_code": EXIT_FAILED if failed else EXIT_OK,
    })
    return result
