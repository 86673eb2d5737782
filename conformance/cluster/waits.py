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
    last_error: Exception | None = None
    while True:
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
