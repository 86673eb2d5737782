"""The platform's Gateway API, as ``ai_inference`` drives it: the GatewayClass read, a Gateway
and an HTTPRoute created in the test's namespace (deleted with it) and waited on until the
implementation accepts and programs them, and HTTP requests sent through the Gateway's
listener (its first status address, from where the run is) to the stand-ins behind it.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections import Counter

from conformance.checks import gateway as gw
from conformance.cluster.client import Cluster, NotFound, read_or_none
from conformance.cluster.waits import wait_until_done

ACCEPT_TIMEOUT_S = 60.0  # an implementation takes a Gateway and a route in seconds
ROUTE_TIMEOUT_S = 30.0  # from Accepted to the route answering through the listener
REQUEST_TIMEOUT_S = 10.0
GATEWAY_NAME = "inference"


def served(cluster: Cluster) -> list[str]:
    """The Gateway API resources (of :data:`gw.CRDS`) the API server does not serve at v1."""
    missing = []
    for plural in gw.CRDS:
        try:
            cluster.custom.list_cluster_custom_object(gw.GROUP, gw.VERSION, plural, limit=1)
        except NotFound:
            missing.append(plural)
    return missing


def gateway_class(cluster: Cluster, name: str) -> dict | None:
    return read_or_none(cluster.custom.get_cluster_custom_object, gw.GROUP, gw.VERSION,
                        "gatewayclasses", name)


def gateway_class_names(cluster: Cluster) -> list[str]:
    found = cluster.custom.list_cluster_custom_object(gw.GROUP, gw.VERSION, "gatewayclasses")
    return sorted(o["metadata"]["name"] for o in found.get("items") or [])


def create(cluster: Cluster, doc: dict) -> None:
    plural = {"Gateway": "gateways", "HTTPRoute": "httproutes"}[doc["kind"]]
    cluster.custom.create_namespaced_custom_object(gw.GROUP, gw.VERSION,
                                                   doc["metadata"]["namespace"], plural, doc)


def _read(cluster: Cluster, namespace: str, plural: str, name: str) -> dict:
    return cluster.custom.get_namespaced_custom_object(gw.GROUP, gw.VERSION, namespace,
                                                       plural, name)


def wait_class_accepted(cluster: Cluster, name: str) -> None:
    def pending() -> str | None:
        ok, said = gw.condition(gateway_class(cluster, name) or {}, "Accepted")
        return None if ok else said
    wait_until_done(f"GatewayClass {name} to be Accepted", pending, timeout=ACCEPT_TIMEOUT_S)


def wait_programmed(cluster: Cluster, namespace: str) -> str:
    """Until the Gateway is Programmed and has an address; the address."""
    found: list[str] = []

    def pending() -> str | None:
        obj = _read(cluster, namespace, "gateways", GATEWAY_NAME)
        ok, said = gw.condition(obj, "Programmed")
        where = gw.address(obj)
        if ok and where:
            found.append(where)
            return None
        return said if not ok else "Programmed, but no status address yet"
    wait_until_done(f"Gateway {namespace}/{GATEWAY_NAME} to be Programmed with an address",
                    pending, timeout=ACCEPT_TIMEOUT_S)
    return found[-1]


def wait_route_accepted(cluster: Cluster, namespace: str, name: str) -> None:
    def pending() -> str | None:
        route = _read(cluster, namespace, "httproutes", name)
        states = [gw.route_condition(route, k) for k in ("Accepted", "ResolvedRefs")]
        return None if all(ok for ok, _ in states) else "; ".join(s for _, s in states)
    wait_until_done(f"HTTPRoute {namespace}/{name} to be Accepted with its refs resolved",
                    pending, timeout=ACCEPT_TIMEOUT_S)


def ask(url: str, host: str, headers: dict[str, str] | None = None) -> str:
    """One request through the listener: the backend that answered (``X-Backend``), or
    ``HTTP <status>`` / ``error: ...`` when none did."""
    request = urllib.request.Request(url, headers={"Host": host, **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as r:
            r.read()
            return r.headers.get(gw.BACKEND_HEADER) or "no X-Backend header"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except OSError as exc:
        return f"error: {str(exc)[:80]}"


def wait_route_answers(url: str, host: str, probes: list[dict[str, str]],
                       backends: set[str]) -> None:
    """Until the implementation's configuration has caught up with the route: each probe
    (request headers) is answered by a stand-in, and each of ``backends`` has answered (an
    endpoint it does not know yet answers 503)."""
    seen: set[str] = set()

    def pending() -> str | None:
        last = [ask(url, host, headers) for headers in probes]
        seen.update(last)
        if all(a in gw.BACKENDS for a in last) and backends <= seen:
            return None
        return f"last answers: {', '.join(last)}; seen {sorted(seen)}"
    wait_until_done(f"{url} (Host {host}) to be answered by the stand-ins", pending,
                    timeout=ROUTE_TIMEOUT_S)


def send(url: str, host: str, n: int, headers: dict[str, str] | None = None) -> Counter:
    """``n`` requests; how many each backend (or each failure) answered."""
    return Counter(ask(url, host, headers) for _ in range(n))


def listener_url(where: str, port: int) -> str:
    host = f"[{where}]" if ":" in where else where
    return f"http://{host}:{port}{gw.PATH}"

