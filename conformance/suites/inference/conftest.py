"""What the inference checks share: the platform's GatewayClass (``--gateway``)."""

from __future__ import annotations

import pytest

from conformance.checks import gateway as gw
from conformance.cluster import evidence as ev
from conformance.cluster import gateway as gateways
from conformance.plugin.api import not_applicable, not_run


@pytest.fixture
def gateway_spec(cluster, gpu_env, attachments) -> gw.GatewaySpec:
    """The GatewayClass to use (not applicable where there is none; not run on the sim)."""
    if gpu_env.target == "sim":
        not_run("the sim's pods are KWOK's: they serve no HTTP, so nothing can answer through "
                "a Gateway")
    missing = gateways.served(cluster)
    if missing:
        not_applicable(f"the Gateway API is not served ({', '.join(missing)} not at "
                       f"{gw.GROUP}/{gw.VERSION})")
    if not gpu_env.options.gateway:
        not_applicable("no GatewayClass given (--gateway CLASS[:PORT])")
    try:
        spec = gw.parse_spec(gpu_env.options.gateway)
    except ValueError as exc:
        not_run(str(exc))
    if gateways.gateway_class(cluster, spec.gateway_class) is None:
        known = gateways.gateway_class_names(cluster)
        attachments.append(ev.Evidence("gatewayclasses.txt", "\n".join(known) or "none"))
        pytest.fail(f"GatewayClass {spec.gateway_class} (--gateway) does not exist (the "
                    f"cluster has: {', '.join(known) or 'none'})")
    return spec
