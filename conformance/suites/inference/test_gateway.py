"""Inference / Gateway API: the platform's Gateway routes inference traffic (CNCF
``ai_inference``, a MUST): weighted splits and routing by an OpenAI-style header, measured from
real answers of two inference stand-ins (checks/gateway.py).

Checklist:
- INF-GW-001 the GatewayClass (--gateway) is Accepted, a Gateway on it Programmed with an
  address, an HTTPRoute weighting the stand-ins 80/20 Accepted; of 200 requests through the
  Gateway's listener each stand-in answers its weight's share within 8 points
- INF-GW-002 on the same kind of Gateway, an HTTPRoute matching x-gateway-model-name sends
  every request for model-a to stand-in a and every request for model-b to stand-in b

Not applicable where the cluster has no Gateway API (its v1 resources not served) or no
GatewayClass is given (--gateway; on the real node its own Traefik). Not run on the sim: KWOK
pods serve no HTTP. The Gateway API Inference Extension (InferencePool): test_inference_pool.py.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import pytest

from conformance.checks import gateway as gw
from conformance.checks import service_metrics as sm
from conformance.cluster import evidence as ev
from conformance.cluster import gateway as gateways
from conformance.cluster import monitoring
from conformance.cluster.namespaces import run_labels
from conformance.cluster.waits import WaitTimeout
from conformance.plugin.api import finding

RouteBuilder = Callable[..., dict]


def serve(cluster, gpu_env, namespace: str, spec: gw.GatewaySpec, route: RouteBuilder,
          check: str, attachments: list, probes: list[dict[str, str]],
          backends: set[str]) -> tuple[str, str]:
    """The two stand-ins, a Gateway of ``spec`` and the route ``route`` builds, each waited on
    until accepted / programmed / answering (``probes`` answered by stand-ins, ``backends``
    among them); (the listener's URL, the route's hostname)."""
    run_id = secrets.token_hex(5)
    labels = run_labels(gpu_env.run_id)
    for backend in gw.BACKENDS:
        monitoring.deploy_stand_in(cluster, namespace, run_id, gpu_env.options.metrics_image,
                                   name=backend)
    host = gw.hostname(run_id, check)
    gateways.create(cluster, gw.gateway(gateways.GATEWAY_NAME, namespace, spec, labels))
    gateways.create(cluster, route(check, namespace, gateways.GATEWAY_NAME, host,
                                   sm.PORT, labels))
    try:
        gateways.wait_class_accepted(cluster, spec.gateway_class)
        where = gateways.wait_programmed(cluster, namespace)
        gateways.wait_route_accepted(cluster, namespace, check)
        for backend in gw.BACKENDS:
            monitoring.wait_stand_in(cluster, namespace, backend)
        url = gateways.listener_url(where, spec.port)
        gateways.wait_route_answers(url, host, probes, backends)
    except WaitTimeout as exc:
        attachments.append(ev.Evidence("gateway.txt", str(exc)))
        pytest.fail(f"the Gateway API implementation of {spec.gateway_class} did not serve "
                    f"the route: {str(exc).splitlines()[0]}")
    return url, host


@pytest.mark.requirement("INF-GW-001")
def test_gateway_splits_traffic_by_weight(request, cluster, gpu_env, gateway_spec, namespace,
                                          attachments):
    # warmed up until both stand-ins have answered: the split is measured on a route served
    url, host = serve(cluster, gpu_env, namespace, gateway_spec, gw.split_route, "split",
                      attachments, [{}], set(gw.BACKENDS))
    ok, line = gw.split_verdict(gateways.send(url, host, gw.SPLIT_REQUESTS))
    report = f"GatewayClass {gateway_spec.gateway_class}, {url} (Host {host}): {line}"
    if not ok:
        attachments.append(ev.Evidence("gateway-split.txt", report))
        pytest.fail(f"the gateway's split is not {gw.WEIGHTS[0]}/{gw.WEIGHTS[1]}: {line}")
    finding(request, report)


@pytest.mark.requirement("INF-GW-002")
def test_gateway_routes_by_model_header(request, cluster, gpu_env, gateway_spec, namespace,
                                        attachments):
    # warmed up until a stand-in answers each model (which one is what is measured)
    url, host = serve(cluster, gpu_env, namespace, gateway_spec, gw.header_route, "header",
                      attachments, [{gw.MODEL_HEADER: m} for m in gw.MODELS], set())
    answers = {m: gateways.send(url, host, gw.HEADER_REQUESTS, {gw.MODEL_HEADER: m})
               for m in gw.MODELS}
    ok, line = gw.header_verdict(answers)
    report = f"GatewayClass {gateway_spec.gateway_class}, {url} (Host {host}): {line}"
    if not ok:
        attachments.append(ev.Evidence("gateway-header.txt", report))
        pytest.fail(f"the gateway's header match does not route: {line}")
    finding(request, report)
