"""One real sim cluster for the integration tests (started once, always stopped).

Needs the control-plane binaries (`make setup`); without them the tests skip and say so.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conformance.build import binaries
from conformance.cluster.client import connect
from conformance.common.console import quiet
from conformance.options import Options
from conformance.run.plan import RunPlan
from conformance.sim import cluster as simcluster

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
    import json

    plan = RunPlan(Options(results=str(results)))
    cmd = plan.pytest_command(target=target, kubeconfig=str(kubeconfig), paths=list(paths))
    proc = subprocess.run([*cmd, *(extra or [])], capture_output=True, text=True,
                          timeout=timeout)
    doc = json.loads((results / "results.json").read_text())
    return proc.returncode, doc, proc.stdout + proc.stderr


def verdicts(doc: dict, verdict: str) -> set[str]:
    return {r["id"] for r in doc["requirements"] if r["verdict"] == verdict}
