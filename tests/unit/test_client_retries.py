"""The suite's client retries 429 (with Retry-After) and transient 5xx, and gives up on 4xx.

The endpoint is a loopback HTTP socket that answers /version with a scripted sequence of
statuses: a test of the retry layer, not a stand-in for an API server (the integration tests
restart the real API server mid-run for that).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import connect

VERSION = {"major": "1", "minor": "36", "gitVersion": "v1.36.3", "gitCommit": "",
           "gitTreeState": "clean", "buildDate": "2026-12-02T00:00:00Z", "goVersion": "go1.26",
           "compiler": "gc", "platform": "linux/amd64"}


def _serve(statuses: list[int]):
    seen: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            status = statuses[min(len(seen), len(statuses) - 1)]
            seen.append(status)
            body = json.dumps(VERSION if status == 200
                              else {"kind": "Status", "code": status}).encode()
            self.send_response(status)
            if status == 429:
                self.send_header("Retry-After", "0")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def _kubeconfig(tmp_path, port: int):
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x"}))
    return str(path)


@pytest.mark.parametrize("transient", [429, 500, 503])
def test_transient_statuses_are_retried(tmp_path, transient):
    server, seen = _serve([transient, transient, 200])
    try:
        cluster = connect(_kubeconfig(tmp_path, server.server_port))
        assert cluster.version.get_code().git_version == "v1.36.3"
        assert seen == [transient, transient, 200]
        assert cluster.counter.total == 1  # one logical request, retried underneath
    finally:
        server.shutdown()


def test_client_errors_are_not_retried(tmp_path):
    server, seen = _serve([404, 200])
    try:
        cluster = connect(_kubeconfig(tmp_path, server.server_port))
        with pytest.raises(ApiException) as err:
            cluster.version.get_code()
        assert err.value.status == 404 and seen == [404]
    finally:
        server.shutdown()
