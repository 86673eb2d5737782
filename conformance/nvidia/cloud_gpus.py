"""Which cloud machines carry NVIDIA GPUs: instance types and managed node pools' labels.

A node whose GPU stack is missing or broken shows no NVIDIA resource and no GFD, NFD or
operator label, but its cloud still says what it is: ``node.kubernetes.io/instance-type``
(written by every cloud provider's node controller, Kubernetes well-known labels) and the
accelerator label of a managed node pool. These are facts about NVIDIA hardware on each cloud,
kept here once; ``checks/gpu_nodes.py`` counts such a node as a GPU node by them.

Sources (the providers' accelerated-computing instance pages):

- AWS: https://aws.amazon.com/ec2/instance-types/#Accelerated_Computing - P and G families.
  Not every G is NVIDIA: g4ad is AMD Radeon Pro V520; Inf/Trn are AWS chips.
- Google Cloud: https://cloud.google.com/compute/docs/gpus - the accelerator-optimized A2
  (A100; a2-ultragpu A100 80GB), A3 (H100; a3-ultragpu H200), A4 (B200) and G2 (L4) series.
  N1 machines with attached GPUs have no GPU in their type: only the GKE label shows them.
- Azure: https://learn.microsoft.com/azure/virtual-machines/sizes/overview (GPU accelerated:
  NC, ND, NG, NV families). AMD among them: NVv4 (``_v4`` with ``as``: Radeon Instinct MI25),
  ND MI300X v5, NG (Radeon PRO V620).
- Managed node-pool labels: GKE ``cloud.google.com/gke-accelerator`` (e.g. ``nvidia-l4``,
  https://cloud.google.com/kubernetes-engine/docs/how-to/gpus); AKS
  ``kubernetes.azure.com/accelerator=nvidia`` (https://learn.microsoft.com/azure/aks/gpu-cluster);
  Karpenter on AWS ``karpenter.k8s.aws/instance-gpu-manufacturer=nvidia``
  (https://karpenter.sh/docs/reference/instance-types/) and EKS Auto Mode
  ``eks.amazonaws.com/instance-gpu-manufacturer=nvidia``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

INSTANCE_TYPE = "node.kubernetes.io/instance-type"  # Kubernetes well-known label
INSTANCE_TYPE_BETA = "beta.kubernetes.io/instance-type"  # its deprecated name, still seen


@dataclass(frozen=True)
class GpuInstanceFamily:
    provider: str
    pattern: re.Pattern[str]  # matched against the whole instance type
    gpu: str  # the NVIDIA GPU it carries, as the provider names it


def _family(provider: str, pattern: str, gpu: str) -> GpuInstanceFamily:
    return GpuInstanceFamily(provider, re.compile(pattern), gpu)


GPU_INSTANCE_FAMILIES: tuple[GpuInstanceFamily, ...] = (
    _family("AWS", r"p2\..+", "NVIDIA K80"),
    _family("AWS", r"p3(dn)?\..+", "NVIDIA V100"),
    _family("AWS", r"p4de?\..+", "NVIDIA A100"),
    _family("AWS", r"p5\..+", "NVIDIA H100"),
    _family("AWS", r"p5e(n)?\..+", "NVIDIA H200"),
    _family("AWS", r"p6-b200\..+", "NVIDIA B200"),
    _family("AWS", r"g3s?\..+", "NVIDIA M60"),
    _family("AWS", r"g4dn\..+", "NVIDIA T4"),
    _family("AWS", r"g5g\..+", "NVIDIA T4G"),
    _family("AWS", r"g5\..+", "NVIDIA A10G"),
    _family("AWS", r"gr?6\..+", "NVIDIA L4"),
    _family("AWS", r"g6e\..+", "NVIDIA L40S"),
    _family("GCP", r"a2-ultragpu-.+", "NVIDIA A100 80GB"),
    _family("GCP", r"a2-(high|mega)gpu-.+", "NVIDIA A100 40GB"),
    _family("GCP", r"a3-ultragpu-.+", "NVIDIA H200"),
    _family("GCP", r"a3-(high|mega|edge)gpu-.+", "NVIDIA H100"),
    _family("GCP", r"a4-highgpu-.+", "NVIDIA B200"),
    _family("GCP", r"g2-standard-.+", "NVIDIA L4"),
    # Azure N-series: NC, ND and NV sizes, less the AMD ones (NVv4 "..as_v4", ND MI300X)
    _family("Azure", r"(?i)Standard_N[CDV](?!\d+as_v4$)(?!.*MI300X)\w*", "NVIDIA GPU (N-series)"),
)

# Managed node pools' accelerator labels: (label, how a value that means NVIDIA begins)
ACCELERATOR_LABELS: tuple[tuple[str, str], ...] = (
    ("cloud.google.com/gke-accelerator", "nvidia-"),  # value prefix
    ("kubernetes.azure.com/accelerator", "nvidia"),
    ("karpenter.k8s.aws/instance-gpu-manufacturer", "nvidia"),
    ("eks.amazonaws.com/instance-gpu-manufacturer", "nvidia"),
)


def gpu_instance(instance_type: str | None) -> GpuInstanceFamily | None:
    """The NVIDIA GPU family of a cloud instance type, or None (not a GPU type we know)."""
    if not instance_type:
        return None
    return next((f for f in GPU_INSTANCE_FAMILIES if f.pattern.fullmatch(instance_type)), None)


def cloud_gpu_evidence(labels: Mapping[str, str]) -> str | None:
    """What a node's cloud labels say of NVIDIA GPUs on it ("instance type g5.xlarge (AWS,
    NVIDIA A10G)"), or None."""
    for key, value_prefix in ACCELERATOR_LABELS:
        value = labels.get(key, "")
        if value.lower().startswith(value_prefix):
            return f"cloud label {key}={value}"
    instance_type = labels.get(INSTANCE_TYPE) or labels.get(INSTANCE_TYPE_BETA)
    family = gpu_instance(instance_type)
    if family is None:
        return None
    return f"cloud instance type {instance_type} ({family.provider}, {family.gpu})"
