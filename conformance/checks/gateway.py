"""ai_inference (CNCF Kubernetes AI Conformance, a MUST): the Kubernetes Gateway API routes
inference traffic. Two inference stand-ins (the one of ``service_metrics``, each saying which
backend it is) sit behind one Gateway of the platform's GatewayClass:

- INF-GW-001: an HTTPRoute splits traffic :data:`WEIGHTS` (80/20) between them; over
  :data:`SPLIT_REQUESTS` requests the measured share of each backend is within
  :data:`SPLIT_TOLERANCE` of its weight's share.
- INF-GW-002: an HTTPRoute routes by an OpenAI-style header (:data:`MODEL_HEADER`, the model
  name, as inference gateways route on the request's ``model``): every request for a model is
  answered by that model's backend.

Pure: manifests and verdicts from what the responses said. The objects are created and the
traffic sent by ``cluster/gateway.py``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

GROUP = "gateway.networking.k8s.io"
VERSION = "v1"
CRDS = ("gatewayclasses", "gateways", "httproutes")  # the standard channel's, v1
# the stand-ins: each answers with the backend it is (service_metrics.STAND_IN's BACKEND)
BACKENDS = ("inference-a", "inference-b")
WEIGHTS = (80, 20)
# Binomial: at p=0.8 and n=200 the share's standard deviation is 0.028, so a correct random
# splitter stays within 0.08 (2.8 sigma) but for 1 run in 200, a weighted round robin exactly;
# weights ignored (50/50) is 0.3 away.
SPLIT_REQUESTS = 200
SPLIT_TOLERANCE = 0.08
MODEL_HEADER = "x-gateway-model-name"  # as the Inference Extension's body-based router sets it
MODELS = {"model-a": BACKENDS[0], "model-b": BACKENDS[1]}
HEADER_REQUESTS = 10  # per model: a header rule routes every request or it is broken
BACKEND_HEADER = "x-backend"
PATH = "/v1/infer"


# ---- where the Gateway is: --gateway CLASS[:PORT] --------------------------------------------
@dataclass(frozen=True)
class GatewaySpec:
    gateway_class: str
    port: int = 80

    def __str__(self) -> str:
        return f"{self.gateway_class}:{self.port}"


_SPEC = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)(?::(\d{1,5}))?$")


def parse_spec(text: str) -> GatewaySpec:
    """``CLASS[:PORT]`` (the GatewayClass and the listener port its Gateways take; 80 if not
    given); ValueError otherwise."""
    m = _SPEC.match(text)
    port = int(m.group(3) or 80) if m else 0
    if not m or not 1 <= port <= 65535:
        raise ValueError(f"--gateway {text!r}: expected CLASS[:PORT] (a GatewayClass name, a "
                         "listener port 1-65535)")
    return GatewaySpec(m.group(1), port)


# ---- manifests ---------------------------------------------------------------------------------
def hostname(run_id: str, check: str) -> str:
    """The route's hostname: this run's and this check's only, so no other route answers."""
    return f"{check}-{run_id}.gateway.gpuconf.test"


def gateway(name: str, namespace: str, spec: GatewaySpec, labels: dict[str, str]) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Gateway",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {"gatewayClassName": spec.gateway_class,
                     "listeners": [{"name": "http", "protocol": "HTTP", "port": spec.port,
                                    "allowedRoutes": {"namespaces": {"from": "Same"}}}]}}


def _backend(name: str, port: int, weight: int | None = None) -> dict:
    ref: dict = {"name": name, "port": port}
    if weight is not None:
        ref["weight"] = weight
    return ref


def _route(name: str, namespace: str, gateway_name: str, host: str, rules: list[dict],
           labels: dict[str, str]) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {"parentRefs": [{"name": gateway_name}], "hostnames": [host],
                     "rules": rules}}


def split_route(name: str, namespace: str, gateway_name: str, host: str, port: int,
                labels: dict[str, str]) -> dict:
    """One rule: BACKENDS weighted WEIGHTS."""
    refs = [_backend(b, port, w) for b, w in zip(BACKENDS, WEIGHTS, strict=True)]
    return _route(name, namespace, gateway_name, host, [{"backendRefs": refs}], labels)


def header_route(name: str, namespace: str, gateway_name: str, host: str, port: int,
                 labels: dict[str, str]) -> dict:
    """One rule per model: MODEL_HEADER = model -> its backend; then a rule without a match to
    the first backend (the default model), which also answers while the route is set up: a
    header match that does not route sends model-b's requests there."""
    rules = [{"matches": [{"headers": [{"type": "Exact", "name": MODEL_HEADER, "value": m}]}],
              "backendRefs": [_backend(b, port)]} for m, b in MODELS.items()]
    rules.append({"backendRefs": [_backend(BACKENDS[0], port)]})
    return _route(name, namespace, gateway_name, host, rules, labels)


# ---- status ----------------------------------------------------------------------------------
def condition(obj: dict, kind: str) -> tuple[bool, str]:
    """(``kind`` is True, what the condition says) in an object's status.conditions."""
    return _condition((obj.get("status") or {}).get("conditions") or [], kind)


def _condition(conditions: list[dict], kind: str) -> tuple[bool, str]:
    for c in conditions:
        if c.get("type") == kind:
            why = ": ".join(str(x) for x in (c.get("reason"), c.get("message")) if x)
            return c.get("status") == "True", f"{kind}={c.get('status')} ({why})"
    return False, f"no {kind} condition yet"


def route_condition(route: dict, kind: str) -> tuple[bool, str]:
    """``kind`` on the route's first parent (the one Gateway it names)."""
    parents = (route.get("status") or {}).get("parents") or []
    if not parents:
        return False, "no parent status yet (no controller took the route)"
    return _condition(parents[0].get("conditions") or [], kind)


def address(gw: dict) -> str | None:
    """The Gateway's first address (status.addresses), None while it has none."""
    for a in (gw.get("status") or {}).get("addresses") or []:
        if a.get("value"):
            return str(a["value"])
    return None


# ---- verdicts from the answers -------------------------------------------------------------------
def split_verdict(answers: Counter) -> tuple[bool, str]:
    """(the measured split is within tolerance, a line with the counts)."""
    total = sum(answers.values())
    shares = {b: answers.get(b, 0) / total if total else 0.0 for b in BACKENDS}
    want = {b: w / sum(WEIGHTS) for b, w in zip(BACKENDS, WEIGHTS, strict=True)}
    counts = ", ".join(f"{b} {answers.get(b, 0)} ({shares[b]:.0%}, want {want[b]:.0%})"
                       for b in BACKENDS)
    others = {k: n for k, n in answers.items() if k not in BACKENDS}
    if others:
        counts += f", other answers {dict(others)}"
    ok = not others and all(abs(shares[b] - want[b]) <= SPLIT_TOLERANCE for b in BACKENDS)
    return ok, f"{total} requests: {counts}; tolerance ±{SPLIT_TOLERANCE:.0%}"


def header_verdict(answers: dict[str, Counter]) -> tuple[bool, str]:
    """(every request for each model was answered by its backend, a line per model)."""
    return routed_verdict(answers, MODELS, MODEL_HEADER)


def routed_verdict(answers: Mapping[str, Counter], wanted: Mapping[str, str],
                   header: str) -> tuple[bool, str]:
    """(every request sent with ``header: value`` was answered by ``wanted[value]``, and at
    least one was, a line per value): ``answers`` who answered, by the value sent."""
    lines, ok = [], True
    for value, backend in wanted.items():
        got = answers.get(value, Counter())
        right = got.get(backend, 0)
        ok = ok and right == sum(got.values()) and right > 0
        lines.append(f"{header}: {value} -> {dict(got)} (want all {backend})")
    return ok, "; ".join(lines)
