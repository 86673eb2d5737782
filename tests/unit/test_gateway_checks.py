"""checks/gateway.py: --gateway is parsed strictly, the routes say what the checks mean, and the
verdicts read the answers as the requirements state them."""

from __future__ import annotations

from collections import Counter

import pytest

from conformance.checks import gateway as gw

A, B = gw.BACKENDS


def test_gateway_spec_is_class_and_optional_port():
    assert gw.parse_spec("traefik") == gw.GatewaySpec("traefik", 80)
    assert gw.parse_spec("gpuconf-traefik:38080") == gw.GatewaySpec("gpuconf-traefik", 38080)
    for bad in ("", "Traefik", "x:0", "x:70000", "x:", "a/b"):
        with pytest.raises(ValueError, match="CLASS\\[:PORT\\]"):
            gw.parse_spec(bad)


def test_split_route_weights_the_two_stand_ins_80_20():
    route = gw.split_route("split", "ns", "inference", "h.test", 8080, {})
    (rule,) = route["spec"]["rules"]
    assert [(r["name"], r["weight"]) for r in rule["backendRefs"]] == [(A, 80), (B, 20)]
    assert route["spec"]["hostnames"] == ["h.test"]


def test_header_route_sends_each_model_to_its_backend_and_the_rest_to_the_first():
    rules = gw.header_route("header", "ns", "inference", "h.test", 8080, {})["spec"]["rules"]
    by_model = {r["matches"][0]["headers"][0]["value"]: r["backendRefs"][0]["name"]
                for r in rules if "matches" in r}
    assert by_model == gw.MODELS
    assert [r["backendRefs"][0]["name"] for r in rules if "matches" not in r] == [A]


@pytest.mark.parametrize(("a", "b", "ok"), [(160, 40, True), (146, 54, True), (175, 25, True),
                                            (100, 100, False), (200, 0, False),
                                            (140, 60, False)])
def test_split_within_tolerance(a, b, ok):
    assert gw.split_verdict(Counter({A: a, B: b}))[0] is ok


def test_split_fails_on_any_other_answer():
    ok, line = gw.split_verdict(Counter({A: 159, B: 40, "HTTP 503": 1}))
    assert not ok and "HTTP 503" in line
    assert not gw.split_verdict(Counter())[0]


def test_header_routing_must_route_every_request():
    good = {"model-a": Counter({A: 10}), "model-b": Counter({B: 10})}
    assert gw.header_verdict(good)[0]
    assert not gw.header_verdict({**good, "model-b": Counter({B: 9, A: 1})})[0]
    assert not gw.header_verdict({**good, "model-b": Counter({"HTTP 404": 10})})[0]
    assert not gw.header_verdict({"model-a": Counter({A: 10})})[0]


def test_status_reading():
    gateway = {"status": {"conditions": [{"type": "Programmed", "status": "True",
                                          "reason": "Programmed"}],
                          "addresses": [{"type": "IPAddress", "value": "10.244.0.1"}]}}
    assert gw.condition(gateway, "Programmed")[0]
    assert not gw.condition(gateway, "Accepted")[0]
    assert gw.address(gateway) == "10.244.0.1" and gw.address({}) is None
    assert not gw.route_condition({}, "Accepted")[0]
    route = {"status": {"parents": [{"conditions": [{"type": "Accepted", "status": "False",
                                                     "reason": "NotAllowedByListeners"}]}]}}
    ok, said = gw.route_condition(route, "Accepted")
    assert not ok and "NotAllowedByListeners" in said
