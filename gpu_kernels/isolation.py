"""Isolation between processes sharing one GPU, reported as findings (what happened).

memory: one copy holds most of the free memory; can another copy still allocate its share?
fault: one copy hits an illegal address while another runs a stress kernel; does the
other keep running, at full speed, with correct results (before / during / after)?
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from gpu_kernels import analysis, memhog, mps, nvml, timing
from gpu_kernels.interference import READY_TIMEOUT_S, stress_spec
from gpu_kernels.procs import Worker, WorkerError, WorkerUnavailable, close_all
from gpu_kernels.result import EXIT_OK, header


def memory(mode: str, env: Mapping[str, str] | None, device: int, fraction: float,
           probe_fraction: float) -> dict[str, Any]:
    """The other copy starts first and sees its own share; then one copy holds ``fraction`` of
    what it sees free; the other asks for its request, 1 GiB, the request again after the
    holder let go, and (where its share is smaller than the GPU) 1 GiB beyond its share."""
    gpu_total = nvml.total_memory(device)
    probe = Worker({"role": "probe", "device": device}, env)
    workers = [probe]
    try:
        alone = probe.expect("ready", READY_TIMEOUT_S)
        holder = Worker({"role": "memhog", "fraction": fraction, "device": device}, env)
        workers.append(holder)
        held = holder.expect("ready", READY_TIMEOUT_S)
        want = memhog.share_request(alone["total_bytes"], alone["free_bytes"], probe_fraction)
        big = _attempt(probe, want)
        small = _attempt(probe, 1 << 30)
        holder.send("release")
        holder.expect("result", 120)
        holder.close()
        after = _attempt(probe, want)
        beyond = memhog.beyond_share_request(alone["free_bytes"], gpu_total)
        over = None if beyond is None else _attempt(probe, beyond)
        probe.send("exit")
        return analysis.memory_finding(mode, held, alone, big, small, after,
                                       gpu_total_bytes=gpu_total,
                                       own_share_bytes=alone["free_bytes"], beyond_share=over)
    finally:
        close_all(workers)


def _attempt(probe: Worker, nbytes: int) -> dict[str, Any]:
    probe.send("attempt", bytes=nbytes)
    return probe.expect("attempt", 120)


def fault(mode: str, env: Mapping[str, str] | None, device: int, victim_kind: str,
          victim_options: Mapping[str, Any], seconds: float) -> dict[str, Any]:
    victim = Worker(stress_spec(victim_kind, victim_options, device), env)
    faulter = Worker({"role": "fault", "device": device}, env)
    workers = [victim, faulter]
    try:
        victim.expect("ready", READY_TIMEOUT_S)
        faulter.expect("ready", READY_TIMEOUT_S)
        t_go = time.monotonic() + 0.3
        t0 = t_go + 0.5
        t_end = t0 + seconds
        victim.send("go", t_go=t_go, t_stop=t_end + 0.2)
        t_fault = t0 + seconds / 3
        timing.sleep_until(t_fault)
        faulter.send("go")
        try:
            fault_report: dict[str, Any] | None = faulter.expect("result", 60)
        except WorkerUnavailable:  # cannot run here: exit 3, not a failed point
            raise
        except WorkerError as exc:
            fault_report = {"error": f"faulting copy failed differently: {exc}"}
        faulter.close()
        t_exit = time.monotonic()
        victim_result, victim_error = None, None
        try:
            victim_result = victim.expect("result", seconds + 30)
        except WorkerUnavailable:  # cannot run here: exit 3, not a failed point
            raise
        except WorkerError as exc:
            victim_error = f"{exc} {exc.stderr_tail}".strip()
        phases = analysis.fault_phases(t0, t_fault, t_exit, t_end)
        found = analysis.fault_finding(mode, victim_result, victim_error, fault_report, phases)
        found["details"]["fault_at_s"] = round(t_fault - t0, 3)
        found["details"]["faulter_exited_at_s"] = round(t_exit - t0, 3)
        return found
    finally:
        close_all(workers)


def run(*, mode_name: str, device: int = 0, use_mps: bool = False, fraction: float = 0.88,
        probe_fraction: float = 0.25, victim_kind: str = "membw",
        victim_options: Mapping[str, Any] | None = None, seconds: float = 6.0,
        mps_replicas: int | None = None) -> dict[str, Any]:
    """The ``isolation`` kind's result: one finding, with the MPS and MIG state
    (``mps_replicas``: MPS with the device plugin's per-client defaults for that many)."""
    mig = nvml.mig_mode(device)
    with mps.optional_daemon(use_mps, mps_replicas, device) as session:
        sharing, env = mps.sharing_mode(session), session.env if session else None
        if mode_name == "memory":
            found = memory(sharing, env, device, fraction, probe_fraction)
        else:
            found = fault(sharing, env, device, victim_kind, victim_options or {}, seconds)
    result = header("isolation")
    result.update(found)
    # A finding is the product, whichever way it went: exit 0 whenever one was made.
    result.update({"mps": session.info if session else None, "mig": mig, "ok": True,
                   "exit_code": EXIT_OK})
    return result
