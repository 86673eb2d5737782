"""A long bring-up wait says where it is without flooding the console: the H200 operator's
300 s wait on one crash-looping state printed sixty identical lines."""

from __future__ import annotations

import pytest

from conformance.cluster import waits
from conformance.common.errors import NotConverged


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_one_state_is_said_every_30_s_and_a_change_within_5_s(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(waits.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(waits.time, "sleep", clock.sleep)
    lines: list[tuple[float, str]] = []

    def state() -> str | None:
        if clock.now < 200:
            return "validator at driver-validation (CrashLoopBackOff)"
        return None if clock.now >= 220 else "validator Running"

    seconds = waits.wait_until_done("the ClusterPolicy", state, timeout=300,
                                    progress=lambda line: lines.append((clock.now, line)),
                                    interval=0.5, error=NotConverged)
    assert seconds == pytest.approx(220, abs=0.5)
    said = [(t, line.rsplit(": ", 1)[1]) for t, line in lines]
    assert [t for t, _ in said] == [5, 35, 65, 95, 125, 155, 185, 200]
    assert said[-1][1] == "validator Running"


def test_the_timeout_names_the_last_state(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(waits.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(waits.time, "sleep", clock.sleep)
    with pytest.raises(NotConverged, match=r"not done within 10s \(still pending\)"):
        waits.wait_until_done("it", lambda: "still pending", timeout=10,
                              progress=lambda _l: None, error=NotConverged)
