"""The one way to wait: every wait has a description, a timeout and an interval, and one poll
loop (:func:`_poll`) with one announcer runs them all.

Two idioms: :func:`wait_for` polls a condition until it returns a truthy value (and raises
:class:`WaitTimeout` saying what it waited for and the last state seen, in the manner of the
Kubernetes e2e framework's ``WaitForPodCondition``); :func:`wait_until_done` polls a check that
says what is still pending, None once done (a bring-up's steps, whose progress lines and
timeout name what is missing). Nothing else in the suite polls the cluster with a sleep.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from kubernetes.client.exceptions import ApiException

from conformance.common.errors import ComponentFailed
from conformance.common.processes import log_tail

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
    """Says, after ANNOUNCE_AFTER_S, what a wait is waiting for, then how long it has waited:
    every REPEAT_EVERY_S while the state it is given stays the same, ANNOUNCE_AFTER_S after the
    last line when it changes (a five-minute wait on one state is ten lines, not sixty);
    silent for short waits. Lines go to ``say`` (default: the reporter)."""

    def __init__(self, description: str, timeout: float,
                 say: Callable[[str], None] | None = None) -> None:
        self.description = description
        self.timeout = timeout
        self.say = say or report
        self.start = time.monotonic()
        self.said_at = self.start
        self.said: str | None = None  # the state last said; None: nothing said yet
        self.first = True

    def tick(self, state: str = "") -> None:
        now = time.monotonic()
        if now < self.said_at + (ANNOUNCE_AFTER_S if state != self.said else REPEAT_EVERY_S):
            return
        waited = now - self.start
        self.say((f"waiting up to {self.timeout:.0f}s for {self.description}" if self.first else
                  f"still waiting for {self.description} ({waited:.0f}s of {self.timeout:.0f}s)")
                 + (f": {state}" if state else ""))
        self.first, self.said_at, self.said = False, now, state


class WaitTimeout(AssertionError):
    """A condition did not hold in time. An AssertionError so pytest reports it as a failure."""


def _poll(description: str, check: Callable[[], tuple[T | None, str]], *, timeout: float,
          interval: float, say: Callable[[str], None] | None,
          alive: Callable[[], None] | None, tolerate_api_errors: bool,
          ) -> tuple[T | None, str, ApiException | None]:
    """The one poll loop: ``check`` returns (the value when done, else None; the state to
    announce) until the value comes or ``timeout`` passes. (value or None, last state, last API
    error). ``alive`` raises when something the wait depends on died."""
    deadline = time.monotonic() + timeout
    announcer = Announcer(description, timeout, say)
    state, last_error = "", None
    while True:
        if alive is not None:
            alive()
        try:
            value, state = check()
            if value:
                return value, state, None
            last_error = None
        except ApiException as exc:
            if not tolerate_api_errors:
                raise
            last_error = exc
            state = f"API error {exc.status} {exc.reason}"
        if time.monotonic() >= deadline:
            return None, state, last_error
        announcer.tick(state)
        time.sleep(interval)


def wait_for(
    description: str,
    condition: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = 0.5,
    describe_last: Callable[[], str] | None = None,
    tolerate_api_errors: bool = True,
    state: Callable[[], str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> T:
    """Poll ``condition`` until it returns a truthy value, which is returned.

    API errors during the wait (an API server restarting, a 5xx) are tolerated and reported
    with the timeout, unless ``tolerate_api_errors`` is False. ``state`` says, in the progress
    lines (to ``progress``, default the reporter), where the wait is.
    """
    value, _state, last_error = _poll(
        description, lambda: (condition(), state() if state is not None else ""),
        timeout=timeout, interval=interval, say=progress, alive=None,
        tolerate_api_errors=tolerate_api_errors)
    if value:
        return value
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


def wait_until_done(
    description: str,
    pending: Callable[[], str | None],
    *,
    timeout: float,
    interval: float = 0.5,
    progress: Callable[[str], None] | None = None,
    alive: Callable[[], None] | None = None,
    error: type[Exception] = WaitTimeout,
    tolerate_api_errors: bool = True,
) -> float:
    """Poll ``pending`` (None when done, else what is still pending) until done; the seconds
    it took. The progress lines (to ``progress``, default the reporter) and the timeout
    (``error``, e.g. NotConverged for a command's bring-up) name what is still pending; API
    errors meanwhile count as pending, unless ``tolerate_api_errors`` is False."""
    t0 = time.monotonic()

    def check() -> tuple[bool, str]:
        missing = pending()
        return missing is None, missing or ""

    done, last, _error = _poll(description, check, timeout=timeout, interval=interval,
                               say=progress, alive=alive,
                               tolerate_api_errors=tolerate_api_errors)
    if not done:
        raise error(f"{description}: not done within {timeout:.0f}s "
                    f"({last or 'nothing checked yet'})")
    return time.monotonic() - t0


def wait_for_process(component: str, proc: subprocess.Popen, log_path: Path,
                     ready: Callable[[], bool], *, timeout: float, what: str,
                     progress: Callable[[str], None] | None = None,
                     interval: float = 0.2) -> float:
    """Until a process this run started is ``what`` (``ready``: healthy, answering, ...); the
    seconds it took. The process exiting meanwhile, or the timeout, raises ComponentFailed with
    the tail of its log: a component that cannot start says why at once."""
    def alive() -> None:
        code = proc.poll()
        if code is not None:
            raise ComponentFailed(component, f"exited with status {code}", log_tail(log_path))

    try:
        return wait_until_done(f"{component} to be {what}",
                               lambda: None if ready() else f"{component} not {what} yet",
                               timeout=timeout, interval=interval, progress=progress,
                               alive=alive, tolerate_api_errors=False)
    except WaitTimeout:
        raise ComponentFailed(component, f"not {what} within {timeout:.0f}s",
                              log_tail(log_path)) from None
