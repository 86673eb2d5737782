"""What the integration and node tests share: running the suites in a child pytest against a
cluster already up, and holding a run to exactly the requirements a fault must fail.

Test modules import these from here, never from a conftest or from another test module.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

from conformance.cluster.namespaces import leftover_namespaces
from conformance.options import Options
from conformance.run.plan import RunPlan
from conformance.sim import profiles
from conformance.sim.faults import Fault
from tests import forkserver

REPO = Path(__file__).resolve().parents[1]
# the integration tests' sim: one per pytest process (each xdist worker has its own)
SIM_NAME = f"itest-{os.getpid()}"
# the DRA profiles the suites run on (dra-large is the scale measurement, not a test shape)
DRA_PROFILES = tuple(p for p, prof in profiles.PROFILES.items()
                     if any(g.allocation == "dra" for g in prof.gpu_groups)
                     and prof.gpu_node_count < 100)


def run_suites(kubeconfig: Path, results: Path, *paths: str, extra: list[str] | None = None,
               timeout: float = 300, target: str = "sim") -> tuple[int, dict, str]:
    """Run suites (``stack`` or ``stack/test_x.py``) in a child pytest built by the run plan
    (forked from :mod:`tests.forkserver`), against a cluster already up; returns (exit code,
    results.json, output)."""
    plan = RunPlan(Options(results=str(results)))
    cmd = plan.pytest_command(target=target, kubeconfig=str(kubeconfig), paths=list(paths))
    try:
        proc = forkserver.run([*cmd, *(extra or [])], timeout=timeout)
    except subprocess.TimeoutExpired as exc:  # what it was doing is at the end of its output
        raise AssertionError(f"the suite run did not end in {timeout:.0f} s (interrupted); the "
                             f"end of its output:\n{(exc.output or '')[-3000:]}") from None
    doc = json.loads((results / "results.json").read_text())
    return proc.returncode, doc, proc.stdout


def verdicts(doc: dict, verdict: str) -> set[str]:
    return {r["id"] for r in doc["requirements"] if r["verdict"] == verdict}


def cncf_item(doc: dict, item_id: str) -> dict:
    """The run's CNCF checklist item ``item_id``, as the report rolls it up."""
    from conformance.report import cncf

    return next(i for i in cncf.rollup(doc["requirements"])["items"] if i["id"] == item_id)


def seconds_took(doc: dict, ids: set[str]) -> float:
    """The summed durations of the checks of requirements ``ids`` in a run."""
    return sum(t["duration_s"] for r in doc["requirements"] if r["id"] in ids
               for t in r["tests"])


def run_with_fault(sim, sim_cluster, sim_state, tmp_path: Path, fault: Fault) -> None:
    """Play ``fault`` on its profile, run its suites and hold the run to what the catalog says
    it fails (:func:`assert_fails_exactly`)."""
    sim_state(fault.profile, [fault.name])
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, *fault.suites)
    assert_fails_exactly(fault.name, code, doc, out, set(fault.fails), fault.word, sim_cluster)


def assert_fails_exactly(fault: str, code: int, doc: dict, out: str, must_fail: set[str],
                         word: str, cluster, *, namespaces_left: bool = False) -> None:
    """Exactly ``must_fail`` failed (exit 1; exit 0 when nothing must), the failures' messages
    or diagnoses name ``word``, each attached evidence, and no test namespace is left (unless
    ``namespaces_left``: a fault that stalls namespace deletion, checked by its caller)."""
    failed = verdicts(doc, "fail")
    assert failed == must_fail, (f"{fault}: expected exactly {sorted(must_fail)} to fail; "
                                 f"missing {sorted(must_fail - failed)}, unexpected "
                                 f"{sorted(failed - must_fail)}\n{out[-2000:]}")
    assert code == (1 if must_fail else 0), out[-2000:]
    rows = {r["id"]: r for r in doc["requirements"]}
    diagnoses = " ".join(rows[i]["diagnosis"] + " " + rows[i]["message"] for i in must_fail)
    assert word.lower() in diagnoses.lower(), diagnoses
    bare = sorted(i for i in must_fail if not rows[i]["evidence"])
    assert not bare, f"{fault}: failing checks attached no evidence: {bare}"
    if not namespaces_left:
        assert leftover_namespaces(cluster) == [], "failing checks left test namespaces behind"


@contextlib.contextmanager
def disguised_as_real(cluster):
    """The sim's GPU nodes without the marks that tell KWOK nodes apart (its annotation, its
    kubelet version): a real cluster whose kubelets cannot serve logs, as the suite sees it
    (pods run and end, their logs answer 500). Restored afterwards; yields the node names."""
    from conformance.checks.simulated import KWOK_ANNOTATION
    from conformance.cluster.views import list_gpu_nodes

    names = [n.name for n in list_gpu_nodes(cluster)]
    versions = {n: cluster.core.read_node(n).status.node_info.kubelet_version for n in names}
    try:
        for name in names:
            cluster.core.patch_node(name, {"metadata": {"annotations": {KWOK_ANNOTATION: None}}})
            cluster.core.patch_node_status(
                name, {"status": {"nodeInfo": {"kubeletVersion": "v1.36.3"}}})
        yield names
    finally:
        for name in names:
            cluster.core.patch_node(name, {"metadata": {"annotations": {KWOK_ANNOTATION: "fake"}}})
            cluster.core.patch_node_status(
                name, {"status": {"nodeInfo": {"kubeletVersion": versions[name]}}})
