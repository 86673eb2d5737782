"""``gpuconf certify --driver-version V``: upgrade the driver through the ClusterPolicy, wait for
the driver DaemonSet's OnDelete rollout, run the suites again and compare with the run before.

Changes the cluster (that is the point): it needs the gpuconf-certify role (patch
clusterpolicies) and says what it changed; it does not roll back on its own.
"""

from __future__ import annotations

import json
from pathlib import Path

from conformance.cluster import rollout, views
from conformance.cluster.client import Cluster, check_reachable, connect
from conformance.cluster.waits import wait_until_done
from conformance.common.console import Progress
from conformance.common.errors import NotConverged, UsageError
from conformance.common.vocab import EXIT_FAILED, EXIT_OK
from conformance.nvidia import clusterpolicy, operands
from conformance.nvidia import labels as L
from conformance.options import Options
from conformance.report.certify import compare
from conformance.report.load import load_results
from conformance.run.plan import RunPlan

ROLLOUT_TIMEOUT_S = 45 * 60.0  # the operator's e2e allows 45 min for a driver to install
DRIVER_APP = operands.get_operand("driver").app


def wait_driver_rollout(cluster: Cluster, namespace: str, version: str, timeout: float,
                        progress: Progress) -> None:
    """Every driver pod runs the new version and is Ready, and GFD reports it on the nodes."""
    def pending() -> str | None:
        done, pods = rollout.pods_on_version(cluster, namespace, f"app={DRIVER_APP}", version)
        nodes = views.list_gpu_nodes(cluster)
        labelled = [n for n in nodes if n.label(L.DRIVER_FULL) == version]
        if pods and done == pods and len(labelled) == len(nodes):
            return None
        return (f"{done}/{pods} driver pods on {version}, {len(labelled)}/{len(nodes)} nodes "
                "report it")

    progress(f"driver rollout: waiting up to {timeout:.0f}s for every driver pod to run "
             f"{version} and be Ready, and GFD to report it on every GPU node")
    wait_until_done(f"the driver to roll out to {version}", pending, timeout=timeout,
                    interval=2.0, progress=progress, error=NotConverged,
                    tolerate_api_errors=False)


def certify_driver(options: Options, driver_version: str, tolerance: float,
                   progress: Progress) -> int:
    cluster = connect(options.kubeconfig, options.context)
    check_reachable(cluster)
    policy = views.read_cluster_policy(cluster)
    if policy is None:
        raise UsageError("no ClusterPolicy: --driver-version certifies operator-managed drivers")
    if not policy.driver_managed:
        raise UsageError("the ClusterPolicy has driver.enabled=false (host-installed driver): "
                         "upgrade the hosts, then compare two runs with --baseline/--candidate")
    before = policy.driver_version
    namespace = policy.namespace or options.operator_namespace
    root = Path(options.results)
    root.mkdir(parents=True, exist_ok=True)
    target = options.target or "existing"
    progress(f"baseline run on driver {before}")
    RunPlan(options.replace(target=target, results=str(root / "baseline"))).execute(progress)
    progress(f"patching ClusterPolicy {policy.name} spec.driver.version {before} -> "
             f"{driver_version}")
    cluster.custom.patch_cluster_custom_object(*clusterpolicy.API, policy.name, {
        "spec": {"driver": {"version": driver_version}}})
    wait_driver_rollout(cluster, namespace, driver_version, ROLLOUT_TIMEOUT_S, progress)
    progress(f"candidate run on driver {driver_version}")
    RunPlan(options.replace(target=target, results=str(root / "candidate"),
                            expected_driver_version=driver_version)).execute(progress)
    result = compare(load_results(root / "baseline"), load_results(root / "candidate"),
                     tolerance=tolerance)
    print(result.to_markdown())
    (root / "certification.json").write_text(json.dumps(result.to_dict(), indent=2))
    progress(f"{result.verdict}; the cluster now runs driver {driver_version} (previously "
             f"{before}); results in {root}")
    return EXIT_OK if result.certified else EXIT_FAILED
