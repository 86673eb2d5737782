"""advanced_inference_ingress on the sim's real API server: the Gateway API Inference
Extension's own InferencePool CRD (v1.6.2, as the real node installs it) makes INF-GW-003 pass;
the same CRD installed without its schema (a broken install: anything admitted) fails exactly
INF-GW-003; without the CRD both checks are not applicable. INF-GW-004 is not run on the sim
(KWOK pods serve no HTTP); on the real node: tests/node/test_node_gateway.py.

The CRD is installed on this worker's sim for one test and deleted after it.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator

import yaml

from conformance.checks import inference_pool as ip
from conformance.cluster.client import Cluster, NotFound, already_done
from conformance.cluster.waits import wait_for
from conformance.node.gateway import INFERENCE_EXTENSION_CRDS
from tests.helpers import assert_fails_exactly, run_suites, verdicts

SUITE = "inference/test_inference_pool.py"
CRD = yaml.safe_load(next(INFERENCE_EXTENSION_CRDS.glob("*inferencepools.yaml")).read_text())
SERVED_TIMEOUT_S = 30.0  # discovery has a new CRD's group within a second or two


def _schemaless(crd: dict) -> dict:
    """The CRD as a broken install leaves it: v1 served, but no schema (anything admitted)."""
    broken = copy.deepcopy(crd)
    for version in broken["spec"]["versions"]:
        version["schema"] = {"openAPIV3Schema": {"type": "object",
                                                 "x-kubernetes-preserve-unknown-fields": True}}
    return broken


@contextlib.contextmanager
def _crd_installed(c: Cluster, crd: dict) -> Iterator[None]:
    name = crd["metadata"]["name"]
    c.apiext.create_custom_resource_definition(crd)
    try:
        wait_for(f"{name} to be served", lambda: _served(c), timeout=SERVED_TIMEOUT_S)
        yield
    finally:
        with already_done(NotFound):
            c.apiext.delete_custom_resource_definition(name)
        wait_for(f"{name} to be gone", lambda: not _served(c), timeout=SERVED_TIMEOUT_S)


def _served(c: Cluster) -> bool:
    try:
        c.raw("GET", f"/apis/{ip.GROUP}/{ip.VERSION}")
        return True
    except NotFound:
        return False


def test_inference_pool_api_passes_with_the_extensions_own_crd(sim, sim_cluster, sim_state,
                                                               tmp_path):
    sim_state("healthy")
    with _crd_installed(sim_cluster, CRD):
        code, doc, out = run_suites(sim.kubeconfig, tmp_path, SUITE)
    assert verdicts(doc, "pass") == {"INF-GW-003"}, out[-3000:]
    assert code == 0, out[-2000:]
    rows = _rows(doc)
    assert "appProtocol=http" in rows["INF-GW-003"]["message"]
    assert "port is required" in rows["INF-GW-003"]["message"]
    assert rows["INF-GW-004"]["verdict"] == "not-run"
    assert "KWOK" in rows["INF-GW-004"]["message"]


def test_a_schemaless_inference_pool_crd_fails_exactly_the_api_check(sim, sim_cluster,
                                                                     sim_state, tmp_path):
    sim_state("healthy")
    with _crd_installed(sim_cluster, _schemaless(CRD)):
        code, doc, out = run_suites(sim.kubeconfig, tmp_path, SUITE)
    assert_fails_exactly("inference-pool-crd-schemaless", code, doc, out, {"INF-GW-003"},
                         "schema", sim_cluster)


def test_without_the_extension_both_checks_are_not_applicable(sim, tmp_path):
    code, doc, out = run_suites(sim.kubeconfig, tmp_path, SUITE)
    rows = _rows(doc)
    assert {rows[i]["verdict"] for i in ("INF-GW-003", "INF-GW-004")} == {"not-applicable"}
    assert "no Gateway API Inference Extension" in rows["INF-GW-004"]["message"]
    assert code == 0, out[-2000:]


def _rows(doc: dict) -> dict[str, dict]:
    return {r["id"]: r for r in doc["requirements"]}
