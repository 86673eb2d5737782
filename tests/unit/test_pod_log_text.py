"""Pod logs come back as the text the container printed, on every client ``pyproject.toml``
accepts (kubernetes>=31), and a result the suite cannot read is never a finding.

The Python client before v37 runs a ``str`` response through ``json.loads`` then ``str()``
(kubernetes-client/python #811, #1354): a log that is one JSON line, as every kernel pod
prints, came back as ``{'ok': True, ...}`` and every kernel check failed on a healthy H100.
The tests below play that client on the installed one (its ``ApiClient.deserialize``
replaced by v31's, whatever the installed version) against a loopback socket serving a log.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from kubernetes import client

from conformance.cluster import evidence
from conformance.cluster.workloads import WorkloadResult
from tests.unit.test_client_retries import _kubeconfig

KERNEL_LOG = '{"kind": "membw", "ok": true, "gbps": 3061.25, "verdict": null}\n'


def _v31_deserialize(self, response, response_type, *_rest):
    """kubernetes 31's ``ApiClient.deserialize`` for a ``str`` response: the body through
    ``json.loads`` (when it parses), then ``str()``: a JSON object becomes its Python repr."""
    text = getattr(response, "data", response)  # v31 passes the RESTResponse, v37 the text
    try:
        data = json.loads(text)
    except ValueError:
        data = text
    assert response_type == "str"
    return str(data)


@pytest.fixture
def log_server():
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = KERNEL_LOG.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


@pytest.fixture
def old_client(monkeypatch):
    monkeypatch.setattr(client.ApiClient, "deserialize", _v31_deserialize)


def test_the_old_clients_deserialising_is_played(tmp_path, log_server, old_client):
    """The fake bites: read as the client reads it, the line is no longer JSON."""
    from conformance.cluster.client import connect

    cluster = connect(_kubeconfig(tmp_path, log_server.server_port))
    text = cluster.logs.read_namespaced_pod_log("pod", "ns")
    assert text.startswith("{'kind': 'membw', 'ok': True")
    with pytest.raises(ValueError):
        json.loads(text)


def test_a_one_json_line_log_reads_back_exactly(tmp_path, log_server, old_client):
    from conformance.cluster.client import connect

    cluster = connect(_kubeconfig(tmp_path, log_server.server_port))
    assert evidence.pod_logs(cluster, "ns", "pod") == KERNEL_LOG
    result = WorkloadResult("pod", "gpu-0", "Succeeded", evidence.pod_log_text(cluster, "ns",
                                                                                "pod"))
    assert result.json_line() == json.loads(KERNEL_LOG)
