"""Sharing / on real GPUs: what time-slicing does to copies that share one GPU.

On every cluster target the copies are pods: N pods, each holding one unit, placed on one GPU
by the cluster's own sharing (time-slicing, MPS or MIG, read from the node's labels), started
together by a barrier through the API and checked from inside to share that GPU
(conformance.cluster.sharing_pods). Pods that got other GPUs, never started, gave no readable
result or started beyond the skew bound make the check not-run (with the reason),
never a figure. The same copies as processes in one pod holding one GPU are the control of
SHARE-INT-001 and SHARE-LAT-001: their findings give, per N, the pods' aggregate (per S
sharers beside the latency client, its p50/p99/p99.9), the processes' and their ratio.
Where no node lets two pods share a GPU (whole GPUs only), and on --target local, the
processes are the measurement. Isolation results are
findings: the check passes once it has measured what happened, and its message says what that
was.

Checklist:
- SHARE-INT-001 the same kernel alone and in 2 and 4 copies: per-copy slowdown, aggregate vs
  solo, Jain's fairness, launch latency p50/p99, against the thresholds
- SHARE-ISO-001 finding: one copy holds most memory; can the other allocate?
- SHARE-ISO-002 finding: one copy hits an illegal address; does the other keep its speed?
- SHARE-LAT-001 finding: a batch-1 inference-like client's p50/p99/p99.9 alone and beside 1, 2
  and 4 time-sliced sharers running GEMM, and the time slice the data implies
"""

from __future__ import annotations

import json

import pytest

from conformance.checks import shared_gpu
from conformance.cluster import evidence as ev
from conformance.cluster import kernel_pods, sharing_pods
from conformance.plugin.api import finding, not_run, record_measurement, require_result
from conformance.run import local_gpu

EXPERIMENT_TIMEOUT_S = 600.0
POD_COUNTS = [2, 4]  # beside the solo pod; no more than one GPU's units on the node
SHARERS = [1, 2, 4]  # beside the latency client; pods: no more than one GPU's units in all


def _shared_gpu(request, gpu_env) -> shared_gpu.Placement | None:
    """Where pods share one GPU on this cluster (None on --target local, or whole GPUs only)."""
    if gpu_env.target == "local":
        return None
    return sharing_pods.choose(gpu_env.require_cluster(), request.getfixturevalue("gpu_nodes"))


def _not_run(exc: sharing_pods.NotRun) -> None:
    not_run(f"the pods sharing one GPU were not measured: {exc}")


def _experiment(request, gpu_env, args: list[str]) -> dict:
    if gpu_env.target == "local":
        try:
            return local_gpu.run_kernels(args, timeout=EXPERIMENT_TIMEOUT_S)
        except local_gpu.Unavailable as exc:
            pytest.skip(f"cannot run GPU experiments here: {exc}")
    # no GPU node: fail now with the nodes there are, not after the pod's wait to be scheduled
    request.getfixturevalue("require_gpu_nodes")
    namespace = request.getfixturevalue("namespace")
    r = kernel_pods.run(gpu_env.require_cluster(), namespace, gpu_env.run_id, args,
                        image=gpu_env.options.workload_image)
    doc = r.json_line()
    require_result(r, doc is not None)
    assert doc is not None, f"experiment pod {r.pod}: {r.diagnosis or r.phase}\n{r.logs[-800:]}"
    return doc


@pytest.mark.requirement("SHARE-INT-001")
@pytest.mark.parametrize("kernel", ["membw", "fp32"])
def test_time_sliced_copies_share_fairly(kernel, request, gpu_env, attachments):
    doc = _experiment(request, gpu_env, ["interference", "--kernel", kernel, "--copies",
                                         "1,2,4", "--seconds", "3"])
    for point in doc.get("points") or [doc]:
        record_measurement(request, "interference", point)
    attachments.append(ev.Evidence(f"interference-{kernel}.json", json.dumps(doc, indent=1)))
    if doc.get("error"):
        pytest.fail(f"interference experiment failed: {doc['error']}")
    where = _shared_gpu(request, gpu_env)
    if where is None:
        summary = _summary(doc.get("points") or [doc])
        finding(request, f"{kernel}, processes sharing one GPU: {summary}"
                + ("" if gpu_env.target == "local" else
                   " (no node lets two pods share a GPU: whole GPUs only)"))
        assert doc.get("verdict") == "pass", \
            f"beyond the thresholds {doc.get('thresholds')}: {summary}"
        return
    try:
        pods = sharing_pods.interference_points(
            gpu_env.require_cluster(), request.getfixturevalue("namespace"), gpu_env.run_id,
            gpu_env.options.workload_image, where, kernel, POD_COUNTS)
    except sharing_pods.NotRun as exc:
        _not_run(exc)
    for point in pods["points"]:
        record_measurement(request, "interference", point)
    ratio = sharing_pods.pod_vs_process(pods["points"], doc.get("points") or [])
    record_measurement(request, "pod_vs_process", {"kernel": kernel, "mode": pods["mode"],
                                                   "node": pods["node"], "points": ratio})
    pods["pod_vs_process"] = ratio
    attachments.append(ev.Evidence(f"interference-{kernel}-pods.json", json.dumps(pods, indent=1)))
    summary = _summary(pods["points"])
    versus = "; ".join(f"N={r['copies']}: pods {r['pod_aggregate']:.4g} / processes "
                       f"{r['process_aggregate']:.4g} {r.get('unit') or ''} = {r['ratio']:.3f}"
                       for r in ratio if r.get("ratio") is not None)
    finding(request, f"{kernel}, {pods['mode']} on {pods['node']} ({pods['resource']}): "
                     f"{summary}; against processes in one pod: {versus or 'no common N'}")
    assert pods["verdict"] == "pass", \
        f"beyond the thresholds {pods['thresholds']}: {summary}"


def _summary(points: list[dict]) -> str:
    return "; ".join(
        f"N={p.get('copies')}: aggregate {(p.get('aggregate_vs_solo') or 0):.2f}x solo, "
        f"Jain {(p.get('jain') or 0):.3f}" for p in points if (p.get("copies") or 1) > 1)


ISOLATION = [
    pytest.param("memory", id="memory", marks=pytest.mark.requirement("SHARE-ISO-001")),
    pytest.param("fault", id="fault", marks=pytest.mark.requirement("SHARE-ISO-002")),
]


@pytest.mark.parametrize("mode", ISOLATION)
def test_isolation_finding(mode, request, gpu_env, attachments):
    where = _shared_gpu(request, gpu_env)
    if where is None:
        doc = _experiment(request, gpu_env, ["isolation", "--mode", mode])
    else:
        engine = {"memory": sharing_pods.memory_isolation,
                  "fault": sharing_pods.fault_isolation}[mode]
        try:
            doc = engine(gpu_env.require_cluster(), request.getfixturevalue("namespace"),
                         gpu_env.run_id, gpu_env.options.workload_image, where)
        except sharing_pods.NotRun as exc:
            _not_run(exc)
    record_measurement(request, "isolation", doc)
    attachments.append(ev.Evidence(f"finding-{mode}-isolation.json", json.dumps(doc, indent=1)))
    assert doc.get("finding"), f"no finding was made: {doc.get('error')}"
    finding(request, str(doc["finding"]))


@pytest.mark.requirement("SHARE-LAT-001")
def test_tail_latency_beside_time_sliced_sharers(request, gpu_env, attachments):
    doc = _experiment(request, gpu_env, ["latency", "--sharers", ",".join(map(str, SHARERS)),
                                         "--seconds",
                                         f"{sharing_pods.LATENCY_WINDOW.seconds:g}"])
    record_measurement(request, "tail_latency", doc)
    attachments.append(ev.Evidence("finding-tail-latency.json", json.dumps(
        {k: v for k, v in doc.items() if k != "points"}, indent=1, default=str)))
    assert doc.get("finding"), f"no finding was made: {doc.get('error')}"
    where = _shared_gpu(request, gpu_env)
    if where is None:
        finding(request, str(doc["finding"]) + ("" if gpu_env.target == "local" else
                                                 " (processes in one pod: no node lets two "
                                                 "pods share a GPU, whole GPUs only)"))
        return
    try:
        pods = sharing_pods.latency_points(
            gpu_env.require_cluster(), request.getfixturevalue("namespace"), gpu_env.run_id,
            gpu_env.options.workload_image, where, SHARERS)
    except sharing_pods.NotRun as exc:
        _not_run(exc)
    ratio = sharing_pods.pod_vs_process(pods["points"], doc.get("points") or [],
                                        sharing_pods.LATENCY)
    pods["pod_vs_process"] = ratio
    record_measurement(request, "tail_latency", pods)
    record_measurement(request, "pod_vs_process", {"experiment": "latency", "kernel": "infer",
                                                   "mode": pods["mode"], "node": pods["node"],
                                                   "points": ratio})
    attachments.append(ev.Evidence("finding-tail-latency-pods.json",
                                json.dumps(pods, indent=1, default=str)))
    versus = "; ".join(
        f"S={r['sharers']}: p99 pods {r['pod_p99'] / 1000:.3f} / processes "
        f"{r['process_p99'] / 1000:.3f} ms = {r['p99_ratio']:.3f}"
        for r in ratio if r.get("p99_ratio") is not None)
    finding(request, f"{pods['mode']} on {pods['node']} ({pods['resource']}): "
                     f"{pods['finding']} Against processes in one pod: "
                     f"{versus or 'no common S'}.")
