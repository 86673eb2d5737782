"""Session fixtures the suites share (registered by the plugin)."""

from __future__ import annotations

import pytest

from conformance.checks.nodes import GpuNode, list_gpu_nodes
from conformance.checks.operands import OperatorView, read_cluster_policy


@pytest.fixture(scope="session")
def gpu_nodes(cluster) -> list[GpuNode]:
    """Nodes labelled nvidia.com/gpu.present=true, read once per session."""
    return list_gpu_nodes(cluster)


@pytest.fixture(scope="session")
def operator_view(cluster, gpu_env) -> OperatorView:
    """DaemonSets and pods of the operator namespace, read once per session."""
    return OperatorView.read(cluster, gpu_env.options.operator_namespace)


@pytest.fixture(scope="session")
def cluster_policy(cluster) -> dict | None:
    return read_cluster_policy(cluster)


@pytest.fixture
def gpu_allocation_lock(cluster, gpu_env):
    """Held while a check allocates GPUs, so parallel runs and workers do not interleave."""
    from conformance.cluster.locks import held

    with held(cluster, "gpuconf-gpu-allocation", gpu_env.run_id):
        yield


@pytest.fixture
def require_gpu_nodes(gpu_nodes) -> list[GpuNode]:
    """GPU nodes, failing with the count (not a later timeout) when there are none."""
    assert gpu_nodes, ("0 nodes are labelled nvidia.com/gpu.present=true: no GPU nodes, or "
                       "NFD/the GPU Operator is not labelling them")
    return gpu_nodes
