"""Installing the GPU Operator chart with Helm as part of a run, and removing what was installed.

An operator already in the cluster is detected and left alone. NVIDIA's Helm repository is the
default source; ``--operator-chart PATH`` installs from a local chart (offline).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from conformance.binaries import binaries
from conformance.cluster import namespaces, rollout, views
from conformance.cluster.client import Cluster, connect, read_or_none
from conformance.cluster.waits import wait_until_done
from conformance.common.console import Progress
from conformance.common.errors import ComponentFailed, NotConverged, UsageError
from conformance.nvidia import labels as L
from conformance.options import Options

NVIDIA_REPO = "https://helm.ngc.nvidia.com/nvidia"
RELEASE = "gpu-operator"
INSTALL_TIMEOUT_S = 900.0   # image pulls of every operand on a fresh GPU node
UNINSTALL_TIMEOUT_S = 300.0
# kind and the sim run no driver or toolkit of their own (NVIDIA's kind demo, nvml-mock overlay)
SIM_VALUES = ("driver.enabled=false", "toolkit.enabled=false")

def helm_binary() -> str:
    built = binaries.locate().helm
    if built.is_file():
        return str(built)
    found = shutil.which("helm")
    if found is None:
        raise UsageError("helm not found: run `gpuconf sim build helm` or install Helm 3")
    return found


def existing_operator(cluster: Cluster) -> str | None:
    deps = cluster.apps.list_deployment_for_all_namespaces(label_selector=L.OPERATOR_SELECTOR)
    return deps.items[0].metadata.namespace if deps.items else None


@dataclass
class InstalledOperator:
    kubeconfig: str
    namespace: str
    created_namespace: bool
    release: str = RELEASE

    def uninstall(self, progress: Progress) -> None:
        progress(f"uninstalling Helm release {self.release} from {self.namespace}")
        subprocess.run([helm_binary(), "uninstall", self.release, "-n", self.namespace,
                        f"--kubeconfig={self.kubeconfig}", "--wait",
                        f"--timeout={int(UNINSTALL_TIMEOUT_S)}s"],
                       check=False, capture_output=True, text=True)
        if self.created_namespace:
            progress(f"deleting namespace {self.namespace} (operands included)")
            namespaces.delete_namespace(connect(self.kubeconfig), self.namespace, wait=True,
                                        timeout=UNINSTALL_TIMEOUT_S)


def install_operator(args: Options, kubeconfig: str | None, target: str,
                     progress: Progress) -> InstalledOperator | None:
    """Install the chart unless an operator runs already; what was installed, or None."""
    if args.operator_chart and not Path(args.operator_chart).is_dir():
        raise UsageError(f"--operator-chart {args.operator_chart}: no such chart folder")
    cluster = connect(kubeconfig, args.context)
    found = existing_operator(cluster)
    if found:
        progress(f"a GPU Operator is already installed (namespace {found}): left alone")
        return None
    ns = args.operator_namespace
    created = read_or_none(cluster.core.read_namespace, ns) is None
    cmd = [helm_binary(), "install", RELEASE]
    if args.operator_chart:
        cmd.append(args.operator_chart)
    else:
        cmd += ["gpu-operator", "--repo", NVIDIA_REPO]
    if args.operator_version:
        cmd += ["--version", args.operator_version]
    cmd += ["-n", ns, "--create-namespace", f"--kubeconfig={kubeconfig or ''}"]
    if target in ("sim", "kind"):
        for value in SIM_VALUES:
            cmd += ["--set", value]
    if args.operator_values:
        cmd += ["--values", args.operator_values]
    for value in args.set_values:
        cmd += ["--set", value]
    if kubeconfig is None:
        cmd.remove("--kubeconfig=")
    progress(f"installing the GPU Operator chart ({args.operator_chart or NVIDIA_REPO}) into {ns}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ComponentFailed("helm install", f"exit status {proc.returncode}",
                              proc.stderr.strip()[-3000:])
    installed = InstalledOperator(kubeconfig or "", ns, created)
    try:
        wait_available(cluster, ns, progress)
    except BaseException:
        installed.uninstall(progress)
        raise
    return installed


def wait_available(cluster: Cluster, ns: str, progress: Progress) -> None:
    """The operator's Deployment available, then its ClusterPolicy reconciled once (a state
    set, whichever): the suites read what the operator made of it, not the chart's bare
    object (seen under load: the suites ran before the first reconcile, and every operand
    DaemonSet was "not found"). A chart without a ClusterPolicy is not waited for."""
    try:
        wait_until_done(f"the GPU Operator to become available in {ns}",
                        lambda: rollout.deployments_pending(cluster, ns),
                        timeout=INSTALL_TIMEOUT_S, interval=2.0, progress=progress,
                        error=NotConverged, tolerate_api_errors=False)
        wait_until_done("the GPU Operator to reconcile its ClusterPolicy",
                        lambda: policy_unreconciled(cluster), timeout=INSTALL_TIMEOUT_S,
                        interval=2.0, progress=progress, error=NotConverged)
    except NotConverged as exc:
        raise NotConverged(f"{exc}: see `kubectl -n {ns} get pods,events`") from None


def policy_unreconciled(cluster: Cluster) -> str | None:
    """What is still missing before the operator has reconciled the ClusterPolicy once; None
    when it has, or when the chart made none."""
    policy = views.read_cluster_policy(cluster)
    if policy is None or policy.state:
        return None
    return f"ClusterPolicy {policy.name} has no status.state yet"
