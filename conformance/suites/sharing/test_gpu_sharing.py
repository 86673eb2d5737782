"""Sharing / on real GPUs: what time-slicing does to copies that share one GPU.

Each experiment runs the gpu_kernels copies as processes on one GPU: on --target local on this
host's GPU 0, on real clusters inside one pod that holds one GPU (processes in it share that GPU
with the same CUDA time-slicing that time-sliced pods get). Isolation results are findings:
the check passes once it has measured what happened, and its message says what that was.

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

from conformance.cluster import evidence as ev
from conformance.cluster import kernel_pods
from conformance.plugin.api import finding, record_measurement
from conformance.run import local_gpu

EXPERIMENT_TIMEOUT_S = 600.0


def _experiment(request, gpu_env, args: list[str]) -> dict:
    if gpu_env.target == "local":
        try:
            return local_gpu.run_kernels(args, timeout=EXPERIMENT_TIMEOUT_S)
        except local_gpu.Unavailable as exc:
            pytest.skip(f"cannot run GPU experiments here: {exc}")
    namespace = request.getfixturevalue("namespace")
    r = kernel_pods.run(gpu_env.require_cluster(), namespace, gpu_env.run_id, args,
                        image=gpu_env.options.workload_image)
    doc = r.json_line()
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
    points = doc.get("points") or [doc]
    summary = "; ".join(
        f"N={p.get('copies')}: aggregate {(p.get('aggregate_vs_solo') or 0):.2f}x solo, "
        f"Jain {(p.get('jain') or 0):.3f}" for p in points if (p.get("copies") or 1) > 1)
    finding(request, f"{kernel}: {summary}")
    assert doc.get("verdict") == "pass", f"beyond the thresholds {doc.get('thresholds')}: {summary}"


ISOLATION = [
    pytest.param("memory", id="memory", marks=pytest.mark.requirement("SHARE-ISO-001")),
    pytest.param("fault", id="fault", marks=pytest.mark.requirement("SHARE-ISO-002")),
]


@pytest.mark.parametrize("mode", ISOLATION)
def test_isolation_finding(mode, request, gpu_env, attachments):
    doc = _experiment(request, gpu_env, ["isolation", "--mode", mode])
    record_measurement(request, "isolation", doc)
    attachments.append(ev.Evidence(f"finding-{mode}-isolation.json", json.dumps(doc, indent=1)))
    assert doc.get("finding"), f"no finding was made: {doc.get('error')}"
    finding(request, str(doc["finding"]))


@pytest.mark.requirement("SHARE-LAT-001")
def test_tail_latency_beside_time_sliced_sharers(request, gpu_env, attachments):
    doc = _experiment(request, gpu_env, ["latency", "--sharers", "1,2,4", "--seconds", "4"])
    record_measurement(request, "tail_latency", doc)
    attachments.append(ev.Evidence("finding-tail-latency.json", json.dumps(
        {k: v for k, v in doc.items() if k != "points"}, indent=1, default=str)))
    assert doc.get("finding"), f"no finding was made: {doc.get('error')}"
    finding(request, str(doc["finding"]))
