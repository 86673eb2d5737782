"""Faults a real cluster throws: the API server restarting mid-run, parallel runs."""

from __future__ import annotations

import json
import subprocess
import time

from conformance.cluster.namespaces import leftover_namespaces
from conformance.common.console import quiet
from conformance.controlplane.components import ControlPlane
from conformance.options import Options
from conformance.run.plan import RunPlan
from tests.helpers import SIM_NAME, run_suites, verdicts

OUTAGE_S = 4.0


def _suite_cmd(kubeconfig, results) -> list[str]:
    plan = RunPlan(Options(results=str(results), suite=["scheduling", "stack"]))
    return plan.pytest_command(target="sim", kubeconfig=str(kubeconfig))


def test_api_server_restart_mid_run(sim, sim_cluster, tmp_path):
    plane = ControlPlane(SIM_NAME)
    proc = subprocess.Popen(_suite_cmd(sim.kubeconfig, tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not leftover_namespaces(sim_cluster) and time.monotonic() < deadline:
        time.sleep(0.1)
    state = plane.state()
    plane.stop_component(state, "kube-apiserver")
    time.sleep(OUTAGE_S)
    plane.start_component(state, "kube-apiserver", progress=quiet)
    out, _ = proc.communicate(timeout=400)
    doc = json.loads((tmp_path / "results.json").read_text())
    # The client retries through the outage: the run is as good as one without it.
    assert verdicts(doc, "fail") == set(), out[-3000:]
    assert proc.returncode == 0, out[-3000:]
    assert len(verdicts(doc, "pass")) >= 15, out[-3000:]
    assert leftover_namespaces(sim_cluster) == [], "the restart left test namespaces behind"
    print(f"\nAPI server outage of {OUTAGE_S}s mid-run: exit {proc.returncode}, "
          f"{len(verdicts(doc, 'pass'))} passed, {len(verdicts(doc, 'fail'))} failed")


def test_xdist_workers_do_not_collide(sim, tmp_path):
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, "stack", "scheduling",
                                extra=["-n", "2"])
    assert code == 0, out[-3000:]
    assert verdicts(doc, "fail") == set() and len(verdicts(doc, "pass")) >= 20


def test_two_runs_at_once_do_not_collide(sim, sim_cluster, tmp_path):
    procs = [subprocess.Popen(_suite_cmd(sim.kubeconfig, tmp_path / f"run{i}"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(2)]
    outs = [p.communicate(timeout=400)[0] for p in procs]
    for p, out in zip(procs, outs, strict=True):
        assert p.returncode == 0, out[-3000:]
    ids = {json.loads((tmp_path / f"run{i}" / "results.json").read_text())["run"]["id"]
           for i in range(2)}
    assert len(ids) == 2
    assert leftover_namespaces(sim_cluster) == []
