"""Pod logs as the text the container printed: the one way the project reads them.

The Python client before v37 runs a ``str`` response through ``json.loads`` and then ``str()``:
a log that is one JSON line (``{"ok": true}``, what every kernel pod prints) comes back as
its Python repr (``{'ok': True}``), which no JSON parser reads (kubernetes-client/python
#811, #1354). ``pyproject.toml`` accepts ``kubernetes>=31``, so the log is fetched raw
(``_preload_content=False``) and its bytes decoded here, whatever the client's version.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client


def read_pod_log(core: client.CoreV1Api, name: str, namespace: str, **kwargs: Any) -> str:
    """The log of pod ``name`` as text, byte for byte (``kwargs``: ``container``,
    ``tail_lines``, ... as ``read_namespaced_pod_log`` takes them). A refusal (the kubelet
    cannot serve it, the pod is gone) raises ``ApiException`` as the client does."""
    response = core.read_namespaced_pod_log(name, namespace, _preload_content=False, **kwargs)
    try:
        data = response.data
    finally:
        response.release_conn()
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else str(data)
