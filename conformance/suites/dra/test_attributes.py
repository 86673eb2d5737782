"""DRA / attributes: what each device says agrees with the node, and with its driver release.

Checklist (dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/deviceinfo.go, mig.go, bats attribute
lists; ai-conformance DriverAndRuntimeCompatibility compares versions at shared precision):
- DRA-ATTR-001 productName (as GFD sanitises it) = nvidia.com/gpu.product; driverVersion
  (semver: 580.95.05 is published 580.95.5) = GFD's cuda.driver-version and
  --expected-driver-version; cudaDriverVersion = cuda.runtime-version; cudaComputeCapability =
  gpu.compute.major.minor; memory = gpu.memory (MIG: the profile's memory label)
- DRA-ATTR-002 each device carries the attributes its plugin's release publishes, none that the
  release dropped (index and minor in v25.8, pcieBusID in v25.12), version attributes semver;
  no hard-coded list: the release comes from the kubelet plugin's image on that node
"""

from __future__ import annotations

import pytest

from conformance.checks import dra as rules
from conformance.cluster import evidence as ev
from conformance.nvidia import dra
from conformance.plugin.api import finding


def _devices(view, node):
    return [d for p in view.pools_by_node().get(node.name, []) for d in p.devices]


def _attributes_text(view, nodes) -> str:
    lines = []
    for node in nodes:
        devices = _devices(view, node)
        if devices:
            d = devices[0]
            lines.append(f"{node.name} ({len(devices)} devices), {d.name}: "
                         + ", ".join(f"{k}={v}" for k, v in sorted(d.attributes.items()))
                         + f"; capacity {dict(d.capacity)}")
    return "\n".join(lines)


@pytest.mark.requirement("DRA-ATTR-001")
def test_attributes_agree_with_the_node(request, require_dra, dra_nodes, gpu_env, attachments):
    expected = gpu_env.options.expected_driver_version
    attachments.append(ev.Evidence("attributes.txt", _attributes_text(require_dra, dra_nodes)))
    problems, checked = [], 0
    for node in dra_nodes:
        devices = _devices(require_dra, node)
        if devices:
            checked += 1
            problems += rules.attribute_problems(node, devices, expected)
    if not checked:
        pytest.skip("not-applicable: no DRA node publishes devices (DRA-POOL-001 says why)")
    assert not problems, (f"{len(problems)} device attribute(s) disagree with the node's GFD "
                          "labels" + (" or the expected driver" if expected else "") + ": "
                          + "; ".join(problems[:10]))
    finding(request, f"attributes of {checked} node(s) agree with GFD"
                     + (f" and driver {expected}" if expected else ""))


@pytest.mark.requirement("DRA-ATTR-002")
def test_attributes_are_those_of_the_driver_release(request, require_dra, dra_nodes, attachments):
    plugins = require_dra.plugin_by_node()
    problems, releases = [], set()
    for node in dra_nodes:
        plugin = plugins.get(node.name)
        release = plugin.release if plugin else None
        releases.add(dra.release_text(release))
        problems += rules.attribute_set_problems(node.name, _devices(require_dra, node), release)
    attachments.append(ev.Evidence("attributes.txt", _attributes_text(require_dra, dra_nodes)))
    attachments.append(ev.Evidence("releases.txt", "\n".join(
        f"{n}: {p.image} -> {dra.release_text(p.release)}" for n, p in sorted(plugins.items()))))
    assert not problems, ("devices carry other attributes than their driver release publishes: "
                          + "; ".join(problems[:10]))
    finding(request, f"attribute sets match driver release(s) {', '.join(sorted(releases))}")
