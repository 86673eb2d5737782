"""The environment a run checks: which target, which cluster, and the options it was given.

Resolved lazily by the pytest plugin (the first test that needs a cluster), so ``--help`` and
``--collect-only`` work without one. ``gpuconf run`` starts the sim, the node or kind itself
(``conformance.run.plan``) and hands pytest a kubeconfig; ``pytest conformance/suites/...
--target sim`` without one has the plugin start a sim here and stop it at the end.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes.client.exceptions import ApiException

from conformance.checks import simulated as sim_rule
from conformance.checks.gpu_nodes import gpu_nodes
from conformance.cluster.client import Cluster, check_reachable, connect
from conformance.common.console import say
from conformance.common.errors import UsageError
from conformance.controlplane.components import REAL_NODE_LABEL
from conformance.node.gateway import GATEWAY_ANNOTATION
from conformance.node.lifecycle import GPU_SOURCE_ANNOTATION, MOCK_NVML
from conformance.node.prometheus import QUERY_ANNOTATION
from conformance.options import Options
from conformance.run import kind_config, kind_engine
from conformance.sim import cluster as simcluster

KIND_CONFIG_DIR = Path(__file__).resolve().parents[2] / "kind-config"


@dataclass
class Env:
    target: str
    options: Options
    run_id: str
    cluster: Cluster | None = None  # None for --target local
    server_version: str | None = None
    started_sim: bool = False
    kind_cluster: object | None = None
    # where the GPUs come from when they are not devices a pod can open (the reason checks that
    # need real GPUs give when they skip); "" for real GPUs
    gpu_source: str = ""
    # node name -> why its GPUs are simulated (KWOK, fake-gpu-operator: checks.simulated):
    # checks that need real GPUs leave these nodes out
    simulated: dict[str, str] = field(default_factory=dict)

    @property
    def real_gpus(self) -> bool:
        """True where pods get devices of their own (not KWOK's, not the mock NVML's). Local
        runs have no pods."""
        return self.target in ("existing", "kind", "node") and not self.gpu_source

    def require_cluster(self) -> Cluster:
        if self.cluster is None:
            raise UsageError(f"target {self.target!r} has no Kubernetes cluster")
        return self.cluster


def has_kubeconfig(options: Options) -> bool:
    return bool(options.kubeconfig or os.environ.get("KUBECONFIG")
                or (Path.home() / ".kube" / "config").is_file())


def auto_target(options: Options) -> str:
    """``existing`` when a kubeconfig context answers, else ``sim``."""
    if has_kubeconfig(options):
        try:
            check_reachable(connect(options.kubeconfig, options.context), timeout_s=5)
            return "existing"
        except UsageError:
            if options.kubeconfig or options.context:
                raise
    return "sim"


def resolve(options: Options, run_id: str) -> Env:
    """Connect to the cluster the options name, starting a sim or kind cluster when asked."""
    target = options.target or auto_target(options)
    env = Env(target=target, options=options, run_id=run_id)
    if target == "local":
        return env
    kubeconfig = options.kubeconfig
    if target == "sim" and not kubeconfig:
        path, env.started_sim = simcluster.ensure_running(
            options.sim_name, options.sim_profile, options.sim_fault,
            progress=lambda m: say(m, who="sim"))
        kubeconfig = str(path)
    elif target == "node" and not kubeconfig:
        raise UsageError("--target node needs the node's kubeconfig: start it with `gpuconf node "
                         "up` and pass --kubeconfig, or use `gpuconf run --target node`")
    elif target == "kind":
        env.kind_cluster, kubeconfig = create_kind(options)
    env.options = options.replace(kubeconfig=kubeconfig)
    env.cluster = connect(kubeconfig, options.context)
    env.server_version = check_reachable(env.cluster)
    try:
        nodes = env.cluster.core.list_node().items
    except ApiException:  # no right to list nodes: the checks that read them say so
        nodes = []
    env.simulated = sim_rule.simulated_nodes(nodes)
    # the mock NVML's node also as target existing: the suites in a Job or a Sonobuoy plugin
    # pod on it (`gpuconf job`, deploy/sonobuoy) connect to it as any cluster
    env.gpu_source = mock_gpu_source(nodes) or simulated_gpu_source(env.simulated, nodes)
    if target == "sim":
        env.gpu_source = env.gpu_source or "the sim simulates nodes and pods, not devices"
    # the real node's own Prometheus (INF-MET-001), also from a Job or plugin pod on it
    query = None if options.metrics_query else node_annotation(nodes, QUERY_ANNOTATION)
    if query:
        env.options = env.options.replace(metrics_query=query)
    # and its own Gateway API implementation (INF-GW-*)
    gateway = None if options.gateway else node_annotation(nodes, GATEWAY_ANNOTATION)
    if gateway:
        env.options = env.options.replace(gateway=gateway)
    return env


def simulated_gpu_source(simulated: dict[str, str], nodes) -> str:
    """Why no pod can open a GPU here when every GPU node is simulated; "" otherwise (a
    cluster with real GPU nodes too runs the real-GPU checks on those)."""
    names = [n.name for n in gpu_nodes(nodes)]
    if names and all(n in simulated for n in names):
        return sim_rule.summary(simulated, names)
    return ""


def mock_gpu_source(nodes) -> str:
    """Why the real node's GPUs cannot be opened, from the annotation ``gpuconf node up`` puts
    on it (``mock-nvml 8xH100`` or ``driver``); "" when they are the driver's."""
    for node in nodes:
        if REAL_NODE_LABEL not in (node.metadata.labels or {}):
            continue
        source = (node.metadata.annotations or {}).get(GPU_SOURCE_ANNOTATION, "")
        if source.startswith(MOCK_NVML):
            profile = source.removeprefix(MOCK_NVML).strip()
            return (f"node {node.metadata.name} runs NVIDIA's mock NVML ({profile}): no device "
                    "can be opened")
    return ""


def node_annotation(nodes, annotation: str) -> str | None:
    """What ``gpuconf node up`` annotated the real node with (its Prometheus's query API URL,
    its Gateway's CLASS:PORT), or None."""
    for node in nodes:
        if REAL_NODE_LABEL in (node.metadata.labels or {}):
            found = (node.metadata.annotations or {}).get(annotation)
            if found:
                return found
    return None


def create_kind(options: Options):
    """Create a kind cluster from ``kind-config/`` through pytest-kind, on the engine the
    preflight found (Podman through ``KIND_EXPERIMENTAL_PROVIDER``).

    kind needs a container engine that can run its nodes (and the NVIDIA container toolkit for
    GPUs); without one this stops with a usage error before anything is created.
    """
    kind_path, engine = kind_engine.preflight()
    config_file = KIND_CONFIG_DIR / options.kind_config
    if not config_file.is_file():
        raise UsageError(f"kind config {config_file} not found (see kind-config/)")
    # here, not at the top: pytest-kind is optional where the suite's wheels run without it
    # (a GPU host; see options.py's registered_by), and only --target kind needs it
    from pytest_kind import KindCluster

    os.environ.update(engine.kind_env)  # kind reads its provider from its environment
    kind = KindCluster(options.sim_name, kind_path=kind_path, image=options.kind_image)
    with tempfile.TemporaryDirectory(prefix="gpuconf-kind-config-") as tmp:
        try:
            kind.create(config_file=kind_config.with_absolute_mounts(config_file, Path(tmp)))
        except subprocess.CalledProcessError as exc:  # kind printed why above, removed its nodes
            raise UsageError(f"kind create cluster failed on {engine.name} (exit "
                             f"{exc.returncode}; its output above says why: where no registry "
                             "answers, its node image pull: --kind-image, README 'kind on this "
                             "machine')") from exc
    return kind, str(kind.kubeconfig_path)


def teardown(env: Env) -> None:
    """Stop what :func:`resolve` started (a sim, a kind cluster); nothing else."""
    if env.started_sim:
        simcluster.down(env.options.sim_name, progress=lambda _m: None)
    if env.kind_cluster is not None:
        env.kind_cluster.delete()
