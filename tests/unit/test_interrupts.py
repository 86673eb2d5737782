"""A signal during the end of a run is remembered, not raised, and the old handler comes back."""

from __future__ import annotations

import os
import signal

import pytest

from conformance import interrupts


def test_signal_inside_the_block_is_remembered_not_raised():
    before = signal.getsignal(signal.SIGTERM)
    with interrupts.deferred() as late:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        finished = True  # reached: neither signal cut the block short
    assert finished
    assert late.received == [signal.SIGTERM, signal.SIGINT]
    assert bool(late)
    assert signal.getsignal(signal.SIGTERM) is before


def test_without_a_signal_nothing_is_recorded_and_ctrl_c_works_again():
    with interrupts.deferred() as late:
        pass
    assert not late
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
