"""One real sim cluster for the integration tests (started once, always stopped).

Needs the control-plane binaries (`make setup`); without them the tests skip and say so.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conformance.binaries import binaries
from conformance.cluster.client import connect
from conformance.cluster.namespaces import leftover_namespaces
from conformance.common.console import quiet
from conformance.options import Options
from conformance.run.plan import RunPlan
from conformance.sim import cluster as simcluster
from conformance.sim.faults import BY_NAME

REPO = Path(__file__).resolve().parents[2]
SIM_NAME = f"itest-{os.getpid()}"


def pytest_collection_modifyitems(items):
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def sim():
    if binaries.locate().missing():
        pytest.skip("control-plane binaries not built: run `make setup`")
    state = simcluster.up(SIM_NAME, profile="healthy", progress=quiet)
    try:
        yield state
    finally:
        simcluster.down(SIM_NAME, progress=quiet)


@pytest.fixture(scope="session")
def sim_cluster(sim):
    return connect(str(sim.kubeconfig))


@pytest.fixture
def sim_state(sim):
    """Play a profile/faults for one test, back to healthy without faults afterwards."""
    def set_state(profile: str = "healthy", faults: list[str] | None = None):
        return simcluster.set_state(SIM_NAME, profile=profile, faults=faults or [], progress=quiet)

    yield set_state
    simcluster.set_state(SIM_NAME, profile="healthy", faults=[], progress=quiet)


def run_suites(kubeconfig: Path, results: Path, *paths: str, extra: list[str] | None = None,
               timeout: float = 300, target: str = "sim") -> tuple[int, dict, str]:
    """Run suites (``stack`` or ``stack/test_x.py``) in a child pytest built by the run plan,
    against a cluster already up; returns (exit code, results.json, output)."""
    plan = RunPlan(Options(results=str(results)))
    cmd = plan.pytest_command(target=target, kubeconfig=str(kubeconfig), paths=list(paths))
    proc = subprocess.run([*cmd, *(extra or [])], capture_output=True, text=True,
                          timeout=timeout)
    doc = json.loads((results / "results.json").read_text())
    return proc.returncode, doc, proc.stdout + proc.stderr


def verdicts(doc: dict, verdict: str) -> set[str]:
    return {r["id"] for r in doc["requirements"] if r["verdict"] == verdict}


def run_with_fault(sim, sim_cluster, sim_state, tmp_path: Path, suites, fault: str,
                   must_fail: set[str], word: str) -> None:
    """Play ``fault`` on its profile, run ``suites`` and hold the run to ``must_fail``
    (:func:`assert_fails_exactly`)."""
    sim_state(BY_NAME[fault].profile, [fault])
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, *suites)
    assert_fails_exactly(fault, code, doc, out, must_fail, word, sim_cluster)


def assert_fails_exactly(fault: str, code: int, doc: dict, out: str, must_fail: set[str],
                         word: str, cluster) -> None:
    """Exactly ``must_fail`` failed (exit 1; exit 0 when nothing must), the failures' messages
    or diagnoses name ``word``, each attached evidence, and no test namespace is left."""
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
    assert leftover_namespaces(cluster) == [], "failing checks left test namespaces behind"
