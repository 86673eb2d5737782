"""Turn one run's results into the report document (what report.json holds).

HTML and Markdown render from this document, so the three files cannot disagree on a
verdict, a count or the overall result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from conformance.common.vocab import VERDICTS
from conformance.report import cncf, fmt

REPORT_FORMAT = "gpuconf-report"
REPORT_VERSION = 1


VERDICT_LABELS = {
    "pass": "Pass", "fail": "Fail", "skip": "Skipped",
    "not-applicable": "Not applicable", "not-run": "Not run",
}
AREA_LABELS = {
    "stack": "Stack", "scheduling": "Scheduling", "sharing": "Sharing",
    "operations": "Operations", "dra": "DRA",
}
PASS, FAIL = "PASS", "FAIL"


def as_list(value: Any) -> list[Any]:
    """A list whatever the input: None -> [], scalar -> [scalar]."""
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def verdict_of(req: Mapping[str, Any]) -> str:
    return str(req.get("verdict") or "not-run")


def verdict_counts(requirements: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Counts per verdict (every known verdict present, unknown ones added) and the total."""
    counter = Counter(verdict_of(r) for r in requirements)
    counts = {v: counter.pop(v, 0) for v in VERDICTS}
    counts.update(sorted(counter.items()))
    counts["total"] = sum(counts.values())
    return counts


def overall(counts: Mapping[str, int], run: Mapping[str, Any]) -> tuple[str, list[str]]:
    """PASS or FAIL for the run, with the reasons for a FAIL.

    A run passes only if no requirement failed, it was not interrupted, every verdict is a
    known one and at least one requirement passed (a run that verified nothing proves nothing).
    """
    reasons = []
    if counts.get("fail"):
        n = counts["fail"]
        reasons.append(f"{n} requirement{'s' if n != 1 else ''} failed")
    unknown = sum(n for v, n in counts.items() if v not in VERDICTS and v != "total")
    if unknown:
        reasons.append(f"{unknown} requirement(s) carry an unknown verdict")
    if run.get("interrupted"):
        reasons.append("the run was interrupted before it finished")
    if not counts.get("pass") and not counts.get("fail"):
        reasons.append("no requirement was verified")
    return (FAIL if reasons else PASS), reasons


def requirement_row(req: Mapping[str, Any]) -> dict[str, Any]:
    verdict = verdict_of(req)
    diagnosis = req.get("diagnosis")
    return {
        "id": str(req["id"]),
        "title": str(req.get("title") or ""),
        "area": str(req.get("area") or ""),
        "layer": str(req.get("layer") or ""),
        "severity": str(req.get("severity") or ""),
        "verdict": verdict,
        "message": str(req.get("message") or ""),
        "diagnosis": diagnosis if verdict == "fail" else None,
        "cncf": [str(c) for c in as_list(req.get("cncf"))],
        "targets": [str(t) for t in as_list(req.get("targets"))],
        "tests": len(as_list(req.get("tests"))),
        "evidence": [str(e.get("name", "")) for e in as_list(req.get("evidence"))
                     if isinstance(e, Mapping)],
    }


def gpu_nodes(fingerprint: Mapping[str, Any]) -> list[dict[str, Any]]:
    keys = ("name", "gpu_product", "gpu_count", "gpu_memory_mib", "gpu_resource",
            "allocatable", "replicas", "sharing_strategy", "mig_strategy", "allocation",
            "served_by")
    return [{k: node.get(k) for k in keys}
            for node in as_list(fingerprint.get("nodes")) if isinstance(node, Mapping)]


def gpu_totals(nodes: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """GPUs per product across nodes, e.g. {"NVIDIA-H100-80GB-HBM3": 16}."""
    totals: Counter[str] = Counter()
    for node in nodes:
        count = node.get("gpu_count")
        totals[str(node.get("gpu_product") or "unknown GPU")] += (
            int(count) if isinstance(count, int | float) else 0
        )
    return dict(totals)


def fingerprint(results: Mapping[str, Any]) -> dict[str, Any]:
    fp = results.get("fingerprint") or {}
    nodes = gpu_nodes(fp)
    return {
        "kubernetes_version": fp.get("kubernetes_version"),
        "operator_version": fp.get("operator_version"),
        "chart_version": fp.get("chart_version"),
        "driver_versions": [str(v) for v in as_list(fp.get("driver_versions"))],
        "cuda_versions": [str(v) for v in as_list(fp.get("cuda_versions"))],
        "sharing_strategies": [str(v) for v in as_list(fp.get("sharing_strategies"))],
        "gpu_totals": gpu_totals(nodes),
        "nodes": nodes,
    }


def gpu_summary(fp: Mapping[str, Any]) -> str:
    """One line like "16 x NVIDIA-H100-80GB-HBM3 on 2 nodes"."""
    totals = fp.get("gpu_totals") or {}
    nodes = fp.get("nodes") or []
    if not nodes:
        return "no GPU nodes found"
    parts = ", ".join(f"{n} x {product}" for product, n in totals.items())
    return f"{parts} on {len(nodes)} node{'s' if len(nodes) != 1 else ''}"


def run_facts(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The facts a reader checks first (target, versions, GPUs, when), as (label, text) pairs:
    the HTML and Markdown reports show the same list."""
    fp, run = doc["fingerprint"], doc["run"]
    return [
        ("Target", fmt.text(run.get("target"))),
        ("Profile", fmt.text(run.get("profile"))),
        ("Combination", fmt.text(run.get("combination"))),
        ("Injected faults", fmt.listing(run.get("faults"), "none")),
        ("Kubernetes", fmt.text(fp.get("kubernetes_version"))),
        ("GPU Operator", fmt.text(fp.get("operator_version"))),
        ("Driver", fmt.listing(fp.get("driver_versions"))),
        ("GPUs", gpu_summary(fp)),
        ("Run ID", fmt.text(run.get("id"))),
        ("Started", fmt.text(run.get("started"))),
        ("Duration", fmt.duration(run.get("duration_s"))),
        ("Exit status", fmt.text(run.get("exit_status"))),
    ]


def duration_s(run: Mapping[str, Any]) -> float | None:
    try:
        start = datetime.fromisoformat(str(run["started"]).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(run["finished"]).replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return None
    return (end - start).total_seconds()


def run_info(results: Mapping[str, Any]) -> dict[str, Any]:
    run = results.get("run") or {}
    keys = ("id", "started", "finished", "target", "profile", "faults", "combination",
            "gpuconf_version", "interrupted", "exit_status")
    info = {k: run.get(k) for k in keys}
    info["faults"] = as_list(info["faults"])
    info["duration_s"] = duration_s(run)
    return info


def document(results: Mapping[str, Any]) -> dict[str, Any]:
    """The report document of one run (redacted results in, JSON-ready dict out)."""
    rows = [requirement_row(r) for r in results.get("requirements") or []]
    counts = verdict_counts(rows)
    run = run_info(results)
    verdict, reasons = overall(counts, run)
    failing = [
        {k: row[k] for k in ("id", "title", "severity", "layer", "message", "diagnosis")}
        for row in rows if row["verdict"] == "fail"
    ]
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "kind": "run",
        "source": {"format": results.get("format"), "version": results.get("version")},
        "run": run,
        "summary": {"verdict": verdict, "reasons": reasons, "counts": counts,
                    "failing": failing},
        "fingerprint": fingerprint(results),
        "requirements": rows,
        "cncf": cncf.rollup(rows),
        "measurements": results.get("measurements") or {},
    }


def combination_label(doc: Mapping[str, Any], index: int) -> str:
    run = doc.get("run") or {}
    if run.get("combination"):
        return str(run["combination"])
    return f"run {index + 1}" + (f" ({run['id']})" if run.get("id") else "")


def matrix_document(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The matrix report: one run document per combination, kept apart, and an overview."""
    labels: list[str] = []
    for index, doc in enumerate(docs):
        base = label = combination_label(doc, index)
        copy = 2
        while label in labels:  # two runs of one combination stay two sections
            label, copy = f"{base} #{copy}", copy + 1
        labels.append(label)
        doc["combination"] = label
    failed = [d["combination"] for d in docs if d["summary"]["verdict"] == FAIL]
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "kind": "matrix",
        "summary": {
            "verdict": FAIL if failed or not docs else PASS,
            "reasons": ([f"{len(failed)} of {len(docs)} combinations failed: "
                         + ", ".join(failed)] if failed else [])
                       + ([] if docs else ["no combination was run"]),
            "combinations": [
                {"combination": d["combination"], "verdict": d["summary"]["verdict"],
                 "counts": d["summary"]["counts"]} for d in docs
            ],
        },
        "combinations": docs,
    }
