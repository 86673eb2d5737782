"""ai_service_metrics as kubernetes-sigs/ai-conformance checks it (TestAIServiceMetrics,
``test/ai_service_metrics_test.go``; KAR-0061), on what a Prometheus query API answers.

The workload is a dependency-free inference stand-in (:data:`STAND_IN`, Python's standard
library only): ``/v1/infer`` counts a request, ``/metrics`` serves a request counter, a latency
histogram and a queue-depth gauge, each labelled ``conformance_run=<run ID>``; ``/healthz`` is
not counted, so probes do not inflate the count. Each answer says which stand-in gave it
(``X-Backend`` and the body's ``backend``: its ``BACKEND``), so ``ai_inference`` measures a
traffic split from the answers (``checks/gateway.py``). The metric names, the label and the pass
criteria are upstream's, so results compare one to one: after exactly N requests the
monitoring system must hold ``max(counter) == N``, ``max(histogram _count) == N`` and any
gauge sample (``max`` so a target discovered twice is not counted twice); a counter above N
fails at once (counters only grow).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

REQUESTS = 10  # upstream's metricsRequestCount
PORT = 8080
PORT_NAME = "http"
APP_LABEL = "app.kubernetes.io/name"
WORKLOAD = "ai-metrics-stub"
RUN_LABEL = "conformance_run"
REQUESTS_TOTAL = "ai_conformance_inference_requests_total"
LATENCY = "ai_conformance_inference_request_duration_seconds"
QUEUE_DEPTH = "ai_conformance_inference_queue_depth"
# The annotations a Prometheus configured the community chart's way (job
# kubernetes-service-endpoints) discovers a Service by; the node's Prometheus too.
SCRAPE_ANNOTATIONS = {"prometheus.io/scrape": "true", "prometheus.io/port": str(PORT),
                      "prometheus.io/path": "/metrics"}

STAND_IN = r'''
import json, os, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RUN, PORT = os.environ["RUN_ID"], int(os.environ["PORT"])
BACKEND = os.environ.get("BACKEND", "")
BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
lock = threading.Lock()
served = {"n": 0, "sum": 0.0, "le": [0] * len(BOUNDS), "queued": 0}


def exposition():
    run = 'conformance_run="%s"' % RUN
    with lock:
        s = dict(served, le=list(served["le"]))
    lines = ["# TYPE ai_conformance_inference_requests_total counter",
             "ai_conformance_inference_requests_total{%s} %d" % (run, s["n"]),
             "# TYPE ai_conformance_inference_request_duration_seconds histogram"]
    for bound, n in zip(BOUNDS, s["le"]):
        lines.append('ai_conformance_inference_request_duration_seconds_bucket{%s,le="%s"} %d'
                     % (run, bound, n))
    lines += ['ai_conformance_inference_request_duration_seconds_bucket{%s,le="+Inf"} %d'
              % (run, s["n"]),
              "ai_conformance_inference_request_duration_seconds_sum{%s} %f" % (run, s["sum"]),
              "ai_conformance_inference_request_duration_seconds_count{%s} %d" % (run, s["n"]),
              "# TYPE ai_conformance_inference_queue_depth gauge",
              "ai_conformance_inference_queue_depth{%s} %d" % (run, s["queued"])]
    return "\n".join(lines) + "\n"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, body, kind):
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Backend", BACKEND)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/healthz":
            return self.reply("ok", "text/plain")
        if self.path == "/metrics":
            return self.reply(exposition(), "text/plain; version=0.0.4")
        if not self.path.startswith("/v1/infer"):
            return self.send_error(404)
        t0 = time.monotonic()
        with lock:
            served["queued"] += 1
        time.sleep(0.01)
        took = time.monotonic() - t0
        with lock:
            served["queued"] -= 1
            served["n"] += 1
            served["sum"] += took
            served["le"] = [n + (took <= b) for n, b in zip(served["le"], BOUNDS)]
        self.reply(json.dumps({"output": "ok", "backend": BACKEND}), "application/json")


ThreadingHTTPServer(("", PORT), Handler).serve_forever()
'''


@dataclass(frozen=True)
class Expectation:
    description: str
    query: str
    want: float
    exact: bool  # the value must equal want; otherwise any sample will do


def expectations(run_id: str, requests: int = REQUESTS) -> list[Expectation]:
    sel = f'{{{RUN_LABEL}="{run_id}"}}'
    return [Expectation("request count", f"max({REQUESTS_TOTAL}{sel})", requests, True),
            Expectation("request latency histogram count", f"max({LATENCY}_count{sel})",
                        requests, True),
            Expectation("queue depth gauge", f"max({QUEUE_DEPTH}{sel})", 0, False)]


class QueryError(ValueError):
    """The query API answered something other than a successful instant vector."""


def single_sample(body: str) -> float | None:
    """The one sample of an instant-vector answer (None while it is empty: not scraped yet);
    QueryError for a failed query, another result type or more than one sample."""
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise QueryError(f"not a query API answer ({exc}): {body[:200]!r}") from None
    if doc.get("status") != "success":
        raise QueryError(f"query failed: {doc.get('errorType')}: {doc.get('error')}")
    data = doc.get("data") or {}
    if data.get("resultType") != "vector":
        raise QueryError(f"expected an instant vector, got {data.get('resultType')!r}")
    result = data.get("result") or []
    if not result:
        return None
    if len(result) > 1:
        raise QueryError(f"expected at most one sample, got {len(result)}")
    try:
        return float(result[0]["value"][1])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise QueryError(f"malformed sample {result[0]!r}") from exc


class Spoiled(AssertionError):
    """Waiting cannot help: a counter above the requests sent (extra requests reached the
    workload), or the stand-in's counters were lost (it stopped or restarted)."""


def status(e: Expectation, value: float | None) -> tuple[bool, str]:
    """(collected as expected, a line saying so); Spoiled when waiting cannot help."""
    if value is None:
        return False, f"{e.description}: not collected yet ({e.query})"
    if e.exact and value > e.want:
        raise Spoiled(f"{e.description}: got {value:g}, want {e.want:g}; extra requests "
                      "reached the workload")
    if e.exact and value != e.want:
        return False, f"{e.description}: got {value:g}, want {e.want:g}"
    return True, f"{e.description}: ok ({value:g})"


# ---- where the query API is -------------------------------------------------------------------
@dataclass(frozen=True)
class QueryEndpoint:
    """A Prometheus-compatible query API: an in-cluster Service (through the API server's
    service proxy) or a URL."""

    namespace: str = ""
    name: str = ""
    port: str = ""
    url: str = ""

    def __str__(self) -> str:
        return self.url or f"{self.namespace}/{self.name}:{self.port}"


_SERVICE = re.compile(r"^([a-z0-9][-a-z0-9]*)/([a-z0-9][-a-z0-9.]*):([-a-z0-9]+)$")


def parse_endpoint(text: str) -> QueryEndpoint:
    """``NAMESPACE/NAME:PORT`` (the port a number or a Service port name) or an http(s) URL;
    ValueError otherwise."""
    if text.startswith(("http://", "https://")):
        return QueryEndpoint(url=text.rstrip("/"))
    m = _SERVICE.match(text)
    if not m:
        raise ValueError(f"metrics query {text!r}: expected NAMESPACE/NAME:PORT or an "
                         "http(s):// URL")
    return QueryEndpoint(*m.groups())


# The Services of a Prometheus a cluster commonly runs, in order of preference: the Prometheus
# Operator's governing Service (label operated-prometheus=true, port web), the community
# chart's server (app.kubernetes.io/name=prometheus), kube-prometheus-stack's.
PROMETHEUS_SELECTORS = ("operated-prometheus=true", "app.kubernetes.io/name=prometheus",
                        "app=kube-prometheus-stack-prometheus")
QUERY_PORT_NAMES = ("web", "http-web", "http", "prometheus")


def query_port(ports: list[tuple[str | None, int]]) -> str | None:
    """The Service port (its name, else its number) serving the query API, from (name,
    number) pairs: a conventional name, else 9090, else the only port."""
    for name, _number in ports:
        if name in QUERY_PORT_NAMES:
            return name
    for name, number in ports:
        if number == 9090:
            return name or str(number)
    if len(ports) == 1:
        return ports[0][0] or str(ports[0][1])
    return None


# ---- a scrape manifest template (upstream's -service-metrics-scrape-manifest) ----------------
_FIELD = re.compile(r"\{\{\s*\.(\w+)\s*\}\}")


def render(template: str, fields: dict[str, str | int]) -> str:
    """Fill a Go-template manifest's ``{{.Field}}`` references (the fields upstream offers:
    Namespace, ServiceName, PortName, Port, AppLabelKey, AppLabelValue, RunID); ValueError
    for an unknown field or any other template action."""
    def field(m: re.Match) -> str:
        if m.group(1) not in fields:
            raise ValueError(f"unknown template field .{m.group(1)} (known: "
                             f"{', '.join(sorted(fields))})")
        return str(fields[m.group(1)])
    out = _FIELD.sub(field, template)
    if "{{" in out:
        raise ValueError("only {{.Field}} references are supported in the scrape manifest")
    return out


def template_fields(namespace: str, run_id: str) -> dict[str, str | int]:
    return {"Namespace": namespace, "ServiceName": WORKLOAD, "PortName": PORT_NAME,
            "Port": PORT, "AppLabelKey": APP_LABEL, "AppLabelValue": WORKLOAD, "RunID": run_id}


def service_monitor(namespace: str, labels: dict[str, str]) -> dict:
    """The ServiceMonitor upstream creates when no manifest is given."""
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": {"name": WORKLOAD, "namespace": namespace, "labels": dict(labels)},
            "spec": {"selector": {"matchLabels": {APP_LABEL: WORKLOAD}},
                     "namespaceSelector": {"matchNames": [namespace]},
                     "endpoints": [{"port": PORT_NAME, "path": "/metrics", "interval": "15s"}]}}
