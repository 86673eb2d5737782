"""``gpuconf certify --driver-version V``: upgrade the driver through the ClusterPolicy, wait for
the driver DaemonSet's OnDelete rollout, run the suite again and compare with the run before.

Changes the cluster (that is the point): it needs the gpuconf-certify role (patch
clusterpolicies) and says what it changed; it does not roll back on its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conformance import labels as L
from conformance.checks.operands import CLUSTER_POLICY, pod_ready, read_cluster_policy
from conformance.cluster.client import check_reachable, connect
from conformance.errors import UsageError

ROLLOUT_TIMEOUT_S = 45 * 60.0  # the operator's e2e allows 45 min for a driver to install
DRIVER_APP = "nvidia-driver-daemonset"
SUITES = ("stack", "scheduling", "sharing")
SUITE_DIR = Path(__file__).resolve().parent


def _say(msg: str) -> None:
    print(f"[gpuconf certify {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _suite(args, results: Path, expected: str | None) -> int:
    kubeconfig, context = args.kubeconfig, args.context
    cmd = [sys.executable, "-m", "pytest", *[str(SUITE_DIR / s) for s in SUITES],
           f"--target={args.target or 'existing'}", f"--gpu-results={results}", "-q",
           "-p", "no:cacheprovider",
           f"--rootdir={SUITE_DIR}", "-c", os.devnull]
    if kubeconfig:
        cmd.append(f"--kubeconfig={kubeconfig}")
    if context:
        cmd.append(f"--context={context}")
    if expected:
        cmd.append(f"--expected-driver-version={expected}")
    return subprocess.run(cmd).returncode


def wait_driver_rollout(cluster, namespace: str, version: str, timeout: float) -> None:
    """Every driver pod runs the new version and is Ready, and GFD reports it on the nodes."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        pods = cluster.core.list_namespaced_pod(namespace,
                                                label_selector=f"app={DRIVER_APP}").items
        done = [p for p in pods if p.spec.containers[0].image.endswith(f":{version}")
                and pod_ready(p)]
        nodes = cluster.core.list_node(label_selector=f"{L.GPU_PRESENT}=true").items
        labelled = [n for n in nodes if (n.metadata.labels or {}).get(L.DRIVER_FULL) == version]
        msg = (f"driver rollout: {len(done)}/{len(pods)} driver pods on {version}, "
               f"{len(labelled)}/{len(nodes)} nodes report it")
        if msg != last:
            _say(msg)
            last = msg
        if pods and len(done) == len(pods) and len(labelled) == len(nodes):
            return
        time.sleep(2)
    raise UsageError(f"the driver did not roll out to {version} within {timeout:.0f}s ({last})")


def certify_driver(args) -> int:
    from reports.certify import compare
    from reports.load import load_results

    cluster = connect(args.kubeconfig, args.context)
    check_reachable(cluster)
    policy = read_cluster_policy(cluster)
    if policy is None:
        raise UsageError("no ClusterPolicy: --driver-version certifies operator-managed drivers")
    if not (policy.get("spec", {}).get("driver", {}) or {}).get("enabled", True):
        raise UsageError("the ClusterPolicy has driver.enabled=false (host-installed driver): "
                         "upgrade the hosts, then compare two runs with --baseline/--candidate")
    before = policy["spec"]["driver"].get("version")
    namespace = (policy.get("status") or {}).get("namespace") or "gpu-operator"
    root = Path(args.results)
    root.mkdir(parents=True, exist_ok=True)
    _say(f"baseline run on driver {before}")
    _suite(args, root / "baseline", None)
    _say(f"patching ClusterPolicy {policy['metadata']['name']} spec.driver.version "
         f"{before} -> {args.driver_version}")
    cluster.custom.patch_cluster_custom_object(*CLUSTER_POLICY, policy["metadata"]["name"],
                                               {"spec": {"driver": {"version":
                                                                    args.driver_version}}})
    wait_driver_rollout(cluster, namespace, args.driver_version, ROLLOUT_TIMEOUT_S)
    _say(f"candidate run on driver {args.driver_version}")
    _suite(args, root / "candidate", args.driver_version)
    result = compare(load_results(root / "baseline"), load_results(root / "candidate"),
                     tolerance=args.tolerance)
    print(result.to_markdown())
    (root / "certification.json").write_text(json.dumps(result.to_dict(), indent=2))
    _say(f"{result.verdict}; the cluster now runs driver {args.driver_version} (previously "
         f"{before}); results in {root}")
    return 0 if result.certified else 1
