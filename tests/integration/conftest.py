"""One real sim cluster for the integration tests (started once, always stopped).

Needs the control-plane binaries (`make setup`); without them the tests skip and say so.
"""

from __future__ import annotations

import pytest

from conformance.binaries import binaries
from conformance.cluster.client import connect
from conformance.common.console import quiet
from conformance.sim import cluster as simcluster
from tests.helpers import SIM_NAME


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
