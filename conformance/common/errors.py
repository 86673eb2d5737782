"""Errors that end a command with a clear one-line message instead of a traceback.

The CLI maps each to its exit code: bad input is 2 (the user can fix the command), a cluster
or component that does not behave is 1 (the command was right, the world was not).
"""

from __future__ import annotations

from conformance.common.vocab import EXIT_FAILED, EXIT_USAGE


class UsageError(Exception):
    """Bad input or a missing precondition the user can fix; the CLI exits 2."""

    exit_code = EXIT_USAGE


class NotConverged(Exception):
    """A cluster did not reach the state asked for in time (an operator install, a rollout).

    Not bad input: the command was right, the cluster did not converge; the CLI exits 1.
    """

    exit_code = EXIT_FAILED


class ComponentFailed(Exception):
    """A local component (control plane, kubelet, containerd) did not start; carries its log."""

    exit_code = EXIT_FAILED

    def __init__(self, component: str, reason: str, log_tail: str = "") -> None:
        super().__init__(f"{component} failed to start: {reason}")
        self.component = component
        self.reason = reason
        self.log_tail = log_tail
