"""The wait for a started process (the control plane's components, the node's containerd and
relay): ready, exited, or never ready, each said at once with the tail of its log."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conformance.cluster.waits import wait_for_process
from conformance.common.errors import ComponentFailed


def _start(code: str, log) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT)


def test_a_ready_process_returns(tmp_path):
    log = tmp_path / "c.log"
    with log.open("w") as out:
        proc = _start("import time; time.sleep(30)", out)
    try:
        took = wait_for_process("c", proc, log, lambda: True, timeout=5, what="healthy")
        assert took < 5
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_exits_is_named_with_its_log(tmp_path):
    log = tmp_path / "c.log"
    with log.open("w") as out:
        proc = _start("print('bad flag --x'); raise SystemExit(3)", out)
    with pytest.raises(ComponentFailed, match="exited with status 3") as failed:
        wait_for_process("c", proc, log, lambda: False, timeout=30, what="healthy",
                         interval=0.05)
    assert "bad flag --x" in failed.value.log_tail


def test_a_process_never_ready_times_out(tmp_path):
    log = tmp_path / "c.log"
    with log.open("w") as out:
        proc = _start("import time; time.sleep(30)", out)
    try:
        with pytest.raises(ComponentFailed, match="not answering within 0s"):
            wait_for_process("c", proc, log, lambda: False, timeout=0.3, what="answering",
                             interval=0.05)
    finally:
        proc.kill()
        proc.wait()
