"""Bad input: one clear line, exit 2, nothing started or created."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.binaries.binaries import locate_node
from conformance.controlplane.components import clusters_dir

GPUCONF = [sys.executable, "-m", "conformance.cli"]


def gpuconf(*args: str, env: dict | None = None, cwd: Path | None = None):
    return subprocess.run([*GPUCONF, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, cwd=cwd)


def _clusters() -> set[str]:
    return {p.name for p in clusters_dir().glob("*")} if clusters_dir().exists() else set()


def assert_usage_error(proc, *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.strip().splitlines() if line]
    assert len(lines) == 1, f"expected one line, got:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture
def bad_kubeconfig(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\nclusters: [{{{\n")
    return path


@pytest.fixture
def unreachable_kubeconfig(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{port}",
  insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{token: not-a-real-token}}}}]
contexts: [{{name: ctx, context: {{cluster: c, user: u}}}}]
current-context: ctx
""")
    return path


def test_unknown_target_exits_2():
    assert_usage_error(gpuconf("run", "--target", "mars"), "invalid choice", "mars")


def test_unknown_profile_lists_the_valid_ones():
    proc = gpuconf("sim", "up", "--name", "itest-bad", "--profile", "nope")
    assert_usage_error(proc, "nope", "healthy", "time-slicing")
    # nothing made (other xdist workers' sims may come and go meanwhile: look for this one)
    assert "itest-bad" not in _clusters()


def test_unknown_fault_lists_the_valid_ones():
    proc = gpuconf("sim", "up", "--name", "itest-bad", "--fault", "cosmic-rays")
    assert_usage_error(proc, "cosmic-rays", "device-plugin-absent")
    assert "itest-bad" not in _clusters()


def test_malformed_kubeconfig(bad_kubeconfig, tmp_path):
    proc = gpuconf("run", "--kubeconfig", str(bad_kubeconfig), "--results", str(tmp_path / "r"))
    assert_usage_error(proc, "not valid YAML")


def test_unknown_context(unreachable_kubeconfig, tmp_path):
    proc = gpuconf("run", "--kubeconfig", str(unreachable_kubeconfig), "--context", "prod",
                   "--results", str(tmp_path / "r"))
    assert_usage_error(proc, "unknown context", "prod", "ctx")


def test_unreachable_cluster(unreachable_kubeconfig, tmp_path):
    proc = gpuconf("run", "--target", "existing", "--kubeconfig", str(unreachable_kubeconfig),
                   "--results", str(tmp_path / "r"))
    assert_usage_error(proc, "unreachable")


def test_unknown_requirement_id(tmp_path):
    proc = gpuconf("run", "--requirement", "STACK-NOPE-9", "--results", str(tmp_path / "r"))
    assert_usage_error(proc, "STACK-NOPE-9")


def test_unwritable_results_folder(tmp_path):
    target = tmp_path / "file"
    target.write_text("not a folder")
    proc = gpuconf("run", "--results", str(target / "sub"))
    assert_usage_error(proc, "not writable")


def test_port_already_in_use():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = gpuconf("sim", "up", "--name", "itest-port", "--port", str(port))
    assert_usage_error(proc, f"port {port}", "in use")
    assert "itest-port" not in _clusters()


def test_missing_go_toolchain(tmp_path):
    proc = gpuconf("sim", "build", env={"PATH": str(tmp_path), "GPUCONF_CACHE": str(tmp_path)})
    assert_usage_error(proc, "Go toolchain")


def test_kind_without_docker_engine(tmp_path):
    """Neither Docker nor Podman on PATH: the run names both refusals in one line."""
    proc = gpuconf("run", "--target", "kind", "--results", str(tmp_path / "r"),
                   env={"PATH": str(tmp_path)})
    assert_usage_error(proc, "container engine", "docker: not installed", "podman: not installed")


def _podman_refusal(tmp_path: Path) -> str | None:
    """The last stderr line of podman refusing a trivial container here, or None when it runs
    one (the same probe as the preflight's, run by hand: the oracle of the test below)."""
    busybox = locate_node().busybox
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "info"], capture_output=True, timeout=60).returncode == 0:
        pytest.skip("a Docker daemon answers here: kind would run on it, not on podman")
    if shutil.which("podman") is None or not busybox.is_file():
        pytest.skip("needs podman and the node's static busybox (build-node.sh busybox)")
    root = tmp_path / "rootfs"
    root.mkdir()
    shutil.copy2(busybox, root / "busybox")
    proc = subprocess.run(["podman", "run", "--rm", "--network", "none", "--rootfs", str(root),
                           "/busybox", "true"], capture_output=True, text=True, timeout=120)
    return proc.stderr.strip().splitlines()[-1] if proc.returncode else None


def test_kind_where_podman_cannot_run_a_container(tmp_path):
    """On a sandbox whose kernel refuses podman's containers (README, 'kind on this machine')
    the run stops before kind, with podman's own refusal in one line."""
    refusal = _podman_refusal(tmp_path)
    if refusal is None:
        pytest.skip("podman runs containers here: kind would go on to create a cluster")
    proc = gpuconf("run", "--target", "kind", "--results", str(tmp_path / "r"))
    assert_usage_error(proc, "podman cannot run a container here", refusal)


def test_report_of_a_missing_results_folder(tmp_path):
    assert_usage_error(gpuconf("report", str(tmp_path / "nope"), "-o", str(tmp_path / "out")),
                       "nope")


def test_report_of_results_in_an_older_format(tmp_path):
    (tmp_path / "results.json").write_text('{"format": "gpuconf-results", "version": 0}')
    assert_usage_error(gpuconf("report", str(tmp_path), "-o", str(tmp_path / "out")),
                       "version")


def test_certify_without_runs_or_a_driver_version():
    assert_usage_error(gpuconf("certify"), "--baseline")


def test_bad_sharing_config_file(tmp_path):
    bad = tmp_path / "sharing.yaml"
    bad.write_text("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                   "    - name: nvidia.com/gpu\n      replicas: 1\n")
    assert_usage_error(gpuconf("validate-sharing", str(bad)), "replicas")


def test_good_sharing_config_file(tmp_path):
    good = tmp_path / "sharing.yaml"
    good.write_text("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                    "    - name: nvidia.com/gpu\n      replicas: 4\n")
    proc = gpuconf("validate-sharing", str(good))
    assert proc.returncode == 0, proc.stderr
