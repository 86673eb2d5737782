"""The one option table: every option of a run, with its flags, type, default and help.

From this table come the pytest plugin's options (group ``gpu-conformance``), the options
dataclass the plugin and the run layer pass around, the ``gpuconf run`` parser, and the flags
the run plan forwards to the pytest it starts. An option is declared once, here.

``scope`` says where an option appears:

- ``both``: a ``gpuconf run`` option that is also a pytest option; the run plan forwards it.
- ``pytest``: a pytest option the run plan sets itself (run ID, results folder, the Helm
  release it installed); ``gpuconf run`` users do not set it.
- ``run``: only ``gpuconf run`` has it (what to run and how: suites, results, installs).
- ``node``: how to bring the real node up: a ``gpuconf run`` option for ``--target node`` (the
  run plan hands it to ``node up``, not to pytest) and an option of ``gpuconf node up`` (under
  ``node_flag`` where that differs) and of the bring-up benchmark. Its help is written for
  ``node up``; ``gpuconf run`` prefixes it with ``(--target node)``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal

from conformance.common.vocab import TARGETS

Scope = Literal["both", "pytest", "run", "node"]
SUITES = ("stack", "scheduling", "sharing", "operations", "dra", "inference")
# dra is a default: it checks a cluster that serves GPUs through the NVIDIA DRA driver and is
# not-applicable, check by check, on one that does not.
DEFAULT_SUITES = ("stack", "scheduling", "sharing", "dra", "inference")
DEFAULT_CUDA_IMAGE = "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04"
DEFAULT_WORKLOAD_IMAGE = "cupy/cupy:v13.3.0"
# python3 for the inference stand-in (INF-*); the real node imports its own under this name
DEFAULT_METRICS_IMAGE = "docker.io/library/python:3-slim"
# The Inference Extension's lightweight endpoint picker (INF-GW-004): lwepp.Dockerfile of
# sigs.k8s.io/gateway-api-inference-extension v1.6.2, where its Makefile pushes it
DEFAULT_EPP_IMAGE = ("us-central1-docker.pkg.dev/k8s-staging-images/"
                     "gateway-api-inference-extension/lwepp:v1.6.2")


def _option(default: Any = None, *, help: str, scope: Scope = "both", flag: str | None = None,
            pytest_flag: str | None = None, metavar: str | None = None,
            choices: tuple[str, ...] | None = None, type: type | None = None,
            many: bool = False, switch: bool = False, registered_by: str | None = None,
            node_flag: str | None = None, exclusive: str | None = None) -> Any:
    """A field of :class:`Options` carrying its command-line declaration.

    ``flag`` is the ``gpuconf run`` flag and, unless ``pytest_flag`` differs, the pytest one
    (derived from the field name when omitted). ``many``: repeatable, a list. ``switch``: a
    boolean flag. ``registered_by``: the module of another plugin that registers the pytest
    option (pytest-kind's ``--kubeconfig``); this plugin reads it, and registers it itself where
    that plugin is not installed (a GPU host with the suite's wheels but not pytest-kind's).
    ``node_flag``: the ``gpuconf node up`` flag of a ``node`` option, where it differs;
    ``exclusive``: ``node up`` options of one such group exclude each other.
    """
    meta = {"help": help, "scope": scope, "flag": flag, "pytest_flag": pytest_flag,
            "metavar": metavar, "choices": choices, "type": type, "many": many,
            "switch": switch, "registered_by": registered_by, "node_flag": node_flag,
            "exclusive": exclusive}
    if many:
        return field(default_factory=list, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class Options:
    """Everything a run is told. Field order is the order of ``--help``."""

    # --- where ------------------------------------------------------------------------------
    target: str | None = _option(
        choices=TARGETS, help="existing: the kubeconfig's cluster; kind: create one with "
        "pytest-kind from kind-config/; sim: the local simulated cluster; node: the local control "
        "plane with this host as a real kubelet node; local: this host's GPUs without "
        "Kubernetes. Default: existing if a kubeconfig context answers, else sim")
    kubeconfig: str | None = _option(metavar="PATH", registered_by="pytest_kind",
                                     help="kubeconfig of the cluster to check")
    context: str | None = _option(metavar="NAME", help="kubeconfig context to use")
    # --- what the cluster is expected to be -------------------------------------------------
    operator_namespace: str = _option("gpu-operator", metavar="NS",
                                      help="namespace of the GPU Operator (default gpu-operator)")
    expected_driver_version: str | None = _option(
        metavar="V", help="driver version every GPU node must run, e.g. 580.105.08")
    min_driver_version: str | None = _option(metavar="V", help="lowest acceptable driver version")
    restart_threshold: int = _option(1, type=int, metavar="N",
                                     help="operand restarts allowed (default 1, as the "
                                          "operator's own e2e)")
    # --- what to check ----------------------------------------------------------------------
    requirement: list[str] = _option(many=True, metavar="ID",
                                     help="only these requirement IDs or ID prefixes "
                                          "(repeatable; unknown IDs exit 2)")
    suite: list[str] = _option(many=True, scope="run", choices=SUITES,
                               help="suite to run (repeatable; default stack, scheduling, "
                                    "sharing, dra, inference)")
    disruptive: bool = _option(False, switch=True, help="also run checks that change the "
                               "cluster and restore it (the operations suite)")
    reconcile_timeout: float = _option(180.0, type=float, metavar="S",
                                       help="how long disruptive checks wait for the operator "
                                            "to react (default 180)")
    burn_seconds: int = _option(60, type=int, metavar="S",
                                help="length of the burn-in at the power limit on real GPUs "
                                     "(STACK-BURN-001; default 60)")
    gang_queue: str | None = _option(
        metavar="MECHANISM[:QUEUE]", help="the gang scheduler the gang checks (SCHED-GANG-*) "
        "drive, and its queue: kueue:CLUSTERQUEUE (default: the one gang scheduler found, and "
        "its ClusterQueue with the most nvidia.com/gpu quota open to the run's namespaces)")
    autoscaling_pool: str | None = _option(
        metavar="MECHANISM:POOL", help="opt in to the cluster autoscaling check "
        "(SCHED-AUTOSCALE-001), which adds a node (costs money on a cloud), and name the pool "
        "it grows: karpenter:NODEPOOL, or cluster-autoscaler:LABEL=VALUE (a node label of the "
        "node group, e.g. cloud.google.com/gke-nodepool=gpu). The sim's one NodePool is used "
        "without it")
    hpa_metric: str | None = _option(
        metavar="METRIC", help="the custom metric the pod-autoscaling checks (SCHED-HPA-*) "
        "write for their GPU Deployment and scale it on, through the adapter behind "
        "custom.metrics.k8s.io (custom-metrics-apiserver's /write-metrics; default "
        "gpuconf_gpu_load)")
    # --- the monitoring system (INF-MET-001, ai_service_metrics) -----------------------------
    metrics_query: str | None = _option(
        metavar="NS/NAME:PORT|URL", help="the monitoring system's Prometheus query API: an "
        "in-cluster Service (read through the API server's service proxy) or an http(s) URL "
        "(default: on the real node its own Prometheus, elsewhere the first Service of a "
        "Prometheus found by its usual labels)")
    metrics_query_token_file: str | None = _option(
        metavar="FILE", help="bearer token sent to a --metrics-query URL")
    metrics_scrape_manifest: str | None = _option(
        metavar="FILE", help="YAML template ({{.Namespace}}, {{.ServiceName}}, {{.PortName}}, "
        "{{.Port}}, {{.AppLabelKey}}, {{.AppLabelValue}}, {{.RunID}}, as ai-conformance's) that "
        "makes the monitoring system scrape the stand-in (default: a ServiceMonitor where that "
        "API is served, else the Service's prometheus.io/scrape annotations)")
    metrics_scrape_labels: list[str] = _option(
        many=True, metavar="K=V", help="label on the default ServiceMonitor so the platform's "
        "Prometheus selects it (repeatable; e.g. release=kube-prometheus-stack)")
    metrics_collection_timeout: float = _option(
        300.0, type=float, metavar="S", help="how long the monitoring system may take to "
        "collect the stand-in's metrics after its requests (default 300, as ai-conformance)")
    metrics_image: str = _option(
        DEFAULT_METRICS_IMAGE, metavar="IMAGE", help="image with python3 the inference "
        f"stand-in runs in (default {DEFAULT_METRICS_IMAGE}; the real node imports its own, "
        "the host's python3, under that name)")
    # --- the Gateway API (INF-GW-*, ai_inference) ---------------------------------------------
    gateway: str | None = _option(
        metavar="CLASS[:PORT]", help="the GatewayClass the inference routing checks put their "
        "Gateway on, and the listener port its implementation serves (default 80); the "
        "Gateway's status address must be reachable from where the run is (default: on the "
        "real node its own Traefik; elsewhere none: the checks are not applicable)")
    epp_image: str = _option(
        DEFAULT_EPP_IMAGE, metavar="IMAGE", help="image of the Inference Extension's "
        "lightweight endpoint picker (lwepp) the InferencePool routing check deploys beside "
        f"its pool (default {DEFAULT_EPP_IMAGE}, built from the module's lwepp.Dockerfile)")
    # --- images of the pods on real GPUs ----------------------------------------------------
    cuda_image: str = _option(DEFAULT_CUDA_IMAGE, metavar="IMAGE",
                              help=f"image of the nvidia-smi pods (default {DEFAULT_CUDA_IMAGE})")
    workload_image: str = _option(DEFAULT_WORKLOAD_IMAGE, metavar="IMAGE",
                                  help="CuPy image the gpu_kernels pods run in, the module "
                                       f"mounted from a ConfigMap (default "
                                       f"{DEFAULT_WORKLOAD_IMAGE})")
    # --- the sim ----------------------------------------------------------------------------
    sim_profile: str = _option("healthy", flag="--profile", pytest_flag="--sim-profile",
                               metavar="PROFILE", help="sim profile (default healthy; "
                               "`gpuconf sim profiles` lists them)")
    sim_fault: list[str] = _option(many=True, flag="--fault", pytest_flag="--sim-fault",
                                   metavar="NAME", help="sim fault to inject (repeatable; "
                                   "`gpuconf sim faults` lists them)")
    sim_name: str = _option("gpuconf", scope="pytest", metavar="NAME",
                            help="name of the sim cluster the plugin starts or uses")
    kind_config: str = _option("single-gpu.yaml", metavar="FILE",
                               help="kind config in kind-config/ for --target kind")
    kind_image: str | None = _option(
        metavar="IMAGE", registered_by="pytest_kind", help="kind's node image for --target "
        "kind (default kind's own, from its registry; `make kind-node` builds "
        "localhost/kindest/node:<version> here)")
    # --- the real node (--target node without --kubeconfig: `gpuconf node up` for the run) --
    nvidia_src: str | None = _option(
        metavar="DIR", scope="node", help="upstream NVIDIA sources: the k8s-device-plugin tag's "
        "folder or archive (its Helm chart), as downloaded from GitHub (default $NVIDIA_SRC)")
    gpu_profile: str | None = _option(
        metavar="NxMODEL", scope="node", exclusive="gpus", help="a host without GPUs: NVIDIA's "
        "mock NVML with this many GPUs of this model (default 8xH100)")
    driver_root: str | None = _option(
        metavar="DIR", scope="node", exclusive="gpus", help="a GPU host: the NVIDIA driver's "
        "root (e.g. /usr/local/nvidia or /)")
    dev_root: str | None = _option(
        metavar="DIR", scope="node", help="where the driver's dev/nvidia* are, when not below "
        "--driver-root (e.g. /)")
    node_values: str | None = _option(
        metavar="FILE", scope="node", node_flag="--chart-values", help="YAML (Helm) values "
        "merged over the node's device plugin chart values (e.g. a time-slicing config.map)")
    # --- the GPU Operator -------------------------------------------------------------------
    install_operator: bool = _option(False, switch=True, scope="run",
                                     help="install the GPU Operator chart with Helm before the "
                                          "suites and uninstall it afterwards")
    operator_chart: str | None = _option(metavar="PATH", help="GPU Operator Helm chart (a path) "
                                         "for installs; default NVIDIA's Helm repository")
    operator_version: str | None = _option(metavar="V", scope="run",
                                           help="chart version to install")
    operator_values: str | None = _option(metavar="FILE", scope="run",
                                          help="Helm values file for the install")
    set_values: list[str] = _option(many=True, flag="--set", scope="run", metavar="K=V",
                                    help="Helm value for the install (repeatable)")
    matrix: str | None = _option(metavar="FILE", scope="run",
                                 help="run every combination of operator versions x values x "
                                      "sharing configs in FILE (installs the operator for each)")
    # --- results and housekeeping -----------------------------------------------------------
    results: str = _option("results", scope="run", metavar="DIR",
                           help="results folder (default ./results)")
    keep: bool = _option(False, switch=True, scope="run",
                         help="keep the sim, the node / the installed operator afterwards")
    keep_namespaces: bool = _option(False, switch=True,
                                    help="keep the namespaces of failed tests for debugging")
    workers: str | None = _option(flag="-n", scope="run", metavar="N",
                                  help="pytest-xdist workers (e.g. auto)")
    gpu_results: str | None = _option(scope="pytest", metavar="DIR",
                                      help="write results.json (and evidence/) into DIR")
    run_id: str | None = _option(scope="pytest", metavar="ID",
                                 help="label value for this run's objects (default: new)")
    combination: str | None = _option(scope="pytest", metavar="NAME",
                                      help="the matrix combination this run is (kept in the "
                                           "results)")
    helm_release: str | None = _option(scope="pytest", metavar="NAME",
                                       help="the operator's Helm release, when the run "
                                            "installed it")

    def replace(self, **changes: Any) -> Options:
        return dataclasses.replace(self, **changes)


def _fields(*scopes: Scope) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(Options) if f.metadata["scope"] in scopes]


def _dest(f: dataclasses.Field) -> str:
    return f.name


def _flag(f: dataclasses.Field, *, pytest: bool) -> str:
    meta = f.metadata
    if pytest and meta["pytest_flag"]:
        return meta["pytest_flag"]
    return meta["flag"] or "--" + f.name.replace("_", "-")


def _add(add_argument, f: dataclasses.Field, flag: str, *, help: str | None = None,
         required: bool = False) -> None:
    meta = f.metadata
    kwargs: dict[str, Any] = {"dest": _dest(f), "help": help or meta["help"]}
    if required:
        kwargs["required"] = True
    if meta["switch"]:
        kwargs.update(action="store_true", default=False)
    else:
        kwargs.update(metavar=meta["metavar"])
        if meta["many"]:
            kwargs.update(action="append", default=[])
        else:
            kwargs["default"] = f.default
        if meta["choices"]:
            kwargs["choices"] = meta["choices"]
            kwargs.pop("metavar")
        if meta["type"]:
            kwargs["type"] = meta["type"]
    add_argument(flag, **kwargs)


# ---- pytest ----------------------------------------------------------------------------------
def add_pytest_options(group) -> None:
    """Register the plugin's options in its pytest option group."""
    for f in _fields("both", "pytest"):
        owner = f.metadata["registered_by"]
        if not owner or importlib.util.find_spec(owner) is None:
            _add(group.addoption, f, _flag(f, pytest=True))


def from_pytest(config) -> Options:
    """The options of a pytest session (another plugin's options read where registered)."""
    values = {f.name: config.getoption(_dest(f), f.default)
              for f in _fields("both", "pytest")}
    for name, value in values.items():
        if isinstance(value, list):
            values[name] = list(value)
    return Options(**values)


def pytest_flags(options: Options) -> list[str]:
    """The pytest flags that hand ``options`` to a pytest run (non-defaults only)."""
    flags = []
    for f in _fields("both", "pytest"):
        value = getattr(options, f.name)
        flag = _flag(f, pytest=True)
        if f.metadata["many"]:
            flags += [f"{flag}={v}" for v in value]
        elif f.metadata["switch"]:
            flags += [flag] if value else []
        elif value is not None and value != f.default:
            flags.append(f"{flag}={value}")
    return flags


# ---- gpuconf run -----------------------------------------------------------------------------
def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``gpuconf run`` options, in table order, each with its help."""
    for f in _fields("both", "run", "node"):
        help = f"(--target node) {f.metadata['help']}" if f.metadata["scope"] == "node" else None
        _add(parser.add_argument, f, _flag(f, pytest=False), help=help)


def from_args(args: argparse.Namespace) -> Options:
    """The options of a parsed ``gpuconf run`` (pytest-only fields keep their defaults)."""
    return Options(**{f.name: getattr(args, _dest(f)) for f in _fields("both", "run", "node")})


def run_flag(name: str) -> str:
    """The ``gpuconf run`` flag of the option ``name`` (for one-line errors)."""
    return _flag(next(f for f in dataclasses.fields(Options) if f.name == name), pytest=False)


def node_flags_set(options: Options) -> list[str]:
    """The ``gpuconf run`` flags of the node options ``options`` sets (they need a node that
    the run brings up)."""
    return [_flag(f, pytest=False) for f in _fields("node") if getattr(options, f.name)]


# ---- gpuconf node up and the bring-up benchmark ------------------------------------------------
def add_node_arguments(parser: argparse.ArgumentParser, names: Collection[str] | None = None,
                       *, required: Collection[str] = ()) -> None:
    """The node options (all, or those ``names``) as ``gpuconf node up`` takes them: in table
    order, under their node flag, options of one ``exclusive`` group excluding each other.
    The parsed values land under the field names (``args.gpu_profile``, ``args.node_values``)."""
    groups: dict[str, Any] = {}
    for f in _fields("node"):
        if names is not None and f.name not in names:
            continue
        group = f.metadata["exclusive"]
        if group and group not in groups:
            groups[group] = parser.add_mutually_exclusive_group()
        add = groups[group].add_argument if group else parser.add_argument
        _add(add, f, f.metadata["node_flag"] or _flag(f, pytest=False),
             required=f.name in required)
