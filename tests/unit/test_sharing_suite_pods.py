"""The sharing suite's checks on a cluster target, with the pod engine and the process control
stood in: SHARE-INT-001 judges the pods and reports pods/processes per N, a pod measurement
that does not count skips the check with its reason, a cluster of whole GPUs keeps the process
measurement, SHARE-ISO-001/002 run between pods where a node shares a GPU."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from test_sharing_pods import MPS, TIME_SLICED, WHOLE

from conformance.cluster import sharing_pods, workloads
from conformance.plugin.api import FINDING, MEASUREMENT
from conformance.suites.sharing import test_gpu_sharing as suite


def point(copies: int, rate: float, verdict: str = "pass") -> dict:
    return {"copies": copies, "unit": "TB/s", "per_copy": [{"rate": rate}] * copies,
            "aggregate_vs_solo": rate * copies / 3.0, "jain": 1.0, "verdict": verdict}


PROCESSES = {"verdict": "pass", "points": [point(1, 3.0), point(2, 1.5), point(4, 0.75)]}


class Request:
    def __init__(self, nodes) -> None:
        self.node = SimpleNamespace(user_properties=[])
        self.fixtures = {"namespace": "ns", "gpu_nodes": nodes, "require_gpu_nodes": nodes}

    def getfixturevalue(self, name: str):
        if name == "require_gpu_nodes":  # as the plugin's fixture: no GPU node fails at once
            assert self.fixtures[name], "no GPU node"
        return self.fixtures[name]

    def props(self, key: str) -> list[str]:
        return [v for k, v in self.node.user_properties if k == key]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    cluster = SimpleNamespace(core=SimpleNamespace(list_pod_for_all_namespaces=lambda **_: (
        SimpleNamespace(items=[]))))
    monkeypatch.setattr(suite.kernel_pods, "run", lambda *a, **k: workloads.WorkloadResult(
        "control", "gpu-0", "Succeeded", json.dumps(PROCESSES)))
    return SimpleNamespace(target="node", run_id="r", require_cluster=lambda: cluster,
                           options=SimpleNamespace(workload_image="img"))


def pods_doc(verdict: str = "pass", rate: float = 1.5) -> dict:
    return {"mode": "time-sliced pods", "node": "gpu-0", "resource": "nvidia.com/gpu",
            "thresholds": {}, "verdict": verdict,
            "points": [point(1, 3.0), point(2, rate, verdict)]}


def test_int_judges_the_pods_and_reports_pods_against_processes(env, monkeypatch) -> None:
    seen = {}

    def engine(cluster, namespace, run_id, image, where, kernel, counts):
        seen.update(sharing=where.sharing, kernel=kernel, counts=counts)
        return pods_doc(rate=1.497)

    monkeypatch.setattr(suite.sharing_pods, "interference_points", engine)
    request = Request([TIME_SLICED])
    suite.test_time_sliced_copies_share_fairly("membw", request, env, [])
    assert seen == {"sharing": "time-slicing", "kernel": "membw", "counts": [2, 4]}
    text = request.props(FINDING)[0]
    assert "time-sliced pods on gpu-0" in text and "= 0.998" in text
    ratio = [json.loads(m) for m in request.props(MEASUREMENT)
             if json.loads(m)["family"] == "pod_vs_process"]
    assert [p["copies"] for p in ratio[0]["value"]["points"]] == [1, 2]
    assert ratio[0]["value"]["points"][1]["ratio"] == pytest.approx(0.998)


def test_int_fails_when_the_pods_are_beyond_the_thresholds(env, monkeypatch) -> None:
    monkeypatch.setattr(suite.sharing_pods, "interference_points",
                        lambda *a: pods_doc("fail", rate=0.9))
    with pytest.raises(AssertionError, match="beyond the thresholds"):
        suite.test_time_sliced_copies_share_fairly("membw", Request([TIME_SLICED]), env, [])


def test_pods_that_do_not_count_skip_the_check_with_the_reason(env, monkeypatch) -> None:
    def engine(*_a):
        raise sharing_pods.NotRun("2 time-sliced pods on gpu-0: the pods got different GPUs")

    monkeypatch.setattr(suite.sharing_pods, "interference_points", engine)
    with pytest.raises(pytest.skip.Exception, match="not measured: 2 time-sliced pods"):
        suite.test_time_sliced_copies_share_fairly("membw", Request([TIME_SLICED]), env, [])


def test_whole_gpus_keep_the_process_measurement(env, monkeypatch) -> None:
    monkeypatch.setattr(suite.sharing_pods, "interference_points",
                        lambda *a: pytest.fail("no node shares a GPU: no pods"))
    request = Request([WHOLE])
    suite.test_time_sliced_copies_share_fairly("membw", request, env, [])
    assert "whole GPUs only" in request.props(FINDING)[0]


def test_no_gpu_node_fails_before_any_pod_is_made(env, monkeypatch) -> None:
    """A cluster without GPU nodes (kind on a host without GPUs): the check fails on the
    nodes there are at once, where its control pod would wait unscheduled for minutes."""
    monkeypatch.setattr(suite.kernel_pods, "run", lambda *a, **k: pytest.fail("a pod was made"))
    with pytest.raises(AssertionError, match="no GPU node"):
        suite.test_time_sliced_copies_share_fairly("membw", Request([]), env, [])


@pytest.mark.parametrize("mode", ["memory", "fault"])
def test_isolation_runs_between_pods_where_a_node_shares_a_gpu(env, monkeypatch, mode) -> None:
    monkeypatch.setattr(suite.sharing_pods, f"{mode}_isolation",
                        lambda c, ns, r, img, where: {"finding": f"{mode} under {where.mode}"})
    request = Request([MPS])
    suite.test_isolation_finding(mode, request, env, [])
    assert request.props(FINDING) == [f"{mode} under MPS pods"]

    def not_run(*_a):
        raise sharing_pods.NotRun("a pod never started")

    monkeypatch.setattr(suite.sharing_pods, f"{mode}_isolation", not_run)
    with pytest.raises(pytest.skip.Exception, match="a pod never started"):
        suite.test_isolation_finding(mode, Request([MPS]), env, [])


def lat_point(mode: str, sharers: int, p99: float) -> dict:
    return {"mode": mode, "sharers": sharers, "n": 2000,
            "latency_us": {"p50": 300.0, "p99": p99, "p999": 2 * p99}}


LAT_PROCESSES = {"experiment": "latency", "finding": "processes: p99 grows",
                 "points": [lat_point("solo", 0, 400.0), lat_point("time-slicing", 1, 800.0),
                            lat_point("time-slicing", 2, 1600.0)]}


@pytest.fixture
def lat_env(env, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    monkeypatch.setattr(suite.kernel_pods, "run", lambda *a, **k: workloads.WorkloadResult(
        "control", "gpu-0", "Succeeded", json.dumps(LAT_PROCESSES)))
    return env


def test_lat_measures_the_client_pod_beside_sharer_pods_against_processes(
        lat_env, monkeypatch) -> None:
    seen = {}

    def engine(cluster, namespace, run_id, image, where, sharers):
        seen.update(sharing=where.sharing, sharers=sharers)
        return {"mode": where.mode, "node": "gpu-0", "resource": "nvidia.com/gpu",
                "finding": "pods: p99 grows.",
                "points": [lat_point("solo", 0, 404.0), lat_point("time-slicing", 1, 808.0),
                           lat_point("time-slicing", 2, 1600.0)]}

    monkeypatch.setattr(suite.sharing_pods, "latency_points", engine)
    request = Request([TIME_SLICED])
    suite.test_tail_latency_beside_time_sliced_sharers(request, lat_env, [])
    assert seen == {"sharing": "time-slicing", "sharers": [1, 2, 4]}
    text = request.props(FINDING)[0]
    assert text.startswith("time-sliced pods on gpu-0 (nvidia.com/gpu): pods: p99 grows.")
    assert "S=1: p99 pods 0.808 / processes 0.800 ms = 1.010" in text
    recorded = [json.loads(m) for m in request.props(MEASUREMENT)]
    versus = next(m["value"] for m in recorded if m["family"] == "pod_vs_process")
    assert versus["experiment"] == "latency" and versus["mode"] == "time-sliced pods"
    rows = {r["sharers"]: r for r in versus["points"]}
    assert sorted(rows) == [0, 1, 2]
    assert (rows[1]["pod_p50"], rows[1]["process_p50"], rows[1]["p50_ratio"]) == (300, 300, 1)
    assert rows[1]["p99_ratio"] == pytest.approx(1.01)
    assert rows[1]["pod_p999"] == 1616.0 and rows[1]["process_p999"] == 1600.0
    assert [m["value"].get("mode") for m in recorded if m["family"] == "tail_latency"] == \
        [None, "time-sliced pods"]  # the processes (the control), then the pods


def test_lat_pods_that_do_not_count_make_the_check_not_run(lat_env, monkeypatch) -> None:
    def engine(*_a):
        raise sharing_pods.NotRun("the client pod alone on gpu-0 (time-sliced pods): pod "
                                  "lat-0-0: pod never started: ErrImagePull")

    monkeypatch.setattr(suite.sharing_pods, "latency_points", engine)
    request = Request([TIME_SLICED])
    with pytest.raises(pytest.skip.Exception, match=r"not-run.*never started: ErrImagePull"):
        suite.test_tail_latency_beside_time_sliced_sharers(request, lat_env, [])
    assert request.props(FINDING) == []


def test_lat_on_whole_gpus_keeps_the_process_measurement(lat_env, monkeypatch) -> None:
    monkeypatch.setattr(suite.sharing_pods, "latency_points",
                        lambda *a: pytest.fail("no node shares a GPU: no pods"))
    request = Request([WHOLE])
    suite.test_tail_latency_beside_time_sliced_sharers(request, lat_env, [])
    assert request.props(FINDING) == ["processes: p99 grows (processes in one pod: no node "
                                      "lets two pods share a GPU, whole GPUs only)"]
