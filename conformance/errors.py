"""Errors that end a command with a clear one-line message instead of a traceback."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input or a missing precondition the user can fix; the CLI exits 2."""

    exit_code = 2


class ComponentFailed(Exception):
    """A control-plane component did not start; carries the tail of its log."""

    exit_code = 1

    def __init__(self, component: str, reason: str, log_tail: str = "") -> None:
        super().__init__(f"{component} failed to start: {reason}")
        self.component = component
        self.reason = reason
        self.log_tail = log_tail
