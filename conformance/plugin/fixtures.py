"""The fixtures the suites use (registered by ``hooks.pytest_configure``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conformance import catalog
from conformance.checks.gpu_nodes import GpuNode
from conformance.cluster import dra as cluster_dra
from conformance.cluster import evidence as ev
from conformance.cluster import namespaces, views
from conformance.cluster.client import Cluster
from conformance.cluster.locks import held
from conformance.common.vocab import NOT_APPLICABLE_PREFIX, NOT_RUN_PREFIX, TARGETS
from conformance.nvidia.clusterpolicy import ClusterPolicy
from conformance.nvidia.labels import DEPLOY_PREFIX, OPERATOR_SELECTOR
from conformance.plugin.api import not_applicable, with_real_gpus
from conformance.plugin.recorder import Recorder
from conformance.run.targets import Env

PHASES_KEY = pytest.StashKey[dict]()  # setup/call/teardown reports of an item, by phase
EVIDENCE_KEY = pytest.StashKey[list]()
GPU_ALLOCATION_LOCK = "gpuconf-gpu-allocation"


def evidence_of(item: pytest.Item) -> list[ev.Evidence]:
    return item.stash.get(EVIDENCE_KEY, [])


def evidence_text(item: pytest.Item) -> str:
    """The evidence a test gathered so far, as one text for its failure report."""
    return "\n\n".join(f"--- {e.name} ---\n{e.content}" for e in evidence_of(item))


def failed(item: pytest.Item) -> bool:
    """Whether any phase of ``item`` failed so far (for finalizers deciding on a dump)."""
    return any(r.failed for r in item.stash.get(PHASES_KEY, {}).values())


# ---- the environment -------------------------------------------------------------------------
@pytest.fixture(scope="session")
def gpu_env(request: pytest.FixtureRequest) -> Env:
    """The resolved target and connected cluster (connects on first use)."""
    return Recorder.of(request.config).environment()


@pytest.fixture(scope="session")
def cluster(gpu_env: Env) -> Cluster:
    """The connected cluster (not-applicable on --target local)."""
    if gpu_env.cluster is None:
        pytest.skip(f"not-applicable: target {gpu_env.target} has no Kubernetes cluster")
    return gpu_env.cluster


@pytest.fixture
def attachments(request: pytest.FixtureRequest) -> list[ev.Evidence]:
    """Append :class:`Evidence` here; it is attached to the report and results on failure."""
    return request.node.stash.setdefault(EVIDENCE_KEY, [])


@pytest.fixture
def namespace(request: pytest.FixtureRequest, cluster: Cluster, gpu_env: Env,
              attachments: list[ev.Evidence]) -> str:
    """A fresh labelled namespace for this test, deleted afterwards (dumped first on failure)."""
    name = namespaces.create_namespace(cluster, request.node.name, gpu_env.run_id)

    def finish() -> None:
        dump = failed(request.node)
        if dump:
            attachments.extend(ev.namespace_dump(cluster, name))
        if not (dump and gpu_env.options.keep_namespaces):
            namespaces.delete_namespace(cluster, name)

    request.addfinalizer(finish)
    return name


@pytest.fixture(scope="session")
def dry_run_namespace(cluster: Cluster, gpu_env: Env) -> Iterator[str]:
    """One labelled namespace the run's server-side dry runs write into (SCHED-INT-*,
    INF-GW-003): a dry run stores nothing, so those checks share it instead of each making and
    deleting its own (the run's end-of-run sweep removes it if this teardown does not)."""
    name = namespaces.create_namespace(cluster, "dry-runs", gpu_env.run_id)
    yield name
    namespaces.delete_namespace(cluster, name)


@pytest.fixture(autouse=True)
def _requirement_gate(request: pytest.FixtureRequest) -> None:
    """Skip a check where its requirement cannot be checked, with the reason."""
    marker = request.node.get_closest_marker("requirement")
    req = catalog.BY_ID.get(marker.args[0]) if marker else None
    needs_gpu = request.node.get_closest_marker("gpu") is not None or bool(req and req.needs_gpu)
    disruptive = (request.node.get_closest_marker("disruptive") is not None
                  or bool(req and req.disruptive))
    if req is not None:
        _allure_labels(req)
    if not (needs_gpu or disruptive or req):
        return
    env: Env = request.getfixturevalue("gpu_env")
    if disruptive and not env.options.disruptive:
        pytest.skip("changes the cluster: run with --disruptive to include it")
    target_marker = request.node.get_closest_marker("target")
    allowed = target_marker.args if target_marker else (req.targets if req else TARGETS)
    if env.target not in allowed:
        if needs_gpu and env.target == "sim":
            pytest.skip(f"{NOT_RUN_PREFIX} needs real GPUs: {env.gpu_source}")  # the sim's nodes
        pytest.skip(f"not-applicable: checked on {', '.join(allowed)}, not on {env.target}")
    device_nodes = request.node.get_closest_marker("device_nodes") is not None
    if (needs_gpu and env.target != "local" and not env.real_gpus
            and not (device_nodes and env.target == "node")):
        pytest.skip(f"{NOT_RUN_PREFIX} needs real GPUs: {env.gpu_source}")


def _allure_labels(req: catalog.Requirement) -> None:
    try:
        import allure
    except ImportError:
        return
    allure.dynamic.epic(req.area)
    allure.dynamic.feature(req.layer)
    allure.dynamic.story(req.id)
    allure.dynamic.title(f"{req.id}: {req.title}")
    allure.dynamic.severity(
        {"critical": "critical", "major": "normal", "minor": "minor", "info": "trivial"}[
            req.severity])


# ---- what the suites read once per session ---------------------------------------------------
@pytest.fixture(scope="session")
def gpu_nodes(cluster: Cluster) -> list[GpuNode]:
    """The cluster's GPU nodes, read once per session."""
    return views.list_gpu_nodes(cluster)


@pytest.fixture(scope="session")
def gpu_stack(cluster: Cluster, gpu_env: Env) -> views.GpuStack:
    """Who runs the NVIDIA stack (operator, device plugin chart, neither) and its
    components, read once per session."""
    return views.read_gpu_stack(cluster, gpu_env.options.operator_namespace)


@pytest.fixture(scope="session")
def cluster_policy(gpu_stack: views.GpuStack) -> ClusterPolicy | None:
    return gpu_stack.policy


@pytest.fixture(scope="session")
def sharing_docs(cluster: Cluster, gpu_stack: views.GpuStack) -> views.SharingDocs | None:
    """The device plugin's sharing configs (from the ClusterPolicy or the chart), if any."""
    return views.read_sharing_docs(cluster, gpu_stack)


@pytest.fixture
def require_operator(gpu_stack: views.GpuStack, gpu_nodes: list[GpuNode]) -> views.GpuStack:
    """The stack, when the GPU Operator manages it (or its labels on the GPU nodes say it
    should); not-applicable otherwise."""
    labelled = any(k.startswith(DEPLOY_PREFIX) for n in gpu_nodes for k in n.labels)
    if not (gpu_stack.operator_installed or labelled):
        pytest.skip(f"{NOT_APPLICABLE_PREFIX} no GPU Operator in this cluster (no Deployment "
                    f"labelled {OPERATOR_SELECTOR}, no ClusterPolicy): the stack is "
                    f"{gpu_stack.shape}")
    return gpu_stack


@pytest.fixture
def gpu_allocation_lock(cluster: Cluster, gpu_env: Env):
    """Held while a check allocates GPUs, so parallel runs and workers do not interleave."""
    with held(cluster, GPU_ALLOCATION_LOCK, gpu_env.run_id):
        yield


@pytest.fixture(scope="session")
def dra_view(cluster: Cluster) -> cluster_dra.DraView:
    """The DRA API, the NVIDIA DRA driver's DeviceClasses, pools and plugin pods (list calls,
    read once per session)."""
    return cluster_dra.read_view(cluster)


@pytest.fixture(scope="session")
def allocation_paths(gpu_nodes: list[GpuNode], dra_view: cluster_dra.DraView) -> dict[str, str]:
    """How each GPU node hands out its GPUs: device-plugin, dra, both or none."""
    return dra_view.paths(gpu_nodes)


@pytest.fixture
def require_device_plugin_nodes(require_gpu_nodes: list[GpuNode],
                                allocation_paths: dict[str, str]) -> list[GpuNode]:
    """GPU nodes the device plugin should serve: all but those the DRA driver serves alone;
    not-applicable when DRA serves every one (the dra suite checks allocation there)."""
    nodes = [n for n in require_gpu_nodes if allocation_paths.get(n.name) != "dra"]
    if not nodes:
        not_applicable(f"the NVIDIA DRA driver serves all {len(require_gpu_nodes)} GPU node(s) "
                       "and none advertises nvidia.com/gpu through the device plugin: the dra "
                       "suite checks allocation there")
    return nodes


@pytest.fixture
def require_gpu_nodes(request: pytest.FixtureRequest, cluster: Cluster,
                      gpu_nodes: list[GpuNode], attachments: list[ev.Evidence]) -> list[GpuNode]:
    """GPU nodes, failing with the count (not a later timeout) when there are none, the nodes
    there are attached and, where the GPU Operator runs, what its ClusterPolicy says of them."""
    operator_says = ""
    if not gpu_nodes:
        attachments.append(ev.Evidence("nodes.txt", ev.nodes_text(cluster)))
        policy = request.getfixturevalue("cluster_policy")
        said = policy.ready_condition() if policy is not None else None
        operator_says = f"; the GPU Operator's ClusterPolicy says: {said}" if said else ""
    assert gpu_nodes, ("no GPU node: no node advertises an NVIDIA GPU resource or carries GFD, "
                       "NFD (pci-10de), GPU Operator or any nvidia.com/gpu.* label, or a "
                       f"cloud GPU instance type or accelerator label{operator_says}")
    return gpu_nodes


@pytest.fixture
def real_gpu_nodes(require_gpu_nodes: list[GpuNode], gpu_env: Env) -> list[GpuNode]:
    """GPU nodes whose GPUs a pod can open: all but the simulated ones (KWOK,
    fake-gpu-operator: ``conformance.checks.simulated``); not run when every one is."""
    return with_real_gpus(require_gpu_nodes, gpu_env.simulated)
