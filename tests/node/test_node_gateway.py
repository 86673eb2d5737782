"""ai_inference on the real node: the node's own Traefik (a host process, its kubernetesGateway
provider) serves a Gateway of its GatewayClass, splits real traffic 80/20 between two inference
stand-ins and routes by the model header (INF-GW-001 and INF-GW-002 pass). Two faults in the
platform fail exactly one of them each, played by a MutatingAdmissionPolicy on HTTPRoutes (the
API server's own admission, as a platform add-on would rewrite routes):
- route-weights-ignored: a two-backend rule's weights become equal -> INF-GW-001
- header-match-does-not-route: the header matches name another header -> INF-GW-002
Each fault is removed afterwards.

The node also serves the Gateway API Inference Extension's InferencePool CRD (v1.6.2): its API
check passes (INF-GW-003), and a route to a pool on Traefik's GatewayClass is refused with
InvalidKind (Traefik implements the Gateway API, not the extension), so INF-GW-004 is not
applicable there, saying why.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.checks import gateway as gw
from conformance.cluster.client import Cluster, NotFound, already_done, connect
from conformance.cluster.waits import wait_for
from conformance.node import gateway
from conformance.node.state import NodeState
from tests.helpers import assert_fails_exactly, run_suites, verdicts
from tests.node import node_env
from tests.node.node_env import NODE_NAME

pytestmark = pytest.mark.xdist_group(node_env.XDIST_GROUP)

SUITE = "inference/test_gateway.py"
TIMEOUT_S = 240.0
ADMISSION = ("admissionregistration.k8s.io", "v1")
POLICY_LOADED_TIMEOUT_S = 30.0  # the API server loads a new policy within a second or two


@pytest.fixture
def node_gateway(node):
    if gateway.COMPONENT not in NodeState.load(NODE_NAME).pids:
        pytest.skip("no traefik on this node (build-node.sh traefik)")
    return connect(str(node.kubeconfig))


def test_the_nodes_gateway_splits_and_routes_inference_traffic(node, node_gateway, tmp_path):
    code, doc, out = run_suites(Path(node.kubeconfig), tmp_path, SUITE, target="node",
                                timeout=TIMEOUT_S)
    assert verdicts(doc, "pass") == {"INF-GW-001", "INF-GW-002"}, out[-3000:]
    assert code == 0, out[-2000:]


def test_the_nodes_inference_pools_are_served_and_traefik_refuses_them(node, node_gateway,
                                                                       tmp_path):
    code, doc, out = run_suites(Path(node.kubeconfig), tmp_path,
                                "inference/test_inference_pool.py", target="node",
                                timeout=TIMEOUT_S)
    rows = {r["id"]: r for r in doc["requirements"]}
    assert rows["INF-GW-003"]["verdict"] == "pass", out[-3000:]
    assert rows["INF-GW-004"]["verdict"] == "not-applicable", out[-3000:]
    assert "InvalidKind" in rows["INF-GW-004"]["message"], rows["INF-GW-004"]
    assert gateway.CLASS in rows["INF-GW-004"]["message"]
    assert code == 0, out[-2000:]


def _policy(name: str, condition: str, patches: list[tuple[str, str]]) -> tuple[dict, dict]:
    """A MutatingAdmissionPolicy that JSON-patches matching HTTPRoutes on create, and its
    binding."""
    ops = ", ".join(f'JSONPatch{{op: "replace", path: "{p}", value: {v}}}' for p, v in patches)
    policy = {"apiVersion": "/".join(ADMISSION), "kind": "MutatingAdmissionPolicy",
              "metadata": {"name": name},
              "spec": {"matchConstraints": {"resourceRules": [{
                  "apiGroups": [gw.GROUP], "apiVersions": [gw.VERSION],
                  "operations": ["CREATE"], "resources": ["httproutes"]}]},
                  "matchConditions": [{"name": "shape", "expression": condition}],
                  "failurePolicy": "Fail", "reinvocationPolicy": "Never",
                  "mutations": [{"patchType": "JSONPatch",
                                 "jsonPatch": {"expression": f"[{ops}]"}}]}}
    binding = {"apiVersion": "/".join(ADMISSION), "kind": "MutatingAdmissionPolicyBinding",
               "metadata": {"name": name}, "spec": {"policyName": name}}
    return policy, binding


def _equal_weights() -> tuple[dict, dict]:
    rule = "object.spec.rules[0]"
    return _policy("gpuconf-fault-weights-ignored",
                   f"size(object.spec.rules) == 1 && size({rule}.backendRefs) == 2",
                   [(f"/spec/rules/0/backendRefs/{i}/weight", "1") for i in (0, 1)])


def _header_renamed() -> tuple[dict, dict]:
    first = "object.spec.rules[0].matches[0]"
    return _policy("gpuconf-fault-header-does-not-route",
                   f"size(object.spec.rules) == 3 && has({first}.headers)",
                   [(f"/spec/rules/{i}/matches/0/headers/0/name", '"x-ignored"')
                    for i in (0, 1)])


def _route_as_admitted(c: Cluster, route: dict) -> dict:
    return c.custom.create_namespaced_custom_object(gw.GROUP, gw.VERSION, "default",
                                                    "httproutes", route, dry_run="All")


@contextlib.contextmanager
def _policy_in_force(c: Cluster, policy: tuple[dict, dict], probe: dict) -> Iterator[None]:
    """The policy and its binding, from when a dry-run create of ``probe`` (the check's own
    route) comes back rewritten (the API server has loaded it) until it comes back as before
    again (deleted and unloaded)."""
    name = policy[0]["metadata"]["name"]
    before = _route_as_admitted(c, probe)["spec"]["rules"]
    plurals = ("mutatingadmissionpolicies", "mutatingadmissionpolicybindings")
    try:
        for doc, plural in zip(policy, plurals, strict=True):
            c.custom.create_cluster_custom_object(*ADMISSION, plural, doc)
        wait_for(f"policy {name} to rewrite HTTPRoutes",
                 lambda: _route_as_admitted(c, probe)["spec"]["rules"] != before,
                 timeout=POLICY_LOADED_TIMEOUT_S)
        yield
    finally:
        for plural in reversed(plurals):
            with already_done(NotFound):
                c.custom.delete_cluster_custom_object(*ADMISSION, plural, name)
        wait_for(f"policy {name} to be gone",
                 lambda: _route_as_admitted(c, probe)["spec"]["rules"] == before,
                 timeout=POLICY_LOADED_TIMEOUT_S)


def _probe(build) -> dict:
    return build("probe", "default", "inference", "probe.test", 8080, {})


FAULTS = {"route-weights-ignored": (_equal_weights, gw.split_route, {"INF-GW-001"}, "split"),
          "header-match-does-not-route": (_header_renamed, gw.header_route, {"INF-GW-002"},
                                          "header")}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_gateway_fault_fails_exactly_its_check(fault, node, node_gateway, tmp_path):
    make, build, fails, word = FAULTS[fault]
    with _policy_in_force(node_gateway, make(), _probe(build)):
        code, doc, out = run_suites(Path(node.kubeconfig), tmp_path, SUITE, target="node",
                                    timeout=TIMEOUT_S)
    assert_fails_exactly(fault, code, doc, out, fails, word, node_gateway)
