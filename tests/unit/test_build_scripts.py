"""The build scripts as a user meets them: a wrong argument, a missing Go, a cached component.

They share ``conformance/binaries/lib.sh``; CI exercises the builds themselves (``make setup``),
these tests the answers that come before any compiling, on an empty cache of their own.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conformance.binaries import binaries

CONTROL_PLANE = binaries.BUILD_SCRIPT
NODE = binaries.NODE_BUILD_SCRIPT
KUBERNETES = binaries.read_versions()["KUBERNETES_VERSION"]


def _run(script: Path, *args: str, cache: Path,
         path: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPUCONF_CACHE": str(cache)}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(["bash", str(script), *args], env=env, capture_output=True, text=True,
                          timeout=60)


def _without_go() -> str:
    """PATH with bash and coreutils but no Go toolchain."""
    return ":".join(d for d in os.environ["PATH"].split(":")
                    if d and not (Path(d) / "go").exists()) or "/usr/bin:/bin"


def _publish(cache: Path, component: str, *files: str, complete: bool = True) -> Path:
    dest = cache / "bin" / f"{component}-{KUBERNETES}"
    dest.mkdir(parents=True)
    for name in files:
        (dest / name).write_text("#!/bin/sh\n")
    if complete:
        (dest / ".complete").touch()
    return dest


@pytest.mark.parametrize("script, choices", [
    (CONTROL_PLANE,
     "[all|kubernetes|etcd|kwok|helm|kueue|karpenter|sonobuoy|metrics-adapter|kind]"),
    (NODE, "(one of: all kubelet containerd runc")], ids=["control-plane", "node"])
def test_an_unknown_component_exits_2_naming_the_choices(tmp_path, script, choices):
    result = _run(script, "no-such-thing", cache=tmp_path)
    assert result.returncode == 2
    assert choices in result.stderr


def test_the_control_plane_without_go_exits_2_saying_how_to_install_it(tmp_path):
    result = _run(CONTROL_PLANE, "kubernetes", cache=tmp_path, path=_without_go())
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: the Go toolchain is missing: install Go >= 1.26 (https://go.dev/doc/install) "
        "and re-run"]


def test_a_published_kubelet_is_used_as_cached_without_go(tmp_path):
    dest = _publish(tmp_path, "kubelet", "kubelet")
    result = _run(NODE, "kubelet", cache=tmp_path, path=_without_go())
    assert result.returncode == 0, result.stderr
    assert f"kubelet {KUBERNETES}: cached at {dest}" in result.stdout


@pytest.mark.parametrize("complete, files", [(False, ("kubelet",)), (True, ())],
                         ids=["interrupted build (no marker)", "marker without the binary"])
def test_an_unfinished_kubelet_is_rebuilt_not_trusted(tmp_path, complete, files):
    _publish(tmp_path, "kubelet", *files, complete=complete)
    result = _run(NODE, "kubelet", cache=tmp_path, path=_without_go())
    # it tries to build again, and says that Go is what it lacks (exit 2: a missing prerequisite)
    assert result.returncode == 2
    assert "the Go toolchain is missing" in result.stderr
    assert "skipped for missing prerequisites: kubelet" in result.stderr
