"""A loopback HTTP socket that answers every request with a scripted sequence of statuses (a
200 with the version document or a given body), and a client connected to it: for tests of
the client layer (retries, log reading), not a stand-in for an API server.
"""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from conformance.cluster.client import connect

VERSION = {"major": "1", "minor": "36", "gitVersion": "v1.36.3", "gitCommit": "",
           "gitTreeState": "clean", "buildDate": "2026-12-02T00:00:00Z", "goVersion": "go1.26",
           "compiler": "gc", "platform": "linux/amd64"}


def _serve(statuses: list[int], body_200: bytes | None = None,
           content_type: str = "application/json"):
    """A loopback server answering every GET with the next of ``statuses``; a 200 with
    ``body_200`` (the version document when None)."""
    seen: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            status = statuses[min(len(seen), len(statuses) - 1)]
            seen.append(status)
            body = json.dumps(VERSION if status == 200
                              else {"kind": "Status", "code": status}).encode()
            if status == 200 and body_200 is not None:
                body = body_200
            self.send_response(status)
            if status == 429:
                self.send_header("Retry-After", "0")
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def kubeconfig(tmp_path, port: int):
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x"}))
    return str(path)


@contextlib.contextmanager
def scripted_cluster(tmp_path, statuses: list[int], body_200: bytes | None = None,
                     content_type: str = "application/json"):
    """A connected client and the statuses its requests were answered with, in order."""
    server, seen = _serve(statuses, body_200, content_type)
    try:
        yield connect(kubeconfig(tmp_path, server.server_port)), seen
    finally:
        server.shutdown()
