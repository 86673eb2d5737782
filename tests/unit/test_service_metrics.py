"""checks/service_metrics.py: the stand-in serves what upstream's does, the query answers are
read as TestAIServiceMetrics reads them, endpoints and templates are parsed strictly."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from conformance.checks import service_metrics as sm


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def stand_in():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-c", sm.STAND_IN],
                            env={**os.environ, "RUN_ID": "r1", "PORT": str(port),
                                 "BACKEND": "b1"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/healthz", timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    yield url
    proc.kill()
    proc.wait()


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def test_the_stand_in_counts_only_inference_requests(stand_in):
    for _ in range(3):
        assert json.loads(_get(f"{stand_in}/v1/infer")) == {"output": "ok", "backend": "b1"}
    with urllib.request.urlopen(f"{stand_in}/v1/infer", timeout=5) as r:  # says who answered
        assert r.headers["X-Backend"] == "b1"
    _get(f"{stand_in}/healthz")  # probes are not counted
    text = _get(f"{stand_in}/metrics")
    assert f'{sm.REQUESTS_TOTAL}{{{sm.RUN_LABEL}="r1"}} 4' in text
    assert f'{sm.LATENCY}_count{{{sm.RUN_LABEL}="r1"}} 4' in text
    assert f'{sm.LATENCY}_bucket{{{sm.RUN_LABEL}="r1",le="+Inf"}} 4' in text
    assert f'{sm.QUEUE_DEPTH}{{{sm.RUN_LABEL}="r1"}} 0' in text


def _answer(*values: str, status: str = "success", kind: str = "vector") -> str:
    return json.dumps({"status": status, "data": {"resultType": kind, "result": [
        {"metric": {}, "value": [0, v]} for v in values]}})


def test_query_answers_are_read_as_upstream_reads_them():
    assert sm.single_sample(_answer("10")) == 10.0
    assert sm.single_sample(_answer()) is None  # not scraped yet
    for bad in (_answer("1", "2"), _answer("1", kind="matrix"), _answer(status="error"),
                "<html>"):
        with pytest.raises(sm.QueryError):
            sm.single_sample(bad)


def test_counts_must_be_exact_and_a_count_above_n_fails_at_once():
    count, _hist, gauge = sm.expectations("r1", 10)
    assert count.query == f'max({sm.REQUESTS_TOTAL}{{conformance_run="r1"}})'
    assert sm.status(count, 10)[0] and not sm.status(count, 9)[0]
    assert not sm.status(count, None)[0]
    with pytest.raises(sm.Spoiled):
        sm.status(count, 11)
    assert sm.status(gauge, 3)[0]  # any gauge sample


def test_endpoints_and_templates():
    assert sm.parse_endpoint("monitoring/prometheus-operated:web") == sm.QueryEndpoint(
        "monitoring", "prometheus-operated", "web")
    assert sm.parse_endpoint("https://prom.example/").url == "https://prom.example"
    with pytest.raises(ValueError):
        sm.parse_endpoint("prometheus:9090")
    fields = sm.template_fields("ns1", "r1")
    assert sm.render("ns: {{ .Namespace }}/{{.ServiceName}}:{{.Port}}", fields) == \
        f"ns: ns1/{sm.WORKLOAD}:{sm.PORT}"
    for bad in ("{{.Nope}}", "{{if .Namespace}}x{{end}}"):
        with pytest.raises(ValueError):
            sm.render(bad, fields)
    assert sm.query_port([("metrics", 8080), ("web", 9090)]) == "web"
    assert sm.query_port([(None, 9090), (None, 80)]) == "9090"
    assert sm.query_port([("a", 1), ("b", 2)]) is None


def test_the_nodes_prometheus_keeps_services_by_their_scrape_annotation(tmp_path):
    from conformance.node import prometheus

    config = prometheus.scrape_config(tmp_path / "kubeconfig", tmp_path / "pki")
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    services = jobs[prometheus.SERVICE_JOB]
    assert services["kubernetes_sd_configs"][0]["kubeconfig_file"] == str(
        tmp_path / "kubeconfig")
    keep = services["relabel_configs"][0]
    assert keep["action"] == "keep" and keep["regex"] == sm.SCRAPE_ANNOTATIONS[
        "prometheus.io/scrape"]
    assert {j.get("metrics_path") for j in jobs.values() if j is not services} == {
        "/metrics", "/metrics/cadvisor"}  # what the node itself exports: the kubelet's
    missing = prometheus.scrape_config(tmp_path, tmp_path, keep_annotation="other")
    assert missing["scrape_configs"][0]["relabel_configs"][0]["regex"] == "other"
