"""The environment a run checks: which target, which cluster, and the user's expectations.

Resolved lazily (the first test that needs a cluster), so ``--help`` and ``--collect-only`` work
without one.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from conformance.cluster.client import Cluster, check_reachable, connect
from conformance.errors import UsageError

TARGETS = ("existing", "kind", "sim", "local")
KIND_CONFIG_DIR = Path(__file__).resolve().parent.parent / "kind-config"


@dataclass
class Options:
    """The plugin's command-line options, as read from pytest's config."""

    target: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    operator_namespace: str = "gpu-operator"
    operator_chart: str | None = None
    expected_driver_version: str | None = None
    min_driver_version: str | None = None
    restart_threshold: int = 1
    sim_name: str = "gpuconf"
    sim_profile: str = "healthy"
    sim_faults: list[str] = field(default_factory=list)
    kind_config: str = "single-gpu.yaml"
    cuda_image: str = "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04"
    workload_image: str = "cupy/cupy:v13.3.0"
    disruptive: bool = False
    reconcile_timeout: float = 180.0  # the operator's own e2e gives operands minutes
    keep_namespaces: bool = False
    helm_release: str | None = None  # set when this run installed the operator


@dataclass
class Env:
    target: str
    options: Options
    run_id: str
    cluster: Cluster | None = None  # None for --target local
    server_version: str | None = None
    started_sim: bool = False
    kind_cluster: object | None = None

    @property
    def real_gpus(self) -> bool:
        """True where pods get real GPUs (not the sim). Local runs have GPUs but no pods."""
        return self.target in ("existing", "kind")

    def require_cluster(self) -> Cluster:
        if self.cluster is None:
            raise UsageError(f"target {self.target!r} has no Kubernetes cluster")
        return self.cluster


def auto_target(options: Options) -> str:
    """``existing`` when a kubeconfig context answers, else ``sim``."""
    if options.kubeconfig or _default_kubeconfig():
        try:
            cluster = connect(options.kubeconfig, options.context)
            check_reachable(cluster, timeout_s=5)
            return "existing"
        except UsageError:
            if options.kubeconfig or options.context:
                raise
    return "sim"


def _default_kubeconfig() -> bool:
    import os

    return bool(os.environ.get("KUBECONFIG")) or (Path.home() / ".kube" / "config").is_file()


def resolve(options: Options, run_id: str) -> Env:
    target = options.target or auto_target(options)
    if target not in TARGETS:
        raise UsageError(f"unknown target {target!r}: choose one of {', '.join(TARGETS)}")
    env = Env(target=target, options=options, run_id=run_id)
    if target == "local":
        return env
    if target == "sim" and not options.kubeconfig:
        from conformance.sim import cluster as simcluster

        kubeconfig, started = simcluster.ensure_running(
            options.sim_name, options.sim_profile, options.sim_faults)
        options.kubeconfig = str(kubeconfig)
        env.started_sim = started
    if target == "kind":
        env.kind_cluster, options.kubeconfig = create_kind(options)
    env.cluster = connect(options.kubeconfig, options.context)
    env.server_version = check_reachable(env.cluster)
    return env


def create_kind(options: Options):
    """Create a kind cluster from ``kind-config/`` through pytest-kind.

    kind needs a Docker (or Podman) engine with the NVIDIA container toolkit for GPUs; without
    one this stops with a usage error before anything is created.
    """
    kind_precheck()
    config_file = KIND_CONFIG_DIR / options.kind_config
    if not config_file.is_file():
        raise UsageError(f"kind config {config_file} not found (see kind-config/)")
    from pytest_kind import KindCluster

    kind = KindCluster(options.sim_name, kind_path=Path(shutil.which("kind") or "kind"))
    kind.create(config_file=config_file)
    return kind, str(kind.kubeconfig_path)


def kind_precheck() -> None:
    """kind runs nodes as containers: without an engine, stop before creating anything."""
    docker = shutil.which("docker") or shutil.which("podman")
    if docker is None or subprocess.run([docker, "info"], capture_output=True,
                                        timeout=20).returncode != 0:
        raise UsageError("--target kind needs a running Docker engine (kind runs nodes as "
                         "containers): start Docker, or use --target sim / --target existing")
    if shutil.which("kind") is None:
        raise UsageError("--target kind needs the kind binary on PATH (https://kind.sigs.k8s.io)")


def teardown(env: Env) -> None:
    if env.started_sim:
        from conformance.sim import cluster as simcluster

        simcluster.stop(env.options.sim_name)
    if env.kind_cluster is not None:
        env.kind_cluster.delete()
