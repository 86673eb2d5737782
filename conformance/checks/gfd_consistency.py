"""Do a GPU node's GFD labels agree with each other?

A label set can match the upstream regex contract and still be wrong: a product that names
another GPU than the compute capability says, a version label whose parts disagree with it,
replicas without a sharing strategy. Each rule returns a sentence a user can act on.
Whether the node advertises what its labels promise (gpu.count x gpu.replicas) is not a label
rule: ``conformance.checks.capacity`` owns it (STACK-DP-003).
"""

from __future__ import annotations

from conformance.checks.gpu_nodes import GpuNode
from conformance.nvidia import driver
from conformance.nvidia import labels as L
from conformance.nvidia.gpu_models import GPU_MODELS, GpuModel, arch_family

MEMORY_TOLERANCE = 0.03  # NVML's total memory moves by a few hundred MiB across drivers


def base_product(product: str) -> str:
    """The GPU model part of gpu.product (without -SHARED or the MIG-single -MIG-<p> suffix)."""
    product = product.removesuffix(L.SHARED_SUFFIX)
    return product.split("-MIG-", 1)[0]


def gpu_model(node: GpuNode) -> GpuModel | None:
    """The GPU model the node's gpu.product names (None when unknown or unlabelled)."""
    return GPU_MODELS.get(base_product(node.label(L.PRODUCT) or ""))


def inconsistencies(node: GpuNode) -> list[str]:
    out: list[str] = []
    lab = node.labels
    major, minor = node.int_label(L.COMPUTE_MAJOR), node.int_label(L.COMPUTE_MINOR)
    family = lab.get(L.FAMILY)
    if major is not None and minor is not None and family:
        want = arch_family(major, minor)
        if want != family:
            out.append(f"gpu.family={family} but compute capability {major}.{minor} is {want}")
    product = lab.get(L.PRODUCT)
    if product:
        model = gpu_model(node)
        if model is not None:
            if major is not None and (major, minor) != (model.compute_major, model.compute_minor):
                out.append(f"gpu.product={product} has compute capability "
                           f"{model.compute_major}.{model.compute_minor}, labels say "
                           f"{major}.{minor} (wrong GPU type label)")
            memory = node.int_label(L.MEMORY)
            is_mig = "-MIG-" in product
            if memory and not is_mig and abs(memory - model.memory_mib) > (
                    MEMORY_TOLERANCE * model.memory_mib):
                out.append(f"gpu.product={product} has {model.memory_mib} MiB, gpu.memory says "
                           f"{memory} MiB (wrong GPU type label)")
    out += driver.label_inconsistencies(lab)
    out += _sharing_rules(node)
    return out


def _sharing_rules(node: GpuNode) -> list[str]:
    out = []
    lab = node.labels
    replicas = node.int_label(L.REPLICAS)
    strategy = lab.get(L.SHARING_STRATEGY)
    product = lab.get(L.PRODUCT, "")
    if replicas is not None and strategy is not None:
        if replicas > 1 and strategy == "none":
            out.append(f"gpu.replicas={replicas} but gpu.sharing-strategy=none")
        if replicas == 1 and strategy not in ("none", None):
            out.append(f"gpu.sharing-strategy={strategy} but gpu.replicas=1")
    if product.endswith(L.SHARED_SUFFIX) and (replicas or 1) <= 1:
        out.append(f"gpu.product={product} is -SHARED but gpu.replicas={replicas}")
    return out
