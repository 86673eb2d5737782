"""Build gpuconf results programmatically for the report and certification tests.

Every catalog requirement appears once, with the verdict a healthy sim run would give
(pass where the sim can check it, skip for GPU-only checks, not-run for disruptive ones,
not-applicable where the target does not apply). Measurements follow the shapes of
gpu_kernels results, with H200-like figures. Nothing here is collected as a test.
"""

from __future__ import annotations

import copy
from typing import Any

from conformance.catalog import REQUIREMENTS, Requirement

JWT = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJl"
BEARER = "Bearer abc.def.ghi"
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
SCRIPT = "<script>alert('x')</script>"


def default_verdict(req: Requirement, target: str = "sim") -> str:
    if target not in req.targets:
        return "not-applicable"
    if req.disruptive:
        return "not-run"
    if req.needs_gpu:
        return "skip"
    return "pass"


def requirement(req: Requirement, verdict: str, message: str | None = None,
                diagnosis: str | None = None) -> dict[str, Any]:
    default_message = {
        "pass": f"{req.title}: holds",
        "fail": f"{req.title}: does not hold",
        "skip": "skipped: needs a GPU, target sim has none",
        "not-applicable": "not applicable on target sim",
        "not-run": "not collected (disruptive; opt in with --disruptive)",
    }[verdict]
    outcome = {"pass": "passed", "fail": "failed", "skip": "skipped"}.get(verdict)
    tests = [] if outcome is None else [{
        "nodeid": f"conformance/{req.area}/test_{req.layer.replace('-', '_')}.py::"
                  f"test_{req.id.lower().replace('-', '_')}",
        "outcome": outcome, "duration_s": 0.12, "message": message or default_message,
    }]
    evidence = [] if verdict != "fail" else [
        {"name": "nodes.yaml", "mime": "text/plain",
         "content": f"kind: NodeList\nitems:\n- metadata:\n    name: gpu-node-0\n# {req.id}\n"},
    ]
    return {
        "id": req.id, "title": req.title, "area": req.area, "layer": req.layer,
        "severity": req.severity, "targets": list(req.targets), "cncf": list(req.cncf),
        "verdict": verdict,
        "diagnosis": (diagnosis or req.suspect) if verdict == "fail" else None,
        "message": message or default_message, "tests": tests, "evidence": evidence,
    }


DEVICE = {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-35ed54a8-206d-8d3c-72b9-cff17c00afb2"}


def kernels(scale: float = 1.0) -> list[dict[str, Any]]:
    """Kernel results shaped like gpu_kernels.result.kernel_result (bar as an object)."""
    def one(kind: str, metric: str, unit: str, median: float, bar: float) -> dict[str, Any]:
        median *= scale
        trials = [median * f for f in (0.994, 0.998, 1.0, 1.002, 1.004)]
        return {"schema": "gpu_kernels.result", "schema_version": 1, "kind": kind,
                "metric": metric, "unit": unit, "median": median, "mean": median,
                "min": min(trials), "max": max(trials), "cv": 0.004, "trials": trials,
                "device": DEVICE, "met": median >= bar,
                "bar": {"value": bar, "op": ">=", "unit": unit, "source": "default for H200"}}
    return [one("membw", "triad", "TB/s", 4.09, 4.0),
            one("fp32", "fma", "TFLOP/s", 48.5, 60.0),
            one("gemm", "fp16 8192^3", "TFLOP/s", 646.0, 700.0)]


def interference() -> list[dict[str, Any]]:
    """Interference points shaped like gpu_kernels.analysis.point (per_copy as objects)."""
    out = []
    for kernel, unit, solo, loss in (("membw", "TB/s", 4.086, 0.07),
                                     ("gemm", "TFLOP/s", 646.4, 0.02)):
        for copies in (1, 2, 4):
            agg = 1.0 if copies == 1 else 1.0 - loss
            rate = solo * agg / copies
            per_copy = [{"kernel": kernel, "rate": rate, "unit": unit, "cv": 0.003,
                         "latency_p50_ms": 1.6 * copies, "latency_p99_ms": 1.7 * copies,
                         "slowdown": solo / rate, "correct": True, "error": None}
                        for _ in range(copies)]
            out.append({
                "experiment": "interference", "kernel": kernel, "mode": "time-slicing",
                "unit": unit, "copies": copies, "per_copy": per_copy,
                "solo_rates": [solo] * copies, "slowdown": [solo / rate] * copies,
                "aggregate_vs_solo": agg, "overhead": 1.0 - agg, "jain": 1.0,
                "latency_p50_ms": [c["latency_p50_ms"] for c in per_copy],
                "latency_p99_ms": [c["latency_p99_ms"] for c in per_copy],
                "verdict": "baseline" if copies == 1 else "pass", "reasons": [],
                "thresholds": {"max_overhead": 0.15, "min_jain": 0.9, "max_cv": 0.05},
            })
    return out


def isolation() -> list[dict[str, Any]]:
    """Isolation findings shaped like gpu_kernels.analysis.memory_finding / fault_finding."""
    return [
        {"experiment": "isolation", "mode": "memory", "requirement": "SHARE-ISO-001",
         "sharing": "time-slicing", "isolated": False,
         "finding": "Under time-slicing, while one copy held 118.8 GiB of 139.8 GiB, another "
                    "copy's request for 41.9 GiB failed. No memory isolation.",
         "details": {"holder_held_gib": 118.8, "total_gib": 139.8, "holder_error": None,
                     "other_allocation": "failed (OutOfMemoryError)"}},
        {"experiment": "isolation", "mode": "fault", "requirement": "SHARE-ISO-002",
         "sharing": "time-slicing", "isolated": True,
         "finding": "Under time-slicing, one copy's illegal address did not stop the other.",
         "details": {"other_survived": True, "after_vs_before": 0.99}},
    ]


def make_results(*, verdicts: dict[str, str] | None = None,
                 messages: dict[str, str] | None = None,
                 evidence: dict[str, list[dict[str, Any]]] | None = None,
                 measurements: bool = True, kernel_scale: float = 1.0,
                 combination: str | None = None, faults: list[str] | None = None,
                 driver: str = "580.105.08", target: str = "sim") -> dict[str, Any]:
    """Results of one run with every catalog requirement; overrides by requirement id."""
    verdicts, messages, evidence = verdicts or {}, messages or {}, evidence or {}
    reqs = []
    for req in REQUIREMENTS:
        row = requirement(req, verdicts.get(req.id, default_verdict(req, target)),
                          messages.get(req.id))
        if req.id in evidence:
            row["evidence"] = evidence[req.id]
        reqs.append(row)
    summary: dict[str, int] = {}
    for row in reqs:
        summary[row["verdict"]] = summary.get(row["verdict"], 0) + 1
    summary["total"] = len(reqs)
    return {
        "format": "gpuconf-results",
        "version": 1,
        "run": {
            "id": "20261202T113000Z-ab12cd" + (f"-{combination}" if combination else ""),
            "started": "2026-12-02T11:30:00Z", "finished": "2026-12-02T11:31:20Z",
            "target": target, "profile": "healthy", "faults": faults or [],
            "combination": combination, "gpuconf_version": "0.1.0", "interrupted": False,
            "exit_status": 1 if "fail" in summary else 0, "pytest_args": ["-q"],
        },
        "fingerprint": {
            "kubernetes_version": "v1.36.3", "operator_version": "v26.7.0",
            "chart_version": "v26.7.0", "driver_versions": [driver], "cuda_versions": ["13.0"],
            "sharing_strategies": ["time-slicing"],
            "nodes": [
                {"name": f"gpu-node-{i}", "gpu_product": product, "gpu_count": 8,
                 "gpu_memory_mib": memory, "gpu_resource": "nvidia.com/gpu",
                 "allocatable": 32, "replicas": 4, "sharing_strategy": "time-slicing",
                 "mig_strategy": "none"}
                for i, (product, memory) in enumerate(
                    [("NVIDIA-H100-80GB-HBM3", 81559), ("NVIDIA-H100-80GB-HBM3", 81559),
                     ("NVIDIA-A100-SXM4-40GB", 40960)])
            ],
        },
        "requirements": reqs,
        "measurements": {
            "kernels": kernels(kernel_scale) if measurements else [],
            "interference": interference() if measurements else [],
            "isolation": isolation() if measurements else [],
            **({"scheduling_latency": {"samples": 20, "p50_s": 0.05, "p99_s": 0.2,
                                       "max_s": 0.3}} if measurements else {}),
        },
        "summary": summary,
    }


def with_failure(results: dict[str, Any], req_id: str, message: str) -> dict[str, Any]:
    """A copy of ``results`` where one requirement fails with ``message``."""
    changed = copy.deepcopy(results)
    for row in changed["requirements"]:
        if row["id"] == req_id:
            row.update(verdict="fail", message=message,
                       diagnosis=next(r.suspect for r in REQUIREMENTS if r.id == req_id))
    return changed
