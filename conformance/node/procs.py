"""The node's long-running processes: started through ``conformance.common.processes`` (the one
process handling the control plane uses too), recorded by PID in the node's state."""

from __future__ import annotations

import subprocess

from conformance.common.processes import (
    kill_all,
    log_tail,
    pid_alive,
    pids_running,
    reap,
    runs,
    spawn,
    stop,
)
from conformance.node.state import NodeState

__all__ = ["kill_all", "log_tail", "pid_alive", "pids_running", "reap", "runs", "start", "stop"]


def start(state: NodeState, component: str, argv: list[str], *,
          env: dict[str, str] | None = None) -> subprocess.Popen:
    proc = spawn(argv, state.logs / f"{component}.log", env=env or {})
    state.pids[component] = proc.pid
    state.binaries[component] = argv[0]
    state.commands[component] = argv
    state.environments[component] = env or {}
    state.save()
    return proc

