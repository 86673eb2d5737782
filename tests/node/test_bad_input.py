"""A host or an input that cannot give a node is told so in one line, before anything starts."""

from __future__ import annotations

import socket

import pytest

from conformance.common.errors import UsageError
from conformance.node import host, lifecycle
from tests.node import hostsnap, node_env

pytestmark = pytest.mark.xdist_group(node_env.XDIST_GROUP)

NAME = "ntest-bad-input"


def _up(nvidia_src: str | None, **kwargs) -> str:
    with pytest.raises(UsageError) as info:
        lifecycle.up(NAME, nvidia_src=nvidia_src, progress=lambda _m: None, **kwargs)
    message = str(info.value)
    assert "\n" not in message, f"not one line: {message!r}"
    return message


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"gpu_profile": "9xH100"}, "1 to 8 GPUs"),
    ({"gpu_profile": "2xV100"}, "unknown GPU profile"),
    ({"gpu_profile": "8xH100", "driver_root": "/usr/local/nvidia"}, "not both"),
    ({"driver_root": "/nonexistent-driver"}, "no such folder"),
    ({"dev_root": "/"}, "--dev-root goes with --driver-root"),
])
def test_bad_arguments(nvidia_src, host_before, kwargs, expected):
    assert expected in _up(nvidia_src, **kwargs)
    assert not host_before.differences(hostsnap.take())


def test_missing_chart_names_the_tag_to_download(nvidia_src, tmp_path):
    message = _up(str(tmp_path))
    assert "v0.20.0" in message and "github.com/NVIDIA/k8s-device-plugin" in message


def test_taken_kubelet_port_is_refused_before_anything_starts(nvidia_src, host_before):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", 10250))
        s.listen()
        message = _up(nvidia_src)
    assert "port 10250 (kubelet) is taken" in message
    assert message.startswith("this host cannot run a node:")
    assert not host_before.differences(hostsnap.take())
    assert lifecycle.status(NAME) == {"name": NAME, "running": False}


def test_a_host_without_root_or_cgroups_is_told_why():
    """Runs anywhere (no binaries, no root): the phrases a user sees for such a host."""
    facts = host.HostFacts(cgroup="none", cap_sys_resource=False, overlay=True, kmsg=True,
                           root=False, ip_tool=[])
    problems = host.preflight_problems(facts, bridge="gpuconf0", networks=[])
    assert "not root (the kubelet, containerd and runc need root)" in problems
    assert "no cgroups mounted at /sys/fs/cgroup" in problems
    assert "no `ip` command (install iproute2)" in problems
