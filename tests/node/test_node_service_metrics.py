"""ai_service_metrics on the real node: the node's own Prometheus (a host process, Debian's
package) finds the inference stand-in through Kubernetes service discovery and collects
exactly its N requests (INF-MET-001 passes); two faults in the monitoring system fail exactly
INF-MET-001: Prometheus's scrape selection no longer keeps the workload's Service, and
Prometheus stopped. Each fault is undone afterwards.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from conformance.cluster.client import connect
from conformance.controlplane.components import ControlPlane
from conformance.node import prometheus
from conformance.node.state import NodeState
from tests.helpers import assert_fails_exactly, run_suites, verdicts
from tests.node import node_env
from tests.node.node_env import NODE_NAME

pytestmark = pytest.mark.xdist_group(node_env.XDIST_GROUP)

SUITE = "inference/test_service_metrics.py"  # INF-MET-001 alone (not the Gateway checks)
# the fault that hides the workload fails after the collection timeout: short here, where
# Prometheus scrapes every 2 s and the healthy run collects in a few seconds
SHORT_COLLECTION = ["--metrics-collection-timeout=20"]
TIMEOUT_S = 240.0


@pytest.fixture
def node_prometheus(node):
    state = NodeState.load(NODE_NAME)
    if prometheus.COMPONENT not in state.pids:
        pytest.skip("no prometheus on this host (apt-get install prometheus)")
    return state


def test_the_nodes_prometheus_collects_the_stand_ins_metrics(node, node_prometheus, tmp_path):
    code, doc, out = run_suites(Path(node.kubeconfig), tmp_path, SUITE, target="node",
                                timeout=TIMEOUT_S)
    assert verdicts(doc, "pass") == {"INF-MET-001"}, out[-3000:]
    assert code == 0, out[-2000:]
    # and what the node itself exports: both kubelet endpoints scraped and up
    up = json.loads(urllib.request.urlopen(
        f"{prometheus.url()}/api/v1/query?query=up", timeout=10).read())["data"]["result"]
    kubelet = {r["metric"]["job"]: r["value"][1] for r in up
               if r["metric"]["job"].startswith("kubelet")}
    assert kubelet == {"kubelet": "1", "kubelet-cadvisor": "1"}, up


def _selector_misses(state: NodeState) -> None:
    cp = ControlPlane(state.name).state()
    prometheus.write_config(state, cp, keep_annotation="only-for-another-workload")
    prometheus.reload(state)


def _selector_back(state: NodeState) -> None:
    prometheus.write_config(state, ControlPlane(state.name).state())
    prometheus.reload(state)


def _prometheus_down(state: NodeState) -> None:
    prometheus.stop(state)


def _prometheus_back(state: NodeState) -> None:
    prometheus.run(state, progress=lambda _m: None)


FAULTS = {"scrape-selector-misses-the-workload": (_selector_misses, _selector_back, "scrape"),
          "prometheus-down": (_prometheus_down, _prometheus_back, "query API")}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_monitoring_fault_fails_exactly_the_service_metrics(fault, node, node_prometheus,
                                                            tmp_path):
    play, undo, word = FAULTS[fault]
    play(node_prometheus)
    try:
        code, doc, out = run_suites(Path(node.kubeconfig), tmp_path, SUITE, target="node",
                                    extra=SHORT_COLLECTION, timeout=TIMEOUT_S)
    finally:
        undo(NodeState.load(NODE_NAME))
    assert_fails_exactly(fault, code, doc, out, {"INF-MET-001"}, word,
                         connect(str(node.kubeconfig)))
