"""The private MPS daemon with the device plugin's per-replica defaults: what it tells
nvidia-cuda-mps-control (the H200 run measures whether the limits hold)."""

from __future__ import annotations

import pytest

from gpu_kernels import mps, nvml

H200_BYTES = 143771 * 2**20  # nvidia-smi's memory.total on the H200 machine


def test_the_plugins_formula_memory_and_threads_split_by_replicas():
    # daemon.go: totalMemory/replicas/1024/1024 "M", and 100/replicas
    assert mps.replica_defaults(H200_BYTES, 2) == {"pinned_mem_limit": "71885M",
                                                   "active_thread_percentage": "50"}
    assert mps.replica_defaults(H200_BYTES, 3) == {"pinned_mem_limit": "47923M",
                                                   "active_thread_percentage": "33"}
    with pytest.raises(ValueError, match="at least 1"):
        mps.replica_defaults(H200_BYTES, 0)


def test_the_daemon_is_told_the_defaults_and_stopped_even_when_they_fail(monkeypatch, tmp_path):
    sent: list[str | None] = []

    def control(env, command, timeout=20.0):
        sent.append(command)
        if command is None:  # -d: the daemon writes its pid file
            (tmp_path / "pid").write_text("")
        return "50" if command == "get_default_active_thread_percentage" else ""

    monkeypatch.setattr(mps, "require", lambda: None)
    monkeypatch.setattr(mps, "_control", control)
    monkeypatch.setattr(mps, "_daemon_pid", lambda _dir: 4242)
    monkeypatch.setattr(mps, "_alive", lambda _pid: False)
    monkeypatch.setattr(nvml, "total_memory", lambda _i: H200_BYTES)
    with mps.daemon(replicas=2, device=0) as session:
        assert session.info["replica_defaults"]["pinned_mem_limit"] == "71885M"
    assert sent[:4] == [None, "set_default_device_pinned_mem_limit 0 71885M",
                        "set_default_active_thread_percentage 50",
                        "get_default_active_thread_percentage"]
    assert sent[-1] == "quit"

    sent.clear()
    monkeypatch.setattr(nvml, "total_memory", lambda _i: None)
    with pytest.raises(mps.MpsUnavailable, match="no per-replica limit"), mps.daemon(replicas=2):
        pass
    assert sent[-1] == "quit"  # the daemon it started is stopped
