"""Run experiments under CUDA MPS: a private control daemon, always stopped afterwards.

The daemon gets its own pipe and log folders under a fresh temporary folder, so it neither
finds nor disturbs any MPS daemon the node already runs; the copies reach it through the
same CUDA_MPS_PIPE_DIRECTORY in their environment. Compute mode is left as it is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONTROL = "nvidia-cuda-mps-control"


class MpsUnavailable(RuntimeError):
    """nvidia-cuda-mps-control is missing or the daemon did not start."""


@dataclass
class MpsSession:
    env: dict[str, str]
    info: dict[str, Any] = field(default_factory=dict)


def _control(env: dict[str, str], command: str | None, timeout: float = 20.0) -> str:
    args = [CONTROL] if command is not None else [CONTROL, "-d"]
    done = subprocess.run(args, input=(command + "\n") if command else None, text=True,
                          capture_output=True, env={**os.environ, **env}, timeout=timeout)
    if done.returncode != 0:
        raise MpsUnavailable(f"{' '.join(args)} {command or ''}: exit {done.returncode}: "
                             f"{(done.stderr or done.stdout).strip()}")
    return done.stdout.strip()


def _daemon_pid(pipe_dir: Path) -> int | None:
    pid_file = pipe_dir / "nvidia-cuda-mps-control.pid"
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tail(path: Path, lines: int = 6) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def require() -> None:
    """Raise MpsUnavailable now when the control program is missing (before measuring)."""
    if shutil.which(CONTROL) is None:
        raise MpsUnavailable(f"{CONTROL} not found on PATH")


@contextmanager
def daemon() -> Iterator[MpsSession]:
    """Start ``nvidia-cuda-mps-control -d``; on exit send ``quit`` and wait until it is gone."""
    require()
    root = Path(tempfile.mkdtemp(prefix="gpu-kernels-mps-"))
    pipe_dir, log_dir = root / "pipe", root / "log"
    pipe_dir.mkdir()
    log_dir.mkdir()
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(pipe_dir), "CUDA_MPS_LOG_DIRECTORY": str(log_dir)}
    session = MpsSession(env=env, info={"pipe_dir": str(pipe_dir), "log_dir": str(log_dir)})
    _control(env, None)  # -d: forks the daemon and returns
    deadline = time.monotonic() + 10
    while _daemon_pid(pipe_dir) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    pid = _daemon_pid(pipe_dir)
    session.info.update({"started": True, "control_pid": pid,
                         "pipe_dir_files": sorted(os.listdir(pipe_dir))})
    try:
        yield session
    finally:
        _stop(session, pid, log_dir)
        shutil.rmtree(root, ignore_errors=True)


def _stop(session: MpsSession, pid: int | None, log_dir: Path) -> None:
    info = session.info
    try:
        info["server_list"] = _control(session.env, "get_server_list", timeout=10).split()
    except (MpsUnavailable, subprocess.TimeoutExpired) as exc:
        info["server_list_error"] = str(exc)
    try:
        _control(session.env, "quit", timeout=20)
    except (MpsUnavailable, subprocess.TimeoutExpired) as exc:
        info["quit_error"] = str(exc)
    deadline = time.monotonic() + 15
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid) and pid is not None:
        os.kill(pid, 15)  # the daemon this module started, by its pid
        time.sleep(1)
    info["stopped"] = None if pid is None else not _alive(pid)  # None: pid unknown
    info["control_log_tail"] = _tail(log_dir / "control.log")
    info["server_log_tail"] = _tail(log_dir / "server.log")
