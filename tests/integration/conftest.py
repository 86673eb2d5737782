"""One real sim cluster for the integration tests (started once, always stopped).

Needs the control-plane binaries (`make setup`); without them the tests skip and say so.
"""

from __future__ import annotations

import pytest

from conformance.binaries import binaries
from conformance.cluster.client import connect
from conformance.common.console import quiet
from conformance.sim import cluster as simcluster
from conformance.sim.faults import BY_NAME
from tests.helpers import SIM_NAME

HEALTHY = "healthy"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items):
    for item in items:
        if "integration" not in str(item.fspath):
            continue
        item.add_marker(pytest.mark.integration)
        # The tests that play one profile other than healthy run on one worker, one after the
        # other (``--dist loadgroup``): its sim changes profile once for them all. A change of
        # profile costs a sim seconds of CPU (Kueue, Karpenter, the metrics adapter or the
        # DRA driver started or stopped, operand pods replaced; a change of faults far less).
        # Counted on a CI run's test durations, xdist handing the tests out as it does: 89
        # changes of profile in the integration tests before these groups, 20 with them.
        # Measured, the fault matrix, DRA and sim profile tests (109) on 4 workers, two pairs
        # on the quiet machine: 246 and 233 s, 403 and 393 CPU-s before; 212 and 182 s, 357
        # and 296 CPU-s with the groups.
        profile = _profile_played(item)
        if profile != HEALTHY:
            item.add_marker(pytest.mark.xdist_group(f"profile-{profile}"))


def _profile_played(item) -> str:
    """The profile an integration test names in its parameters (a ``profile``, or a
    ``fault`` that shows on its profile); every other test: healthy."""
    params = item.callspec.params if hasattr(item, "callspec") else {}
    profile = params.get("profile")
    fault = params.get("fault")
    if isinstance(fault, str) and fault in BY_NAME:
        profile = BY_NAME[fault].profile
    elif fault is not None and hasattr(fault, "profile"):
        profile = fault.profile
    return profile if isinstance(profile, str) else HEALTHY


@pytest.fixture(scope="session")
def sim():
    if binaries.locate().missing():
        pytest.skip("control-plane binaries not built: run `make setup`")
    state = simcluster.up(SIM_NAME, profile=HEALTHY, progress=quiet)
    try:
        yield state
    finally:
        simcluster.down(SIM_NAME, progress=quiet)


@pytest.fixture(scope="session")
def sim_cluster(sim):
    return connect(str(sim.kubeconfig))


# Whether a test of this process played a profile/faults on its sim and left them there.
_played = {"left": False}


@pytest.fixture
def sim_state(sim):
    """Play a profile/faults for one test; every test that takes this fixture plays its state
    before it reads the sim. Left as it is afterwards: the next such test goes to its own state
    in one change, not two (undoing each state was ~170 changes of 1-3 s in a run, a tenth of
    the integration tests' time), and a test without it gets the healthy sim back first
    (``_healthy_sim_for_the_others``)."""
    def set_state(profile: str = HEALTHY, faults: list[str] | None = None):
        _played["left"] = True
        return simcluster.set_state(SIM_NAME, profile=profile, faults=faults or [], progress=quiet)

    return set_state


@pytest.fixture(autouse=True)
def _healthy_sim_for_the_others(request):
    """A test that reads the sim without playing a state finds it healthy, without faults."""
    if "sim" not in request.fixturenames or "sim_state" in request.fixturenames:
        return
    if _played["left"]:
        request.getfixturevalue("sim")
        simcluster.set_state(SIM_NAME, profile=HEALTHY, faults=[], progress=quiet)
        _played["left"] = False
