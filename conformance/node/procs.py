"""The node's long-running processes: started here, recorded by PID, stopped by PID.

Like the control plane (``conformance/sim/controlplane.py``): nothing is ever killed by name. A
PID counts as ours only while it still runs the binary recorded for it (PIDs are reused).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from conformance.common.errors import ComponentFailed
from conformance.node.state import NodeState
from conformance.sim.controlplane import log_tail

STOP_GRACE_S = 10.0  # SIGTERM first, SIGKILL after this long


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":  # a zombie child still "exists"
            return False
    return True


def runs(pid: int, binary: str) -> bool:
    """True when ``pid`` still runs ``binary`` (its argv[0], or its executable)."""
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return False
    if argv0 == binary:
        return True
    with contextlib.suppress(OSError):
        return os.readlink(f"/proc/{pid}/exe") == binary
    return False


def pids_running(binary: str) -> list[int]:
    """Every process whose executable is ``binary`` (a path of ours, e.g. the shim in the cache:
    containerd starts shims that outlive it, and they are found this way, never by name)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(entry / "exe") == binary:
                    found.append(int(entry.name))
    return sorted(found)


def reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def start(state: NodeState, component: str, argv: list[str], *,
          env: dict[str, str] | None = None) -> subprocess.Popen:
    log_path = state.logs / f"{component}.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, **(env or {})})
    state.pids[component] = proc.pid
    state.binaries[component] = argv[0]
    state.save()
    return proc


def wait_until(component: str, proc: subprocess.Popen, log_path: Path, ready: Callable[[], bool],
               *, timeout: float, progress: Callable[[str], None], what: str,
               interval: float = 0.2) -> None:
    """Poll ``ready`` until it holds; the process exiting or the timeout raises ComponentFailed."""
    t0 = time.monotonic()
    next_note = t0 + 5.0
    while True:
        code = proc.poll()
        if code is not None:
            raise ComponentFailed(component, f"exited with status {code}", log_tail(log_path))
        if ready():
            return
        now = time.monotonic()
        if now - t0 > timeout:
            raise ComponentFailed(component, f"not {what} within {timeout:.0f}s",
                                  log_tail(log_path))
        if now >= next_note:
            progress(f"waiting for {component} to be {what} ({now - t0:.0f}s)")
            next_note = now + 5.0
        time.sleep(interval)


def stop(pid: int, binary: str, *, grace: float = STOP_GRACE_S) -> None:
    """SIGTERM, then SIGKILL after ``grace``; only while ``pid`` still runs ``binary``."""
    if pid_alive(pid) and runs(pid, binary):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while pid_alive(pid) and time.monotonic() < deadline:
            reap(pid)
            time.sleep(0.1)
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5.0
            while pid_alive(pid) and time.monotonic() < deadline:
                reap(pid)
                time.sleep(0.05)
    reap(pid)


def kill_all(pids: set[int] | list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        for p in pids:
            reap(p)
        time.sleep(0.05)
