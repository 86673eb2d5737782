"""Stack / driver: the nodes run the driver version the cluster is meant to run.

Checklist:
- STACK-DRV-002 the driver version from GFD labels is --expected-driver-version (or at least
  --min-driver-version); with neither, the ClusterPolicy's driver.version when the operator
  manages the driver, and in any case one version across all GPU nodes
- STACK-DRV-003 (real GPUs) NVML inside a pod reports the same version: see test_node_gpu.py
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from conformance.cluster import evidence as ev
from conformance.nvidia import driver
from conformance.nvidia import labels as L
from conformance.plugin.api import not_applicable


def _diagnose(policy_managed: bool) -> str:
    if policy_managed:
        return ("the operator manages the driver: a host-installed driver shadows the "
                "containerized one, or the driver DaemonSet's OnDelete rollout is not finished")
    return "host-installed drivers differ between nodes (driver.enabled=false)"


@pytest.mark.requirement("STACK-DRV-002")
def test_nodes_run_expected_driver_version(require_gpu_nodes, cluster_policy, gpu_env, attachments):
    by_version: dict[str, list[str]] = defaultdict(list)
    for node in require_gpu_nodes:
        by_version[driver.version_from_labels(node.labels) or "(no label)"].append(node.name)
    attachments.append(ev.Evidence("driver-versions.txt", "\n".join(
        f"{v}: {len(n)} node(s): {', '.join(n[:20])}" for v, n in by_version.items())))
    unlabelled = by_version.pop("(no label)", [])
    if not by_version:
        not_applicable(f"no GPU node carries {L.DRIVER_FULL} (GFD labels missing: see "
                       "STACK-GFD-002)")
    managed = bool(cluster_policy and cluster_policy.driver_managed)
    opts = gpu_env.options
    policy_version = cluster_policy.driver_version if cluster_policy else None
    expected = opts.expected_driver_version or policy_version
    if expected:
        wrong = {v: n for v, n in by_version.items() if v != expected}
        assert not wrong, (
            f"expected driver {expected}"
            + (" (ClusterPolicy driver.version)" if not opts.expected_driver_version else "")
            + "; found " + "; ".join(f"{v} on {', '.join(n[:5])}" for v, n in wrong.items())
            + f": {_diagnose(managed)}")
    if opts.min_driver_version:
        old = {v: n for v, n in by_version.items()
               if not driver.at_least(v, opts.min_driver_version)}
        assert not old, (f"driver older than {opts.min_driver_version}: "
                         + "; ".join(f"{v} on {', '.join(n[:5])}" for v, n in old.items()))
    assert len(by_version) == 1, (
        f"GPU nodes run {len(by_version)} driver versions: "
        + "; ".join(f"{v} on {len(n)} node(s) ({', '.join(n[:3])})"
                    for v, n in sorted(by_version.items())) + f": {_diagnose(managed)}")
    if unlabelled:
        pytest.fail(f"{len(unlabelled)} GPU node(s) report no driver version label: "
                    f"{', '.join(unlabelled[:10])}")
