"""An interrupted ``node up`` (SIGTERM, as a cancelled CI job sends it) removes what it created."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from conformance.node import lifecycle
from conformance.node.state import nodes_dir
from tests.node import hostsnap, node_env

pytestmark = pytest.mark.xdist_group(node_env.XDIST_GROUP)

NAME = "ntest-interrupted"
WAIT_FOR_KUBELET_S = 120.0


def test_interrupt_after_the_kubelet_started_leaves_the_host_as_it_was(nvidia_src, host_before):
    proc = subprocess.Popen([sys.executable, "-m", "conformance.cli", "node", "up", "--name", NAME,
                             "--nvidia-src", nvidia_src], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    state_file = nodes_dir() / NAME / "state.json"
    deadline = time.monotonic() + WAIT_FOR_KUBELET_S
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if "kubelet" in json.loads(state_file.read_text()).get("pids", {}):
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        assert proc.poll() is None, f"up ended before the kubelet started:\n{proc.stdout.read()}"
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=120)
        left = host_before.differences(hostsnap.take())  # before any cleanup of ours
        state_left = state_file.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
        lifecycle.down(NAME, progress=lambda _m: None)  # the logs the failed up kept
    assert proc.returncode == 130, output
    assert "removing what it created" in output
    assert not left, output
    assert not state_left
