"""One real sim cluster for the integration tests (started once, always stopped).

Needs the control-plane binaries (`make setup`); without them the tests skip and say so.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.cluster.client import connect
from conformance.build import binaries
from conformance.sim import cluster as simcluster

REPO = Path(__file__).resolve().parents[2]
SUITES = REPO / "conformance"
SIM_NAME = f"itest-{os.getpid()}"


def pytest_collection_modifyitems(items):
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def sim():
    if binaries.locate().missing():
        pytest.skip("control-plane binaries not built: run `make setup`")
    state = simcluster.up(SIM_NAME, profile="healthy", progress=lambda _m: None)
    try:
        yield state
    finally:
        simcluster.down(SIM_NAME, progress=lambda _m: None)


@pytest.fixture(scope="session")
def sim_cluster(sim):
    return connect(str(sim.kubeconfig))


@pytest.fixture
def sim_state(sim):
    """Play a profile/faults for one test, back to healthy without faults afterwards."""
    def set_state(profile: str = "healthy", faults: list[str] | None = None):
        return simcluster.set_state(SIM_NAME, profile=profile, faults=faults or [])

    yield set_state
    simcluster.set_state(SIM_NAME, profile="healthy", faults=[])


def run_suites(kubeconfig: Path, results: Path, *paths: str, extra: list[str] | None = None,
               timeout: float = 300) -> tuple[int, dict, str]:
    """Run suites in a child pytest against the sim; returns (exit code, results.json, output)."""
    import json

    cmd = [sys.executable, "-m", "pytest", *[str(SUITES / p) for p in paths], "--target=sim",
           f"--kubeconfig={kubeconfig}", f"--gpu-results={results}", "-q",
           "-p", "no:cacheprovider", f"--rootdir={SUITES}", "-c", os.devnull, *(extra or [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    doc = json.loads((results / "results.json").read_text())
    return proc.returncode, doc, proc.stdout + proc.stderr


def verdicts(doc: dict, verdict: str) -> set[str]:
    return {r["id"] for r in doc["requirements"] if r["verdict"] == verdict}
