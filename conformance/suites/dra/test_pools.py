"""DRA / pools: every DRA GPU node publishes one complete pool with one device per GPU.

Checklist (KEP-4381 pool rules; dra-driver-nvidia-gpu bats "slice count equals host GPU count";
nvml-mock e2e "every ResourceSlice has exactly N devices"; issue #719):
- DRA-POOL-001 every node the driver serves (its kubelet plugin runs there, or a pool names it)
  publishes exactly one gpu.nvidia.com pool whose slices at the current generation number
  resourceSliceCount, with devices in it; a Ready plugin with no slice is the rejected-slice
  symptom (a version attribute that is not semver)
- DRA-POOL-002 the pool offers one device per physical GPU (nvidia.com/gpu.count) or per MIG
  device (the MIG labels), and no MIG-enabled GPU whole beside its own MIG devices
"""

from __future__ import annotations

import pytest

from conformance.checks import dra as rules
from conformance.cluster import evidence as ev
from conformance.nvidia import labels as L
from conformance.plugin.api import finding


def _pools_text(view, nodes) -> str:
    by_node, plugins = view.pools_by_node(), view.plugin_by_node()
    lines = []
    for node in nodes:
        plugin = plugins.get(node.name)
        lines.append(f"{node.name}: plugin="
                     + (f"{plugin.namespace}/{plugin.name} ready={plugin.ready} "
                        f"image={plugin.image}" if plugin else "none")
                     + "".join(f"\n  {p.describe()} (stale slices: {p.stale})"
                               for p in by_node.get(node.name, [])))
    return "\n".join(lines)


@pytest.mark.requirement("DRA-POOL-001")
def test_every_dra_node_publishes_a_complete_pool(request, require_dra, dra_nodes, attachments):
    by_node, plugins = require_dra.pools_by_node(), require_dra.plugin_by_node()
    attachments.append(ev.Evidence("pools.txt", _pools_text(require_dra, dra_nodes)))
    problems = [p for node in dra_nodes
                for p in rules.pool_problems(node.name, by_node.get(node.name, []),
                                             plugins.get(node.name))]
    assert not problems, (f"{len(problems)} problem(s) with the pools of {len(dra_nodes)} DRA "
                          "node(s): " + "; ".join(problems[:10]))
    finding(request, f"{len(dra_nodes)} DRA node(s), each with one complete gpu.nvidia.com "
                     f"pool ({sum(len(p.devices) for p in require_dra.pools)} devices)")


@pytest.mark.requirement("DRA-POOL-002")
def test_one_device_per_gpu_or_mig_device(request, require_dra, dra_nodes, attachments):
    by_node = require_dra.pools_by_node()
    problems, checked, unlabelled = [], 0, []
    for node in dra_nodes:
        devices = [d for p in by_node.get(node.name, []) for d in p.devices]
        if not devices:
            continue  # no pool at all is DRA-POOL-001's
        if node.label(L.COUNT) is None:
            unlabelled.append(node.name)
        checked += 1
        problems += rules.device_count_problems(node, devices)
    attachments.append(ev.Evidence("devices.txt", "\n".join(
        f"{n.name}: gpu.count={n.label(L.COUNT)} gpu.product={n.label(L.PRODUCT)} devices="
        + ", ".join(f"{d.name}({d.type})" for p in by_node.get(n.name, []) for d in p.devices)
        for n in dra_nodes)))
    if not checked:
        pytest.skip("not-applicable: no DRA node publishes devices (DRA-POOL-001 says why)")
    assert not problems, "pools do not offer one device per GPU: " + "; ".join(problems[:10])
    finding(request, f"{checked} pool(s) offer one device per GPU or MIG device"
                     + (f" ({len(unlabelled)} node(s) without GFD counts: only checked for "
                        "MIG devices beside their parent)" if unlabelled else ""))
