"""Simulated GPU nodes are told apart per node from what the node shows (KWOK's annotation,
its kubelet version, fake-gpu-operator's labels), and the real-GPU checks leave them out, not
run with the reason, on any target: a sim reached through --kubeconfig included."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kubernetes.client import (
    V1EndpointAddress,
    V1Endpoints,
    V1EndpointSubset,
    V1Node,
    V1NodeSpec,
    V1NodeStatus,
    V1NodeSystemInfo,
    V1ObjectMeta,
)
from kubernetes.client.exceptions import ApiException

from conformance.checks.simulated import simulated_nodes, why_simulated
from conformance.controlplane.components import REAL_NODE_LABEL
from conformance.node.lifecycle import GPU_SOURCE_ANNOTATION
from conformance.plugin.api import with_real_gpus
from conformance.run.targets import mock_gpu_source, simulated_gpu_source

GPU = {"nvidia.com/gpu": "8"}


def _node(name: str, *, labels=None, annotations=None, kubelet="v1.36.3",
          capacity=GPU) -> V1Node:
    info = V1NodeSystemInfo(architecture="amd64", boot_id="", container_runtime_version="",
                            kernel_version="", kube_proxy_version="", kubelet_version=kubelet,
                            machine_id="", operating_system="linux", os_image="",
                            system_uuid="")
    return V1Node(metadata=V1ObjectMeta(name=name, labels=labels, annotations=annotations),
                  spec=V1NodeSpec(),
                  status=V1NodeStatus(capacity=capacity, allocatable=capacity, node_info=info))


@pytest.mark.parametrize(("node", "marker"), [
    (_node("k", annotations={"kwok.x-k8s.io/node": "fake"}), "kwok.x-k8s.io/node=fake"),
    (_node("k", kubelet="fake"), "kubelet version 'fake'"),
    (_node("k", kubelet="v1.33.0-kwok"), "kubelet version 'v1.33.0-kwok'"),
    (_node("f", labels={"run.ai/simulated-gpu-node-pool": "default"}),
     "run.ai/simulated-gpu-node-pool=default"),
    (_node("f", labels={"run.ai/fake.gpu": "true"}), "run.ai/fake.gpu=true"),
])
def test_each_marker_makes_a_node_simulated(node, marker):
    assert marker in simulated_nodes([node])[node.metadata.name]


def test_a_real_node_is_not_simulated():
    real = _node("gpu-0", labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                 annotations={"node.alpha.kubernetes.io/ttl": "0"})
    assert simulated_nodes([real]) == {}
    assert why_simulated({}, {"kwok.x-k8s.io/node": "custom"}, "v1.36.3") is None


def test_every_gpu_node_simulated_means_no_real_gpus():
    kwok = _node("kwok-gpu-0", annotations={"kwok.x-k8s.io/node": "fake"})
    cpu = _node("cpu-0", capacity={"cpu": "8"})  # a real CPU node does not give GPUs
    simulated = simulated_nodes([kwok, cpu])
    source = simulated_gpu_source(simulated, [kwok, cpu])
    assert source.startswith("every GPU node is simulated") and "kwok-gpu-0" in source


def test_the_mock_nvml_node_is_read_from_its_annotation_whatever_the_target():
    """`gpuconf node up` labels its node real and says where its GPUs come from: the suites in
    a Job or a Sonobuoy pod on it (target existing) skip what needs a GPU a pod can open."""
    mock = _node("vm", labels={REAL_NODE_LABEL: "true"},
                 annotations={GPU_SOURCE_ANNOTATION: "mock-nvml 8xH100"})
    assert mock_gpu_source([mock]) == ("node vm runs NVIDIA's mock NVML (8xH100): no device can "
                                       "be opened")
    driver = _node("vm", labels={REAL_NODE_LABEL: "true"},
                   annotations={GPU_SOURCE_ANNOTATION: "driver"})
    unlabelled = _node("gpu-0", annotations={GPU_SOURCE_ANNOTATION: "mock-nvml 8xH100"})
    assert mock_gpu_source([driver, unlabelled]) == ""


def test_a_cluster_with_one_real_gpu_node_runs_the_checks_there():
    kwok = _node("kwok-gpu-0", annotations={"kwok.x-k8s.io/node": "fake"})
    real = _node("gpu-0")
    simulated = simulated_nodes([kwok, real])
    assert simulated_gpu_source(simulated, [kwok, real]) == ""
    gpu_nodes = [SimpleNamespace(name="gpu-0"), SimpleNamespace(name="kwok-gpu-0")]
    assert [n.name for n in with_real_gpus(gpu_nodes, simulated)] == ["gpu-0"]


def test_only_simulated_nodes_left_is_not_run_with_the_reason():
    simulated = {"kwok-gpu-0": "a KWOK node (annotation kwok.x-k8s.io/node=fake)"}
    with pytest.raises(pytest.skip.Exception, match=r"needs real GPUs: .*kwok-gpu-0 is a KWOK"):
        with_real_gpus([SimpleNamespace(name="kwok-gpu-0")], simulated)


# ---- DCGM: an exporter Service with nothing behind it -----------------------------------------
def _cluster(endpoints):
    def read(name, namespace):
        if isinstance(endpoints, Exception):
            raise endpoints
        return endpoints
    return SimpleNamespace(core=SimpleNamespace(read_namespaced_endpoints=read))


def test_dcgm_service_without_endpoints_is_not_run():
    from conformance.suites.stack.test_dcgm import _nothing_behind

    why = _nothing_behind(_cluster(V1Endpoints(subsets=None)), "gpu-operator")
    assert why and "gpu-operator/nvidia-dcgm-exporter" in why and "no ready endpoint" in why
    not_ready = V1Endpoints(subsets=[V1EndpointSubset(addresses=None)])
    assert _nothing_behind(_cluster(not_ready), "gpu-operator")


def test_dcgm_service_with_an_exporter_or_none_at_all_goes_on_to_the_scrape():
    from conformance.suites.stack.test_dcgm import _nothing_behind

    served = V1Endpoints(subsets=[V1EndpointSubset(addresses=[V1EndpointAddress(ip="10.0.0.9")])])
    assert _nothing_behind(_cluster(served), "gpu-operator") is None
    assert _nothing_behind(_cluster(ApiException(status=404)), "gpu-operator") is None
