"""Hold SIGINT/SIGTERM back while the end of a run sweeps the cluster and writes its results.

A second Ctrl-C (or the CLI forwarding a cancelled CI job's SIGTERM) must not cut the sweep
or the results file in half: the signal is remembered, and the run reports itself interrupted
once its results are safe.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass
class Deferred:
    """The signals that arrived while deferred (empty when none did)."""

    received: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.received)


@contextmanager
def deferred() -> Iterator[Deferred]:
    """Remember SIGINT/SIGTERM instead of raising them inside the block (main thread only)."""
    got = Deferred()
    if threading.current_thread() is not threading.main_thread():
        yield got
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}

    def remember(signum, _frame) -> None:
        got.received.append(signum)

    for sig in SIGNALS:
        signal.signal(sig, remember)
    try:
        yield got
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _raise_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _raise_first_interrupt(signum: int, frame: object) -> None:
    for sig in SIGNALS:
        signal.signal(sig, _ignore_while_cleaning_up)
    _raise_interrupt(signum, frame)


def _ignore_while_cleaning_up(_signum: int, _frame: object) -> None:
    """The run is already ending: its cleanup must not be cut (see :func:`interrupt_once`)."""


def sigterm_as_interrupt() -> None:
    """Make SIGTERM (a cancelled CI job, ``kill``) end the process like Ctrl-C.

    Finalizers then delete what was created and the results so far are written. Main thread
    only (Python delivers signals there); elsewhere this does nothing.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)


def interrupt_once() -> None:
    """In the suite's process: the first SIGINT or SIGTERM ends it like Ctrl-C, later ones are
    ignored until it has cleaned up. One interrupt reaches it twice: a terminal's Ctrl-C (and
    ``timeout``, which signals its whole process group) reaches both gpuconf and the suite,
    and gpuconf forwards it; the second one cut the first one's handling on the H200 node
    (a traceback instead of the summary). gpuconf kills the suite if its cleanup hangs."""
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _raise_first_interrupt)
