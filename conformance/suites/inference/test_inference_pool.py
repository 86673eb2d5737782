"""Inference / the Gateway API Inference Extension: InferencePools on the platform (CNCF
``advanced_inference_ingress``, a SHOULD), where the cluster has the extension
(checks/inference_pool.py).

Checklist:
- INF-GW-003 the InferencePool API is served at inference.networking.k8s.io/v1 with its schema
  in force: a valid pool (dry run) comes back with the schema's defaults, a pool whose endpoint
  picker Service has no port is refused
- INF-GW-004 an HTTPRoute to an InferencePool of two inference stand-ins, on a Gateway of
  --gateway's class, routes through the pool's endpoint picker: every request pinned to a pool
  member (the picker's test header) is answered by that member

Not applicable where the cluster does not serve inference.networking.k8s.io (no Inference
Extension); INF-GW-004 also where the Gateway API or a GatewayClass is not there, and where the
GatewayClass's implementation refuses InferencePool backends (ResolvedRefs InvalidKind: a
Gateway API implementation without the extension, as the real node's Traefik). INF-GW-004 is
not run on the sim: KWOK pods serve no HTTP.
"""

from __future__ import annotations

import secrets

import pytest

from conformance.checks import gateway as gw
from conformance.checks import inference_pool as ip
from conformance.checks import service_metrics as sm
from conformance.cluster import evidence as ev
from conformance.cluster import gateway as gateways
from conformance.cluster import inference_pool as pools
from conformance.cluster import monitoring
from conformance.cluster.client import Forbidden
from conformance.cluster.namespaces import run_labels
from conformance.cluster.waits import WaitTimeout
from conformance.plugin.api import finding, not_applicable, not_run, own_namespace


@pytest.fixture
def pool_versions(cluster) -> list[str]:
    """The versions serving InferencePools (not applicable where the group is not served)."""
    versions = pools.served_versions(cluster)
    if versions is None:
        not_applicable(f"the cluster has no Gateway API Inference Extension ({ip.GROUP} is not "
                       "served)")
    return versions


@pytest.mark.requirement("INF-GW-003")
def test_inference_pool_api_is_served_with_its_schema(request, cluster, gpu_env, pool_versions,
                                                      dry_run_namespace, attachments):
    namespace = dry_run_namespace  # the pools are written as dry runs: nothing is stored
    selector = run_labels(gpu_env.run_id)
    admitted = refusal = portless = None
    if ip.VERSION in pool_versions:
        try:
            admitted, refusal = pools.dry_run(cluster, ip.pool(ip.POOL_NAME, namespace,
                                                               selector, sm.PORT, selector))
            _, portless = pools.dry_run(cluster, ip.pool("portless-picker", namespace,
                                                         selector, sm.PORT, selector,
                                                         picker_port=None))
        except Forbidden:
            not_run(f"this identity may not create {ip.KIND}s, not even as a dry run: grant "
                    f"create on {ip.GROUP} {ip.PLURAL} (gpuconf-rbac.yaml does)")
    ok, line = ip.api_verdict(pool_versions, admitted, refusal, portless)
    if not ok:
        attachments.append(ev.Evidence("inference-pool-api.txt", line))
        pytest.fail(f"the Inference Extension's {ip.KIND} API: {line}")
    finding(request, line)


@pytest.mark.requirement("INF-GW-004")
def test_route_to_an_inference_pool_reaches_the_pinned_member(request, cluster, gpu_env,
                                                              pool_versions, gateway_spec,
                                                              attachments):
    if ip.VERSION not in pool_versions:
        not_run(f"{ip.KIND}s are not served at {ip.GROUP}/{ip.VERSION} (INF-GW-003)")
    run_id, labels = secrets.token_hex(5), run_labels(gpu_env.run_id)
    host = gw.hostname(run_id, "pool")
    namespace = own_namespace(request)
    for backend in gw.BACKENDS:
        monitoring.deploy_stand_in(cluster, namespace, run_id, gpu_env.options.metrics_image,
                                   name=backend)
    pools.deploy_epp(cluster, namespace, gpu_env.options.epp_image, labels)
    pools.create_pool(cluster, ip.pool(ip.POOL_NAME, namespace, run_labels(run_id), sm.PORT,
                                       labels))
    gateways.create(cluster, gw.gateway(gateways.GATEWAY_NAME, namespace, gateway_spec,
                                        labels))
    gateways.create(cluster, ip.pool_route("pool", namespace, gateways.GATEWAY_NAME, host,
                                           labels))
    cls = gateway_spec.gateway_class
    try:
        gateways.wait_class_accepted(cluster, cls)
        where = gateways.wait_programmed(cluster, namespace)
        refused = pools.route_outcome(cluster, namespace, "pool")
    except WaitTimeout as exc:
        attachments.append(ev.Evidence("inference-pool-route.txt", str(exc)))
        pytest.fail(f"the Gateway API implementation of {cls} did not take the route to the "
                    f"{ip.KIND}: {str(exc).splitlines()[0]}")
    if refused:
        not_applicable(f"GatewayClass {cls} does not implement the Inference Extension: its "
                       f"route to an {ip.KIND} says {refused}")
    try:
        pools.wait_epp_ready(cluster, namespace)
    except WaitTimeout as exc:
        attachments.append(ev.Evidence("inference-pool-epp.txt", str(exc)))
        not_run(f"the endpoint picker (--epp-image {gpu_env.options.epp_image}) did not "
                f"become ready: {str(exc).splitlines()[0]}")
    for backend in gw.BACKENDS:
        monitoring.wait_stand_in(cluster, namespace, backend)
    members = pools.members(cluster, namespace, gw.BACKENDS, sm.PORT)
    url = gateways.listener_url(where, gateway_spec.port)
    try:  # warmed up until each member has answered a request pinned to it
        gateways.wait_route_answers(url, host, [{ip.PIN_HEADER: e} for e in members],
                                    set(gw.BACKENDS))
    except WaitTimeout as exc:
        attachments.append(ev.Evidence("inference-pool-route.txt", str(exc)))
        pytest.fail(f"the Gateway of {cls} did not route through the {ip.KIND}: "
                    f"{str(exc).splitlines()[0]}")
    answers = pools.send_pinned(url, host, list(members), ip.PINNED_REQUESTS)
    ok, line = ip.pinned_verdict(answers, members)
    report = f"GatewayClass {cls}, {url} (Host {host}), {ip.KIND} {ip.POOL_NAME}: {line}"
    if not ok:
        attachments.append(ev.Evidence("inference-pool-pinned.txt", report))
        pytest.fail(f"the {ip.KIND} does not route to the member its picker chose: {line}")
    finding(request, report)
