"""The one way the suite talks to a cluster: a Kubernetes client with retries and a request count.

Retries: connection failures (an API server restarting), 429 throttling and transient 5xx are
retried with exponential backoff by urllib3 (``Retry-After`` honoured). Every request is
counted, so a run can report how many API requests it made (the 500-node scale check).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import (
    ApiException,
    ConflictException,
    ForbiddenException,
    NotFoundException,
    UnprocessableEntityException,
)
from kubernetes.config.config_exception import ConfigException

from conformance.common import yamlfile
from conformance.common.errors import UsageError

RETRY_TOTAL = 8  # with backoff 0.5 s doubling (capped at 10 s) this rides out ~40 s of outage
RETRY_BACKOFF_S = 0.5
RETRY_STATUSES = (429, 500, 502, 503, 504)
# Container logs come from the kubelet through the API server: a 500 there means the node
# cannot serve them (no kubelet, a gone container), which retrying does not change.
LOG_RETRY_TOTAL = 2
LOG_RETRY_STATUSES = (429, 503)
# "Is anybody there?" before a run: a wrong address should say so in seconds, not after the
# ~40 s a running suite spends riding out an API server restart.
PROBE_RETRY_TOTAL = 2
# In a pod without a kubeconfig, connect() takes the pod's ServiceAccount from here.
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"

# ---- API statuses, mapped once (kopf's way) -------------------------------------------------
# The client raises these subclasses of ApiException for the statuses the suite acts on; code
# catches the class (``except NotFound``), never compares ``exc.status``.
NotFound = NotFoundException              # 404: no such object (or API not served)
Conflict = ConflictException              # 409: already exists, or changed since it was read
Forbidden = ForbiddenException            # 403: the identity may not do this
Invalid = UnprocessableEntityException    # 422: the API server's validation refused it
T = TypeVar("T")


class RequestCounter:
    """Thread-safe count of API requests by verb."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_verb: dict[str, int] = {}

    def add(self, verb: str) -> None:
        with self._lock:
            self.by_verb[verb] = self.by_verb.get(verb, 0) + 1

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.by_verb.values())


def _retry_policy(total: int = RETRY_TOTAL,
                  statuses: tuple[int, ...] = RETRY_STATUSES) -> urllib3.Retry:
    return urllib3.Retry(
        total=total,
        connect=total,
        read=2,
        status=total,
        backoff_factor=RETRY_BACKOFF_S,
        backoff_max=10,
        status_forcelist=statuses,
        allowed_methods=None,  # retry every verb: the suite's writes are idempotent or named
        respect_retry_after_header=True,
        raise_on_status=False,
    )


@dataclass
class Cluster:
    """A connected cluster: typed API groups over one counted, retrying ApiClient."""

    api_client: client.ApiClient
    kubeconfig: str | None
    context: str | None
    counter: RequestCounter = field(default_factory=RequestCounter)

    def __post_init__(self) -> None:
        self.core = client.CoreV1Api(self.api_client)
        self.logs = client.CoreV1Api(
            self._sibling(_retry_policy(LOG_RETRY_TOTAL, LOG_RETRY_STATUSES)))
        self.probe = client.VersionApi(self._sibling(_retry_policy(PROBE_RETRY_TOTAL)))
        self.apps = client.AppsV1Api(self.api_client)
        self.batch = client.BatchV1Api(self.api_client)
        self.autoscaling = client.AutoscalingV2Api(self.api_client)
        self.apiregistration = client.ApiregistrationV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)
        self.rbac = client.RbacAuthorizationV1Api(self.api_client)
        self.version = client.VersionApi(self.api_client)
        self.apiext = client.ApiextensionsV1Api(self.api_client)
        self.authz = client.AuthorizationV1Api(self.api_client)
        _count_requests(self.api_client, self.counter)

    def _sibling(self, retries: urllib3.Retry) -> client.ApiClient:
        """The same identity and server under another retry policy (counted alike)."""
        import copy

        configuration = copy.copy(self.api_client.configuration)
        configuration.retries = retries
        sibling = client.ApiClient(configuration)
        _count_requests(sibling, self.counter)
        return sibling

    def impersonating(self, username: str) -> client.CoreV1Api:
        """The core API as ``username`` (``Impersonate-User``; the caller needs the impersonate
        verb), on the same server, credentials and retries, counted alike."""
        sibling = self._sibling(self.api_client.configuration.retries)
        sibling.set_default_header("Impersonate-User", username)
        return client.CoreV1Api(sibling)

    def raw(self, method: str, path: str, body: object = None,
            query: list[tuple[str, str]] | None = None, *, probe: bool = False) -> str:
        """A request to a path no typed API covers (discovery documents, /metrics, a service
        proxy's ``/api/v1/namespaces/NS/services/NAME:PORT/proxy/...``), through the same
        client (counted and retried alike); the response body. ``probe``: retried only
        briefly (the probe's policy), for a backend whose 503 should say so in seconds."""
        api = self.probe.api_client if probe else self.api_client
        headers = {"Content-Type": "application/json"} if body is not None else None
        params = api.param_serialize(method, path, body=body, header_params=headers,
                                     query_params=query or [], auth_settings=["BearerToken"])
        response = api.call_api(*params)
        data = response.read() if hasattr(response, "read") else response.data
        text = data.decode() if isinstance(data, bytes) else str(data)
        if not 200 <= response.status < 300:  # NotFound, Forbidden, ... as the typed APIs raise
            raise ApiException.from_response(http_resp=response, body=text, data=None)
        return text

    @property
    def server(self) -> str:
        return self.api_client.configuration.host

    def server_version(self) -> str:
        return self.version.get_code().git_version


def _count_requests(api_client: client.ApiClient, counter: RequestCounter) -> None:
    rest = api_client.rest_client
    original = rest.request

    def request(method, url, *args, **kwargs):
        counter.add(method.upper())
        return original(method, url, *args, **kwargs)

    rest.request = request


def kubeconfig_contexts(path: str) -> list[str]:
    doc = yamlfile.load(path, "kubeconfig", fix="fix or regenerate it")
    if not isinstance(doc, dict) or not isinstance(doc.get("contexts", []), list):
        raise UsageError(f"kubeconfig {path} is malformed (no contexts list)")
    return [c.get("name") for c in doc.get("contexts") or [] if isinstance(c, dict)]


def connect(kubeconfig: str | None = None, context: str | None = None, *,
            timeout_s: float = 15.0) -> Cluster:
    """Connect and check reachability; bad input becomes a one-line :class:`UsageError`.

    Without a kubeconfig (none given, no KUBECONFIG, no ~/.kube/config) inside a pod
    (KUBERNETES_SERVICE_HOST set), the pod's ServiceAccount is used: the in-cluster config.
    """
    path = kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None
    if path is None:
        default = Path.home() / ".kube" / "config"
        path = str(default) if default.is_file() else None
    if path is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return _connect_in_cluster()
    if path is None:
        raise UsageError("no kubeconfig: pass --kubeconfig, set KUBECONFIG, or use --target sim")
    contexts = kubeconfig_contexts(path)
    if context is not None and context not in contexts:
        known = ", ".join(contexts) or "none"
        raise UsageError(f"unknown context {context!r} in {path} (contexts: {known})")
    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=path, context=context,
                                client_configuration=configuration, persist_config=False)
    except (ConfigException, ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"kubeconfig {path} cannot be used: {_one_line(exc)}") from None
    configuration.retries = _retry_policy()
    api_client = client.ApiClient(configuration)
    cluster = Cluster(api_client=api_client, kubeconfig=path, context=context)
    return cluster


def service_account_dir() -> Path:
    """Where a pod's ServiceAccount files are (token, ca.crt, namespace): the kubelet's mount,
    or GPUCONF_SERVICE_ACCOUNT_DIR (a local process that plays a pod, as the tests do)."""
    return Path(os.environ.get("GPUCONF_SERVICE_ACCOUNT_DIR") or SERVICE_ACCOUNT_DIR)


def _connect_in_cluster() -> Cluster:
    """The pod's own identity: KUBERNETES_SERVICE_HOST/PORT and the ServiceAccount token (re-read
    when the kubelet rotates it), as client-go's rest.InClusterConfig."""
    folder = service_account_dir()
    configuration = client.Configuration()
    try:
        config.incluster_config.InClusterConfigLoader(
            token_filename=str(folder / "token"), cert_filename=str(folder / "ca.crt"),
        ).load_and_set(configuration)
    except ConfigException as exc:
        raise UsageError(f"in-cluster config cannot be used ({_one_line(exc)}): pass "
                         "--kubeconfig") from None
    configuration.retries = _retry_policy()
    return Cluster(api_client=client.ApiClient(configuration), kubeconfig=None, context=None)


def check_reachable(cluster: Cluster, timeout_s: float = 10.0) -> str:
    """The server's version, or a usage error naming the server that did not answer."""
    try:
        resp = cluster.probe.get_code(_request_timeout=timeout_s)
    except (urllib3.exceptions.HTTPError, OSError, client.exceptions.ApiException) as exc:
        raise UsageError(f"cluster at {cluster.server} is unreachable ({_one_line(exc)}): check "
                         "--kubeconfig/--context, or use --target sim") from None
    return resp.git_version


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


@contextlib.contextmanager
def already_done(*errors: type[ApiException]) -> Iterator[None]:
    """Around a write whose refusal with one of ``errors`` means what it wanted is already
    so: NotFound on a delete (already gone), Conflict on a create (already there)."""
    with contextlib.suppress(*errors):
        yield



def read_or_none(read: Callable[..., T], *args, **kwargs) -> T | None:
    """``read(*args, **kwargs)``, or None when the object is not there (404)."""
    try:
        return read(*args, **kwargs)
    except NotFound:
        return None


def create_or_replace(create: Callable[[], T], replace: Callable[[], T]) -> T:
    """``create()``; when the object is already there (409), ``replace()`` it."""
    try:
        return create()
    except Conflict:
        return replace()


def get_text(cluster: Cluster, path: str, query: list[tuple[str, str]] | None = None, *,
             probe: bool = False) -> str:
    """A raw GET through the suite's client: :meth:`Cluster.raw`."""
    return cluster.raw("GET", path, query=query, probe=probe)
