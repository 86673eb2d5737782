"""Run experiments under CUDA MPS: a private control daemon, always stopped afterwards.

The daemon gets its own pipe and log folders under a fresh temporary folder, so it neither
finds nor disturbs any MPS daemon the node already runs; the copies reach it through the
same CUDA_MPS_PIPE_DIRECTORY in their environment. Compute mode is left as it is.

With ``replicas`` the daemon gets the per-client defaults the NVIDIA device plugin's MPS
control daemon sets for ``sharing.mps`` with that many replicas of a GPU (k8s-device-plugin
v0.20.0, cmd/mps-control-daemon/mps/daemon.go): a pinned device memory limit of the GPU's
memory / replicas (in MiB) and an active thread percentage of 100 / replicas. The plugin's
daemon also sets the GPU's compute mode to EXCLUSIVE_PROCESS first; this one does not, so the
limits can be measured where the compute mode must not change (the H200 machine).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_kernels import nvml

CONTROL = "nvidia-cuda-mps-control"


class MpsUnavailable(RuntimeError):
    """nvidia-cuda-mps-control is missing or the daemon did not start."""


def replica_defaults(total_bytes: int, replicas: int) -> dict[str, str]:
    """The plugin's per-client defaults for ``replicas`` clients of one GPU, as control
    commands' arguments: ``{"pinned_mem_limit": "<MiB>M", "active_thread_percentage": "<%>"}``."""
    if replicas < 1:
        raise ValueError(f"MPS replicas {replicas}: at least 1")
    return {"pinned_mem_limit": f"{total_bytes // replicas // 1024 // 1024}M",
            "active_thread_percentage": f"{100 // replicas}"}


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
def daemon(replicas: int | None = None, device: int = 0) -> Iterator[MpsSession]:
    """Start ``nvidia-cuda-mps-control -d`` (with ``replicas``: the device plugin's per-client
    defaults for ``device``); on exit send ``quit`` and wait until it is gone."""
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
        if replicas is not None:
            _set_replica_defaults(session, replicas, device)
        yield session
    finally:
        _stop(session, pid, log_dir)
        shutil.rmtree(root, ignore_errors=True)


def optional_daemon(use_mps: bool, replicas: int | None = None,
                    device: int = 0) -> AbstractContextManager[MpsSession | None]:
    """:func:`daemon` when asked for (``replicas`` implies it), else no session (None)."""
    return daemon(replicas, device) if use_mps or replicas is not None else nullcontext()


def sharing_mode(session: MpsSession | None) -> str:
    """How the copies share the GPU: "mps" under a daemon, else "time-slicing"."""
    return "mps" if session is not None else "time-slicing"


def _set_replica_defaults(session: MpsSession, replicas: int, device: int) -> None:
    total = nvml.total_memory(device)
    if total is None:
        raise MpsUnavailable("NVML cannot read the GPU's memory: no per-replica limit to set")
    defaults = replica_defaults(total, replicas)
    _control(session.env, f"set_default_device_pinned_mem_limit {device} "
                          f"{defaults['pinned_mem_limit']}")
    _control(session.env, f"set_default_active_thread_percentage "
                          f"{defaults['active_thread_percentage']}")
    session.info["replica_defaults"] = {
        "replicas": replicas, "device": device, "total_bytes": total, **defaults,
        "read_back": _control(session.env, "get_default_active_thread_percentage"),
        "as": "k8s-device-plugin v0.20.0 cmd/mps-control-daemon/mps/daemon.go"}


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
