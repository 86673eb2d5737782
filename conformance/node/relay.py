"""The ``kubernetes`` Service for pods: a TCP relay from the Service's cluster IP to the API server.

Pods find the API server at ``KUBERNETES_SERVICE_HOST:443`` (10.96.0.1, the first address of
the service range). kube-proxy is what normally makes that address answer, through iptables or
nftables; neither tool exists on these machines, and the API server listens on loopback only.
So the node puts the cluster IP on ``lo`` and this relay forwards its port 443 to the API
server, byte for byte (TLS stays end to end: the API server's certificate names the cluster IP).
It serves that one Service, nothing else: no other Service is reachable from pods.

    python -m conformance.node.relay LISTEN_IP:PORT TARGET_IP:PORT
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading

BUFFER = 1 << 16


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(BUFFER):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _serve_one(client: socket.socket, target: tuple[str, int]) -> None:
    try:
        upstream = socket.create_connection(target, timeout=10)
    except OSError:
        client.close()
        return
    upstream.settimeout(None)
    back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    back.start()
    _pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(listen: tuple[str, int], target: tuple[str, int]) -> None:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(listen)
    server.listen(128)
    print(f"relaying {listen[0]}:{listen[1]} -> {target[0]}:{target[1]}", flush=True)
    while True:
        client, _addr = server.accept()
        threading.Thread(target=_serve_one, args=(client, target), daemon=True).start()


def _addr(text: str) -> tuple[str, int]:
    host, port = text.rsplit(":", 1)
    return host, int(port)


if __name__ == "__main__":
    serve(_addr(sys.argv[1]), _addr(sys.argv[2]))
