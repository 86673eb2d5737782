"""The one wait helper: every wait has a description, a timeout and an interval.

On timeout it raises :class:`WaitTimeout` saying what it waited for and the last state seen,
in the manner of the Kubernetes e2e framework's ``WaitForPodCondition``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from kubernetes.client.exceptions import ApiException

T = TypeVar("T")

# A wait that lasts longer than this says what it waits for, and then again every
# REPEAT_EVERY_S, so a user watching a terminal always sees the run move.
ANNOUNCE_AFTER_S = 5.0
REPEAT_EVERY_S = 30.0
_reporter: Callable[[str], None] | None = None


def set_reporter(reporter: Callable[[str], None] | None) -> None:
    """Where long waits report themselves (the pytest plugin writes them to the terminal)."""
    global _reporter
    _reporter = reporter


def report(message: str) -> None:
    if _reporter is not None:
        _reporter(message)


class Announcer:
    """Says once, after ANNOUNCE_AFTER_S, what a wait is waiting for, then every
    REPEAT_EVERY_S how long it has waited; silent for short waits."""

    def __init__(self, description: str, timeout: float) -> None:
        self.description = description
        self.timeout = timeout
        self.start = time.monotonic()
        self.next_at = self.start + ANNOUNCE_AFTER_S

    def tick(self, state: str = "") -> None:
        now = time.monotonic()
        if now < self.next_at:
            return
        waited = now - self.start
        first = self.next_at == self.start + ANNOUNCE_AFTER_S
        self.next_at = now + REPEAT_EVERY_S
        report((f"waiting up to {self.timeout:.0f}s for {self.description}" if first else
                f"still waiting for {self.description} ({waited:.0f}s of {self.timeout:.0f}s)")
               + (f": {state}" if state else ""))


class WaitTimeout(AssertionError):
    """A condition did not hold in time. An AssertionError so pytest reports it as a failure."""


def wait_for(
    description: str,
    condition: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = 0.5,
    describe_last: Callable[[], str] | None = None,
    tolerate_api_errors: bool = True,
) -> T:
    """Poll ``condition`` until it returns a truthy value, which is returned.

    API errors during the wait (an API server restarting, a 5xx) are tolerated and reported
    with the timeout, unless ``tolerate_api_errors`` is False.
    """
    deadline = time.monotonic() + timeout
    announcer = Announcer(description, timeout)
    last_error: Exception | None = None
    while True:
        announcer.tick()
        try:
            value = condition()
            if value:
                return value
            last_error = None
        except ApiException as exc:
            if not tolerate_api_errors:
                raise
            last_error = exc
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    detail = ""
    if describe_last is not None:
        try:
            detail = describe_last()
        except Exception as exc:  # the description must never hide the timeout itself
            detail = f"(could not describe the last state: {exc})"
    if last_error is not None:
        detail += f"\nlast API error: {getattr(last_error, 'status', '')} " \
                  f"{getattr(last_error, 'reason', last_error)}"
    raise WaitTimeout(f"timed out after {timeout:.0f}s waiting for {description}"
                      + (f"; got instead:\n{detail}" if detail else ""))
