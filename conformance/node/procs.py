"""The node's long-running processes: started through ``conformance.common.processes`` (the one
process handling the control plane uses too), recorded by PID in the node's state."""

from __future__ import annotations

import subprocess
import urllib.request

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

__all__ = ["answers", "kill_all", "log_tail", "pid_alive", "pids_running", "reap", "runs",
           "start", "stop", "stop_component"]


def start(state: NodeState, component: str, argv: list[str], *,
          env: dict[str, str] | None = None) -> subprocess.Popen:
    proc = spawn(argv, state.logs / f"{component}.log", env=env or {})
    state.pids[component] = proc.pid
    state.binaries[component] = argv[0]
    state.commands[component] = argv
    state.environments[component] = env or {}
    state.save()
    return proc



def stop_component(state: NodeState, component: str) -> None:
    """Stop a recorded component's process (a host process the node runs), if it has one."""
    if component in state.pids:
        stop(state.pids[component], state.binaries.get(component, ""))


def answers(url: str) -> bool:
    """A host process's health endpoint answers 200 (its readiness probe)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False
