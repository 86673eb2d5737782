"""Long-running local processes, started here, recorded by PID and stopped by PID.

The one process handling of the control plane (``conformance/controlplane/components.py``) and
the real node (``conformance/node``): nothing is ever killed by name. A PID counts as ours only
while it still runs the binary recorded for it (PIDs are reused).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

STOP_GRACE_S = 10.0  # SIGTERM first, SIGKILL after this long
KILL_WAIT_S = 5.0  # after SIGKILL: the kernel frees a process in milliseconds; a stuck D-state
LOG_TAIL_LINES = 25


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a zombie child still "exists")."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
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


def ours(pid: int, binary: str) -> bool:
    return pid_alive(pid) and runs(pid, binary)


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
    """Collect an exited child so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def spawn(argv: list[str], log_path: Path, *, env: dict[str, str] | None = None
          ) -> subprocess.Popen:
    """Start ``argv`` in a session of its own, output appended to ``log_path``."""
    with log_path.open("ab") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env=None if env is None else {**os.environ, **env})


def _wait_gone(pid: int, seconds: float, interval: float) -> None:
    deadline = time.monotonic() + seconds
    while pid_alive(pid) and time.monotonic() < deadline:
        reap(pid)
        time.sleep(interval)


def stop(pid: int, binary: str, *, grace: float = STOP_GRACE_S) -> None:
    """SIGTERM, then SIGKILL after ``grace``; only while ``pid`` still runs ``binary``."""
    if ours(pid, binary):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        _wait_gone(pid, grace, 0.1)
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _wait_gone(pid, KILL_WAIT_S, 0.05)
    reap(pid)


def kill_all(pids: set[int] | list[int]) -> None:
    """SIGKILL each of ``pids`` (found as ours by the caller) and wait for them to go."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT_S
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        for p in pids:
            reap(p)
        time.sleep(0.05)
