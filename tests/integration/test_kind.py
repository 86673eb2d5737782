"""kind for real on this machine: `gpuconf run --target kind` creates a kind cluster from the node
image `make kind-node` built here (Podman as kind's engine), runs a suite against it and deletes
it; and the GPU Operator chart, the operator built from source, installed into such a cluster.
The host has no GPU: what needs a GPU node must fail on "no GPU node" (with the kind node as its
evidence, and what the operator's ClusterPolicy says), never pass and never wait.

Skips, with the reason, where the node image is not current (`make kind-node`, opt-in) or
Podman cannot run a container even with the containers.conf that build wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.binaries import binaries
from conformance.cluster import views
from conformance.cluster.client import connect
from conformance.cluster.waits import wait_until_done
from conformance.common.errors import NotConverged, UsageError
from conformance.node import images, operator
from conformance.run import kind_config, kind_engine

REPO = Path(__file__).resolve().parents[2]
VERSIONS = binaries.read_versions()
NODE_IMAGE = f"localhost/kindest/node:{VERSIONS['KUBERNETES_VERSION']}"
CLUSTER = "gpuconf"  # the kind cluster `gpuconf run --target kind` makes (and deletes)
RUN_TIMEOUT_S = 600  # cluster up ~16 s, the stack suite ~10 s, down ~3 s here
# One after the other, on one xdist worker: a test finding the run's kind cluster up (the
# other test's, on another worker) skips rather than have the run use it and delete it (seen
# in CI once the other tests got faster and the two came to run at once).
pytestmark = pytest.mark.xdist_group("kind")


def _kind_env() -> dict[str, str]:
    """The environment the run needs here: Podman's containers.conf when make kind-node wrote
    one (Podman's defaults are refused on this machine: README, kind on this machine)."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed: apt-get install podman")
    stamp = binaries.cache_dir() / "kind" / "node-image.inputs"
    current = stamp.is_file() and stamp.read_text().split()[0] == NODE_IMAGE
    exists = subprocess.run(["podman", "image", "exists", NODE_IMAGE], timeout=60).returncode == 0
    if not (current and exists):
        pytest.skip(f"kind's node image {NODE_IMAGE} is not built here: `make kind-node`")
    env = dict(os.environ)
    if kind_engine.PODMAN_CONF.is_file():
        env.setdefault("CONTAINERS_CONF", str(kind_engine.PODMAN_CONF))
    if _kind_nodes(env):
        pytest.skip(f"a kind cluster named {CLUSTER} runs here: the run would use it, then "
                    "delete it")
    return env


def _kind_nodes(env: dict[str, str]) -> list[str]:
    out = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}", "--filter",
                          f"label=io.x-k8s.kind.cluster={CLUSTER}"], capture_output=True,
                         text=True, timeout=60, env=env, check=True)
    return out.stdout.split()


def test_kind_cluster_from_the_local_node_image_runs_the_stack_suite_and_goes(tmp_path):
    env = _kind_env()
    results = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--target", "kind", "--kind-config",
         "no-gpu.yaml", "--kind-image", NODE_IMAGE, "--suite", "stack", "--results",
         str(results)],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert not _kind_nodes(env), f"kind cluster {CLUSTER} left behind"
    assert proc.returncode == 1, out[-3000:]
    doc = json.loads((results / "results.json").read_text())
    assert doc["run"]["target"] == "kind"
    verdicts = {r["id"]: r["verdict"] for r in doc["requirements"]}
    assert "pass" not in verdicts.values(), verdicts
    # no GPU on this host: what fails, fails on the kind node having none
    failed = [r for r in doc["requirements"] if r["verdict"] == "fail"]
    assert failed and all(r["message"].startswith("no GPU node") for r in failed), failed
    nodes = {e["content"].split(":")[0] for r in failed for e in r["evidence"]
             if e["name"] == "nodes.txt"}
    assert nodes == {f"{CLUSTER}-control-plane"}, nodes


OPERATOR_CHART = Path(os.environ.get("GPU_OPERATOR_CHART", REPO.parent / "shared" / "upstream"
                                     / f"gpu-operator-{VERSIONS['GPU_OPERATOR_VERSION']}"
                                     / "chart"))
OPERATOR_CLUSTER = f"kop{os.getpid() % 100000}"


def _kind(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    proc = subprocess.run([str(binaries.require_kind()), *args], capture_output=True, text=True,
                          timeout=timeout, env={**env, "KIND_EXPERIMENTAL_PROVIDER": "podman"})
    assert proc.returncode == 0, f"kind {args[0]}: {proc.stdout}{proc.stderr}"[-3000:]
    return proc.stdout


def test_the_gpu_operator_from_source_on_kind_says_no_gpu_node_and_so_do_the_suites(tmp_path):
    """The GPU Operator chart (the operator built from source, its image loaded into the kind
    node) on a kind cluster without GPUs: its ClusterPolicy is ready with no operand to
    deploy, and the suites fail every GPU-node check at once on "no GPU node", quoting it."""
    env = _kind_env()
    try:
        build, node_binaries = binaries.require_operator(), binaries.locate_node()
    except UsageError as exc:
        pytest.skip(str(exc))
    if not (OPERATOR_CHART / "Chart.yaml").is_file():
        pytest.skip(f"no gpu-operator chart at {OPERATOR_CHART} (GPU_OPERATOR_CHART)")
    config = kind_config.with_absolute_mounts(REPO / "kind-config" / "no-gpu.yaml", tmp_path)
    kubeconfig = tmp_path / "kubeconfig"
    _kind(env, "create", "cluster", "--name", OPERATOR_CLUSTER, "--image", NODE_IMAGE,
          "--config", str(config), "--kubeconfig", str(kubeconfig))
    try:
        archive = tmp_path / "gpu-operator-image.tar"
        images.write_archive([operator.image(build, node_binaries)], archive)
        _kind(env, "load", "image-archive", str(archive), "--name", OPERATOR_CLUSTER)
        values = tmp_path / "values.json"
        values.write_text(json.dumps(operator.values(build,
                                                     driver_install_dir="/run/nvidia/driver")))
        helm = subprocess.run(
            [str(binaries.locate().helm), "install", operator.RELEASE, str(OPERATOR_CHART), "-n",
             operator.NAMESPACE, "--create-namespace", "-f", str(values), "--kubeconfig",
             str(kubeconfig), "--wait", "--timeout", "5m"],
            capture_output=True, text=True, timeout=330, check=False)
        assert helm.returncode == 0, helm.stdout + helm.stderr
        c = connect(str(kubeconfig))

        def policy_ready() -> str | None:
            policy = views.read_gpu_stack(c, operator.NAMESPACE).policy
            said = policy.ready_condition() if policy is not None else None
            return None if said and said.startswith("ready") else f"ClusterPolicy: {said}"
        wait_until_done("the ClusterPolicy to be ready", policy_ready, timeout=300,
                        progress=lambda _m: None, error=NotConverged)
        results = tmp_path / "results"
        run = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--target",
                              "existing", "--kubeconfig", str(kubeconfig), "--results",
                              str(results)], capture_output=True, text=True, timeout=600,
                             env=env, check=False)
    finally:
        _kind(env, "delete", "cluster", "--name", OPERATOR_CLUSTER)
    assert run.returncode == 1, (run.stdout + run.stderr)[-3000:]
    doc = json.loads((results / "results.json").read_text())
    verdicts = {r["id"]: r["verdict"] for r in doc["requirements"]}
    assert {"STACK-OP-001", "STACK-OP-002"} <= {k for k, v in verdicts.items() if v == "pass"}
    failed = [r for r in doc["requirements"] if r["verdict"] == "fail"]
    assert failed and all(r["message"].startswith("no GPU node") and
                          "the GPU Operator's ClusterPolicy says: ready" in r["message"]
                          for r in failed), [(r["id"], r["message"]) for r in failed]
