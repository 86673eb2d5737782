"""GPU nodes by thin evidence (issue 32 point 4): a cloud GPU instance type, a managed pool's
accelerator label or one nvidia.com/gpu.* label counts a node as a GPU node, said as such;
CPU and AMD instance types do not."""

from __future__ import annotations

import pytest

from conformance.checks import gpu_nodes
from conformance.nvidia import cloud_gpus

NVIDIA_TYPES = {  # instance type -> the GPU it carries
    "g5.xlarge": "A10G", "p4d.24xlarge": "A100", "p5.48xlarge": "H100", "p5en.48xlarge": "H200",
    "g4dn.xlarge": "T4", "g6.xlarge": "L4", "g6e.12xlarge": "L40S", "p3.2xlarge": "V100",
    "p6-b200.48xlarge": "B200", "a2-highgpu-1g": "A100 40GB", "a2-ultragpu-8g": "A100 80GB",
    "a3-highgpu-8g": "H100", "a3-ultragpu-8g": "H200", "a4-highgpu-8g": "B200",
    "g2-standard-4": "L4", "Standard_NC24ads_A100_v4": "N-series",
    "Standard_ND96isr_H100_v5": "N-series", "Standard_NV36ads_A10_v5": "N-series",
    "Standard_NC4as_T4_v3": "N-series",
}
NOT_NVIDIA = ["m7i.4xlarge", "c5.large", "g4ad.xlarge", "inf2.xlarge", "trn1.32xlarge",
              "n2-standard-8", "e2-medium", "Standard_D4s_v5", "Standard_NV32as_v4",
              "Standard_ND96isr_MI300X_v5", "Standard_NG32ads_V620_v1"]


@pytest.mark.parametrize("instance_type,gpu", sorted(NVIDIA_TYPES.items()))
def test_cloud_gpu_instance_types_are_known(instance_type: str, gpu: str) -> None:
    family = cloud_gpus.gpu_instance(instance_type)
    assert family is not None and gpu in family.gpu


@pytest.mark.parametrize("instance_type", NOT_NVIDIA)
def test_cpu_and_amd_instance_types_are_not_nvidia(instance_type: str) -> None:
    assert cloud_gpus.gpu_instance(instance_type) is None


@pytest.mark.parametrize("labels,word", [
    ({"node.kubernetes.io/instance-type": "g5.xlarge"}, "cloud instance type g5.xlarge"),
    ({"beta.kubernetes.io/instance-type": "p4d.24xlarge"}, "p4d.24xlarge (AWS, NVIDIA A100)"),
    ({"cloud.google.com/gke-accelerator": "nvidia-l4"}, "gke-accelerator=nvidia-l4"),
    ({"kubernetes.azure.com/accelerator": "nvidia"}, "kubernetes.azure.com/accelerator"),
    ({"nvidia.com/gpu.family": "ampere"}, "label nvidia.com/gpu.family=ampere"),
    ({"nvidia.com/gpu.deploy.operands": "false"}, "label nvidia.com/gpu.deploy.operands"),
])
def test_thin_evidence_counts_a_gpu_node_and_says_so(labels: dict, word: str) -> None:
    evidence = gpu_nodes.evidence_of({"kubernetes.io/hostname": "n", **labels}, {"cpu": "8"})
    assert evidence and word in " ".join(evidence)
    assert gpu_nodes.is_thin(evidence)


def test_cpu_nodes_and_a_false_gpu_present_are_not_gpu_nodes() -> None:
    assert gpu_nodes.evidence_of({"node.kubernetes.io/instance-type": "m7i.4xlarge"},
                                 {"cpu": "8"}) == ()
    assert gpu_nodes.evidence_of({"nvidia.com/gpu.present": "false",
                                  "cloud.google.com/gke-accelerator": ""}, {}) == ()


def test_strong_evidence_is_not_thin() -> None:
    labels = {"node.kubernetes.io/instance-type": "p5.48xlarge",
              "feature.node.kubernetes.io/pci-10de.present": "true"}
    evidence = gpu_nodes.evidence_of(labels, {"nvidia.com/gpu": "8"})
    assert evidence == ("capacity nvidia.com/gpu=8", gpu_nodes.NFD)
    assert not gpu_nodes.is_thin(evidence)
