"""Wake a controller when the cluster changes: one raw watch per resource, each setting one
:class:`threading.Event` on anything it hears.

A controller that polls lists every object every interval, also when nothing changed, which
is what an idle stand-in loop spent its CPU on (with its API server: ~5 % of a core per sim,
measured). With these watches it runs a pass when something changed, and else only every
resync interval. The watches read the stream raw (``_preload_content=False``): what changed
does not matter, only that something did, so no event is decoded into objects, except where a
kind changes without news: a node's heartbeat (a kubelet's or KWOK's, every ~10 s per node)
rewrites only its conditions' heartbeat times, and woke an idle sim's loop for a full pass
(~15 requests) some 25 times a minute.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import Cluster

WATCH_TIMEOUT_S = 300  # the API server ends a watch after this; it is opened again
RETRY_AFTER_S = 5.0     # a watch that failed (API not served yet, server restarting)


@dataclass(frozen=True)
class Watched:
    """One resource to watch: how to list it (a bound ``list_*`` method) and its arguments;
    ``news``: what of an object counts as a change (None: any event does)."""

    name: str
    lister: Callable[..., Any]
    args: tuple = ()
    news: Callable[[dict], str] | None = None


def node_without_heartbeats(node: dict) -> str:
    """A node as the heartbeat leaves it: without its resource version, managed-field times
    and conditions' heartbeat times (a condition that changes status still counts)."""
    meta = {k: v for k, v in node.get("metadata", {}).items()
            if k not in ("resourceVersion", "managedFields")}
    status = dict(node.get("status") or {})
    status["conditions"] = [{k: v for k, v in c.items() if k != "lastHeartbeatTime"}
                            for c in status.get("conditions") or []]
    return json.dumps([meta, node.get("spec"), status], sort_keys=True)


def core_resources(cluster: Cluster) -> list[Watched]:
    """The built-in kinds a GPU stack's controllers act on."""
    return [Watched("nodes", cluster.core.list_node, news=node_without_heartbeats),
            Watched("pods", cluster.core.list_pod_for_all_namespaces),
            Watched("configmaps", cluster.core.list_config_map_for_all_namespaces),
            Watched("daemonsets", cluster.apps.list_daemon_set_for_all_namespaces),
            Watched("deployments", cluster.apps.list_deployment_for_all_namespaces)]


def custom_resource(cluster: Cluster, group: str, version: str, plural: str) -> Watched:
    """A cluster-scoped custom (or not yet built-in) kind; watched once it is served."""
    return Watched(plural, cluster.custom.list_cluster_custom_object, (group, version, plural))


class Changes:
    """Daemon threads watching ``resources``; :attr:`event` is set whenever one hears
    anything (the initial list of a newly opened watch included)."""

    def __init__(self, resources: Iterable[Watched],
                 on_error: Callable[[str], None] = lambda _line: None) -> None:
        self.event = threading.Event()
        self._on_error = on_error
        for watched in resources:
            threading.Thread(target=self._watch, args=(watched,), daemon=True,
                             name=f"watch-{watched.name}").start()

    def _watch(self, watched: Watched) -> None:
        while True:
            try:
                stream = watched.lister(*watched.args, watch=True, _preload_content=False,
                                        timeout_seconds=WATCH_TIMEOUT_S)
                seen: dict[str, str] = {}  # per object, its news at its last event
                for line in stream:
                    if watched.news is None or _is_news(line, watched.news, seen):
                        self.event.set()
                self.event.set()  # the watch ended: what it missed until reopened counts
            except (ApiException, OSError, ValueError) as exc:
                self._on_error(f"watch of {watched.name} failed "
                               f"({getattr(exc, 'status', '') or type(exc).__name__}); "
                               f"again in {RETRY_AFTER_S:g}s")
                self.event.set()
                time.sleep(RETRY_AFTER_S)
            except Exception as exc:  # urllib3's protocol errors: the watch is opened again
                self._on_error(f"watch of {watched.name} ended: {exc}")
                self.event.set()
                time.sleep(RETRY_AFTER_S)


def _is_news(line: bytes, news: Callable[[dict], str], seen: dict[str, str]) -> bool:
    """Whether a watch event changed what ``news`` keeps of its object (an event that cannot
    be read counts: better a pass too many than a change missed)."""
    try:
        event = json.loads(line)
        obj = event["object"]
        name = obj["metadata"]["name"]
        now = news(obj)
    except (ValueError, KeyError, TypeError):
        return True
    if event.get("type") == "DELETED":
        seen.pop(name, None)
        return True
    before, seen[name] = seen.get(name), now
    return before != now
