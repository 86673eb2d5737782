"""advanced_inference_ingress's pure rules: the InferencePool API verdict, what a route's
status says when its implementation refuses pools, the pinned-member verdict, the manifests,
and the vendored CRD (checks/inference_pool.py, conformance/node/crds/)."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from conformance.checks import inference_pool as ip
from conformance.node.gateway import INFERENCE_EXTENSION_CRDS

SELECT = {"run": "r1"}
STORED = {"spec": {"appProtocol": "http", "targetPorts": [{"number": 8080}],
                   "endpointPickerRef": {"name": ip.EPP_NAME, "kind": "Service",
                                         "failureMode": "FailClose",
                                         "port": {"number": 9002}}}}
REFUSED = "spec.endpointPickerRef: Invalid value: port is required when kind is 'Service'"


def test_the_api_passes_with_v1_its_defaults_and_its_rule() -> None:
    ok, line = ip.api_verdict(["v1"], STORED, None, REFUSED)
    assert ok and "appProtocol=http" in line and "port is required" in line


@pytest.mark.parametrize(("versions", "admitted", "error", "portless", "said"), [
    (["v1alpha2"], None, None, None, "serves v1alpha2, not v1"),
    (["v1"], None, "spec.selector: Required value", REFUSED, "valid InferencePool was refused"),
    (["v1"], {"spec": {"targetPorts": [{"number": 8080}]}}, None, REFUSED,
     "defaults were not applied"),
    (["v1"], STORED, None, None, "validation is not in force"),
], ids=["v1-not-served", "valid-pool-refused", "no-defaults", "no-validation"])
def test_each_way_the_api_is_broken_fails(versions, admitted, error, portless, said) -> None:
    ok, line = ip.api_verdict(versions, admitted, error, portless)
    assert not ok and said in line


def test_a_pool_names_its_picker_with_or_without_a_port() -> None:
    pool = ip.pool("p", "ns", SELECT, 8080, {"l": "v"})
    assert pool["spec"]["selector"] == {"matchLabels": SELECT}
    assert pool["spec"]["endpointPickerRef"] == {"name": ip.EPP_NAME,
                                                 "port": {"number": ip.EPP_GRPC_PORT}}
    assert "port" not in ip.pool("p", "ns", SELECT, 8080, {}, picker_port=None)[
        "spec"]["endpointPickerRef"]


def test_the_route_sends_everything_to_the_pool() -> None:
    route = ip.pool_route("pool", "ns", "inference", "h.test", {})
    assert route["spec"]["rules"] == [{"backendRefs": [
        {"group": ip.GROUP, "kind": "InferencePool", "name": ip.POOL_NAME}]}]


def _route_status(*conditions: dict) -> dict:
    return {"status": {"parents": [{"conditions": list(conditions)}]}}


def test_a_gateway_without_the_extension_is_told_from_one_not_done_yet() -> None:
    refused = _route_status({"type": "Accepted", "status": "True"},
                            {"type": "ResolvedRefs", "status": "False", "reason": "InvalidKind",
                             "message": "Cannot load HTTPBackendRef"})
    assert "InvalidKind" in (ip.refuses_pools(refused) or "")
    pending = _route_status({"type": "ResolvedRefs", "status": "False",
                             "reason": "BackendNotFound"})
    assert ip.refuses_pools(pending) is None and ip.refuses_pools({}) is None


def test_every_pinned_request_must_reach_its_member() -> None:
    members = {"10.0.0.1:8080": "inference-a", "10.0.0.2:8080": "inference-b"}
    right = {"10.0.0.1:8080": Counter({"inference-a": 10}),
             "10.0.0.2:8080": Counter({"inference-b": 10})}
    assert ip.pinned_verdict(right, members)[0]
    ignored = {"10.0.0.1:8080": Counter({"inference-a": 5, "inference-b": 5}),
               "10.0.0.2:8080": Counter({"inference-b": 10})}
    ok, line = ip.pinned_verdict(ignored, members)
    assert not ok and "want all inference-a" in line
    assert not ip.pinned_verdict({}, members)[0]  # nothing answered


def test_the_picker_reads_its_own_namespace_only() -> None:
    docs = {d["kind"]: d for d in ip.epp_objects("ns", "img", {"l": "v"})}
    assert set(docs) == {"ServiceAccount", "Role", "RoleBinding", "Deployment", "Service"}
    args = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--pool-name=inference-pool" in args and "--pool-namespace=ns" in args
    assert all(r["verbs"] == ["get", "list", "watch"] for r in docs["Role"]["rules"])


def test_the_vendored_crd_is_the_extensions_v1_6_2() -> None:
    [path] = INFERENCE_EXTENSION_CRDS.glob("*.yaml")
    doc = yaml.safe_load(path.read_text())
    assert doc["metadata"]["annotations"]["inference.networking.k8s.io/bundle-version"] == "v1.6.2"
    assert [v["name"] for v in doc["spec"]["versions"] if v["served"]] == [ip.VERSION]
    text = path.read_text()
    assert "port is required when kind is 'Service'" in text  # the rule INF-GW-003 plays
    assert all(f"default: {v}" in text for v in ("http", "Service", "FailClose"))
