"""What the DRA checks share: the driver (or not-applicable), its nodes, where to allocate."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from conformance.checks import dra as rules
from conformance.checks import taints
from conformance.checks.gpu_nodes import GpuNode
from conformance.cluster import dra as cluster_dra
from conformance.cluster import evidence as ev
from conformance.nvidia import dra
from conformance.plugin.api import not_applicable


@pytest.fixture
def require_dra(dra_view: cluster_dra.DraView) -> cluster_dra.DraView:
    """The DRA view, when the NVIDIA DRA driver is installed; not-applicable otherwise."""
    if dra_view.unreadable:
        pytest.skip("cannot read what the DRA checks need (grant get/list on "
                    "resource.k8s.io deviceclasses and resourceslices, pods and "
                    "nvidia.com gpuclusters): " + "; ".join(dra_view.unreadable))
    if not dra_view.driver_present:
        not_applicable(f"{dra_view.absent_reason()}; {dra_view.gates_text()}")
    return dra_view


@pytest.fixture
def dra_nodes(require_dra, gpu_nodes: list[GpuNode],
              allocation_paths: dict[str, str]) -> list[GpuNode]:
    """GPU nodes the DRA driver serves (alone or beside the device plugin)."""
    nodes = [n for n in gpu_nodes if allocation_paths.get(n.name) in (rules.DRA, rules.BOTH)]
    if not nodes:
        not_applicable(f"no GPU node runs the DRA kubelet plugin or has a {dra.DRIVER} pool "
                       f"({len(gpu_nodes)} GPU node(s), paths: "
                       f"{sorted(set(allocation_paths.values())) or 'none'})")
    return nodes


@dataclass(frozen=True)
class Target:
    """A DRA-only node a check may allocate on: its pool, device class and free devices."""

    node: GpuNode
    device_class: str
    free: tuple[str, ...]
    pool: rules.Pool

    def devices(self) -> dict[str, rules.Device]:
        return {d.name: d for d in self.pool.devices}


def _device_type(device_class: str) -> str:
    return dra.TYPE_MIG if device_class == dra.MIG_CLASS.name else dra.TYPE_GPU


@pytest.fixture
def targets(cluster, require_dra, dra_nodes: list[GpuNode], allocation_paths,
            attachments) -> list[Target]:
    """DRA-only nodes with free devices in one complete pool, Ready and without a taint GPU
    pods do not tolerate (one list of claims for every node); fails with the count when none."""
    in_use = cluster_dra.allocated_devices(cluster_dra.list_claims(cluster))
    by_node = require_dra.pools_by_node()
    out, skipped = [], []
    for node in dra_nodes:
        node_pools = by_node.get(node.name, [])
        why = ("also advertises nvidia.com/gpu" if allocation_paths[node.name] == rules.BOTH
               else "not Ready" if not node.ready
               else "tainted " + taints.describe(taints.untolerated_taints(node))
               if taints.untolerated_taints(node)
               else "no single complete pool" if len(node_pools) != 1 or not
               node_pools[0].complete else None)
        if why:
            skipped.append(f"{node.name}: {why}")
            continue
        pool = node_pools[0]
        for device_class in (dra.GPU_CLASS.name, dra.MIG_CLASS.name):
            free = tuple(d.name for d in pool.devices if d.type == _device_type(device_class)
                         and (pool.name, d.name) not in in_use)
            if free:
                out.append(Target(node, device_class, free, pool))
                break
        else:
            skipped.append(f"{node.name}: every device allocated")
    attachments.append(ev.Evidence("dra-targets.txt", "\n".join(
        [f"{t.node.name}: {t.device_class} free {len(t.free)}: {', '.join(t.free)}"
         for t in out] + [f"skipped {s}" for s in skipped])))
    assert out, ("no DRA node to allocate on: " + "; ".join(skipped[:10])
                 + require_dra.class_hint())
    return out

