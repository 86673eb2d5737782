"""The sim as a whole: control plane + GPU nodes + the operator stand-in and its loop."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from conformance.cluster import rollout
from conformance.cluster.client import connect
from conformance.cluster.namespaces import wait_for_default_service_account
from conformance.cluster.waits import wait_until_done
from conformance.common.console import Progress
from conformance.common.errors import NotConverged, UsageError
from conformance.common.processes import pid_alive
from conformance.controlplane.components import ClusterState, ControlPlane, clusters_dir
from conformance.nvidia import device_plugin_chart
from conformance.sim import (
    karpenter,
    kueue,
    metrics_adapter,
    operator_plan,
    standin,
    standin_state,
)
from conformance.sim.faults import validate as validate_faults

STANDIN = "standin"


def up(name: str = "gpuconf", *, profile: str = "healthy", faults: list[str] | None = None,
       apiserver_port: int | None = None, chart: str | None = None,
       nodes: int | None = None, gpus_per_node: int | None = None,
       operator: str = "standin", progress: Progress) -> ClusterState:
    """Start everything; on any failure stop what was started and re-raise."""
    faults = validate_faults(faults or [])
    sim_state = operator_plan.SimState(profile=profile, faults=faults, nodes=nodes,
                                       gpus_per_node=gpus_per_node, operator=operator)
    sim_state.resolve_profile()  # bad names and sizes fail before anything starts
    plane = ControlPlane(name)
    t0 = time.monotonic()
    state = plane.up(apiserver_port=apiserver_port, progress=progress)
    try:
        state.profile = profile
        state.save()
        cluster = connect(str(state.kubeconfig))
        wait_for_default_service_account(cluster, "default")
        standin.reconcile(cluster, sim_state, chart=chart, progress=progress)
        kueue.ensure_process(cluster, state, sim_state, progress)
        karpenter.ensure_process(state, sim_state, progress)
        metrics_adapter.ensure(cluster, state, sim_state, progress)
        _start_standin(state, progress)
        if operator == "standin":
            wait_rolled_out(cluster, sim_state, progress)
        progress(f"sim {name!r} up in {time.monotonic() - t0:.1f}s: profile {profile}"
                 + (f", faults {', '.join(faults)}" if faults else "")
                 + f"; kubeconfig {state.kubeconfig}")
    except BaseException:
        progress("start failed: stopping the sim")
        plane.down(progress=lambda _m: None, keep_logs=True)
        raise
    return state


# 500 nodes x 7 operands take ~70 s on 2 cores, a few nodes ~3 s: the bound grows with the
# nodes, so a rollout that is stuck on a small sim is reported in a minute, not ten.
ROLLOUT_BASE_S = 60.0
ROLLOUT_PER_NODE_S = 1.0


def wait_rolled_out(cluster, sim_state: operator_plan.SimState, progress: Progress) -> None:
    """Until the operator Deployment is available and every operand DaemonSet is rolled out
    as far as the faults allow (a crash-looping or untolerated operand never is); without the
    operator, the device plugin chart's DaemonSets."""
    profile = sim_state.resolve_profile()
    operator = profile.runs_cluster_policy
    ns = (sim_state.operator_namespace if profile.stack != "device-plugin-chart"
          else device_plugin_chart.NAMESPACE)
    timeout = ROLLOUT_BASE_S + ROLLOUT_PER_NODE_S * profile.node_count

    def pending() -> str | None:
        dss = rollout.daemonsets(cluster, ns)
        deps = cluster.apps.list_namespaced_deployment(ns).items
        desired = sum(r.desired for r in dss)
        ready = sum(min(r.ready, r.updated) for r in dss)
        # With faults the operator itself may never become available (operator-unavailable);
        # its Deployment must still have taken the faulty template.
        dep_ok = (deps or not operator) and all(rollout.deployment_available(d) or (
            sim_state.faults and d.status.observed_generation == d.metadata.generation)
            for d in deps)
        stuck = [r.name for r in dss if not r.templated] + [
            d.metadata.name for d in deps if not dep_ok]
        # With faults some operands never get Ready, but every template must have rolled out.
        settled = desired and not stuck and (ready == desired or sim_state.faults)
        if dep_ok and settled:
            return None
        return (f"{ready}/{desired} pods ready in {len(dss)} DaemonSets; not settled: "
                f"{', '.join(stuck) or 'pods not ready'}")

    try:
        wait_until_done("the sim's operands to settle", pending, timeout=timeout, interval=1.0,
                        progress=progress, error=NotConverged, tolerate_api_errors=False)
    except NotConverged as exc:
        raise NotConverged(f"{exc}: see the logs under {clusters_dir()}") from None


def _start_standin(state: ClusterState, progress: Progress) -> None:
    log = Path(state.folder) / "logs" / "standin.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "conformance.sim.loop", f"--kubeconfig={state.kubeconfig}"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    state.pids[STANDIN] = proc.pid
    state.binaries[STANDIN] = sys.executable
    state.save()
    progress("operator stand-in controller loop started")


def down(name: str = "gpuconf", *, progress: Progress) -> bool:
    return ControlPlane(name).down(progress=progress)


def running(name: str) -> ClusterState | None:
    state = ControlPlane(name).state()
    if state and state.pids and all(pid_alive(p) for p in state.pids.values()):
        return state
    return None


def ensure_running(name: str, profile: str, faults: list[str],
                   progress: Progress) -> tuple[Path, bool]:
    """The kubeconfig of a running sim, starting one (and saying so) when none runs."""
    state = running(name)
    if state is not None:
        return state.kubeconfig, False
    state = up(name, profile=profile, faults=faults, progress=progress)
    return state.kubeconfig, True


def set_state(name: str, *, profile: str | None = None, faults: list[str] | None = None,
              progress: Progress) -> operator_plan.SimState:
    """Change the profile/faults of a running sim in place (no restart)."""
    state = running(name)
    if state is None:
        raise UsageError(f"sim cluster {name!r} is not running: `gpuconf sim up` first")
    cluster = connect(str(state.kubeconfig))
    current = (standin_state.load_state(cluster)
               or operator_plan.SimState(profile=state.profile or "healthy"))
    new = operator_plan.SimState(profile=profile or current.profile,
                                 faults=validate_faults(faults if faults is not None
                                                        else current.faults),
                                 operator_namespace=current.operator_namespace,
                                 operator=current.operator,
                                 nodes=None if profile else current.nodes,
                                 gpus_per_node=None if profile else current.gpus_per_node)
    standin.reconcile(cluster, new, progress=progress)
    kueue.ensure_process(cluster, state, new, progress)
    karpenter.ensure_process(state, new, progress)
    metrics_adapter.ensure(cluster, state, new, progress)
    standin_state.wait_for_a_full_pass(cluster, progress)
    if new.operator == "standin":
        wait_rolled_out(cluster, new, progress)
    state.profile = new.profile
    state.save()
    return new
