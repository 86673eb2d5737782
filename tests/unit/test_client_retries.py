"""The suite's client retries 429 (with Retry-After) and transient 5xx, and gives up on 4xx.

The endpoint is a loopback HTTP socket that answers /version with a scripted sequence of
statuses: a test of the retry layer, not a stand-in for an API server (the integration tests
restart the real API server mid-run for that).
"""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import connect
from tests.unit.loopback_api import kubeconfig, scripted_cluster


@pytest.mark.parametrize("transient", [429, 500, 503])
def test_transient_statuses_are_retried(tmp_path, transient):
    with scripted_cluster(tmp_path, [transient, transient, 200]) as (cluster, seen):
        assert cluster.version.get_code().git_version == "v1.36.3"
        assert seen == [transient, transient, 200]
        assert cluster.counter.total == 1  # one logical request, retried underneath


def test_client_errors_are_not_retried(tmp_path):
    with scripted_cluster(tmp_path, [404, 200]) as (cluster, seen):
        with pytest.raises(ApiException) as err:
            cluster.version.get_code()
        assert err.value.status == 404 and seen == [404]


def test_log_reads_give_up_on_a_kubelet_500_at_once(tmp_path):
    """A node that cannot serve logs (500) must not stall a failure dump for ~40 s of retries."""
    from conformance.cluster.evidence import pod_logs

    with scripted_cluster(tmp_path, [500, 500, 500]) as (cluster, seen):
        assert pod_logs(cluster, "ns", "pod") == "(logs unavailable: 500 Internal Server Error)"
        assert seen == [500]


def test_log_reads_still_ride_out_throttling(tmp_path):
    with scripted_cluster(tmp_path, [429, 200]) as (cluster, seen):
        cluster.logs.read_namespaced_pod_log("pod", "ns")
        assert seen == [429, 200]


def test_reachability_probe_gives_up_in_seconds(tmp_path):
    """A wrong server address is reported quickly, not after the run's long retry budget."""
    import socket
    import time

    from conformance.cluster.client import check_reachable
    from conformance.common.errors import UsageError

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cluster = connect(kubeconfig(tmp_path, port))
    t0 = time.monotonic()
    with pytest.raises(UsageError, match="unreachable"):
        check_reachable(cluster)
    assert time.monotonic() - t0 < 10
