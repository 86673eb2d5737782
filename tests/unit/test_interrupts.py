"""A signal during the end of a run is remembered, not raised, and the old handler comes back."""

from __future__ import annotations

import os
import signal

import pytest

from conformance.common import interrupts


@pytest.fixture
def sigterm_interrupts():
    """SIGTERM raises KeyboardInterrupt, as in gpuconf and the plugin; restored afterwards."""
    before = signal.getsignal(signal.SIGTERM)
    interrupts.sigterm_as_interrupt()
    yield
    signal.signal(signal.SIGTERM, before)


def test_sigterm_ends_the_process_like_ctrl_c(sigterm_interrupts):
    with pytest.raises(KeyboardInterrupt, match="signal 15"):
        os.kill(os.getpid(), signal.SIGTERM)


def test_signals_inside_the_block_let_the_work_finish_and_are_reported(sigterm_interrupts):
    written = []
    with interrupts.deferred() as late:
        os.kill(os.getpid(), signal.SIGTERM)
        written.append("results")  # the work after the signal still happens
        os.kill(os.getpid(), signal.SIGINT)
        written.append("teardown")
    assert written == ["results", "teardown"]
    assert late.received == [signal.SIGTERM, signal.SIGINT] and late
    with pytest.raises(KeyboardInterrupt):  # the handlers from before the block are back
        os.kill(os.getpid(), signal.SIGTERM)


def test_without_a_signal_nothing_is_recorded_and_ctrl_c_works_again():
    with interrupts.deferred() as late:
        pass
    assert not late
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)


def test_the_suite_takes_one_interrupt_and_finishes_its_cleanup_through_the_next():
    before = {sig: signal.getsignal(sig) for sig in interrupts.SIGNALS}
    cleaned = []
    try:
        interrupts.interrupt_once()
        with pytest.raises(KeyboardInterrupt, match="signal 2"):
            os.kill(os.getpid(), signal.SIGINT)  # the terminal's Ctrl-C
        os.kill(os.getpid(), signal.SIGINT)  # gpuconf forwarding the same one
        os.kill(os.getpid(), signal.SIGTERM)
        cleaned.append("namespaces deleted")
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    assert cleaned == ["namespaces deleted"]
