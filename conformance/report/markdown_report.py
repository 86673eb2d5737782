"""Render report documents as Markdown (for merge requests, wikis and plain-text review).

Same document, same order as the HTML; plots are left to the HTML file and their figures
appear as tables. Text cells have ``& < >`` escaped so no renderer executes planted markup.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from conformance.report import fmt, measure, tables
from conformance.report.model import AREA_LABELS, VERDICT_LABELS, VERDICTS, gpu_summary, run_facts

TITLE = "GPU Cluster Conformance Report"
EVIDENCE_LIMIT = 16 * 1024


def cell(value: Any) -> str:
    """Text safe inside a Markdown table cell."""
    text = "" if value is None else str(value)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\r", "").replace("\n", "<br>") or " "


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def fence(content: str) -> list[str]:
    """A fenced block whose fence is longer than any backtick run inside it."""
    marker = "`" * max(3, max(_backtick_runs(content), default=0) + 1)
    return [marker, content.rstrip("\n"), marker, ""]


def _backtick_runs(text: str) -> list[int]:
    runs, current = [], 0
    for char in text:
        if char == "`":
            current += 1
        elif current:
            runs.append(current)
            current = 0
    return [*runs, current] if current else runs


def verdict_label(verdict: str) -> str:
    return VERDICT_LABELS.get(verdict, verdict)


def summary_lines(doc: Mapping[str, Any], h: str) -> list[str]:
    summary = doc["summary"]
    counts = summary["counts"]
    why = "; ".join(summary["reasons"]) or (
        f"{counts.get('pass', 0)} of {counts['total']} requirements passed, none failed")
    lines = [f"{h} Summary", "", f"**Overall verdict: {summary['verdict']}** — {cell(why)}", ""]
    lines += table([*(VERDICT_LABELS[v] for v in VERDICTS), "Total"],
                   [[*(counts.get(v, 0) for v in VERDICTS), counts["total"]]])
    lines += table(["Fact", "Value"], run_facts(doc))
    failing = summary["failing"]
    if failing:
        lines += [f"{h}# Failing requirements ({len(failing)})", ""]
        for f in failing:
            lines.append(f"- **{cell(f['id'])}** {cell(f['title'])} ({cell(f['severity'])}): "
                         f"{cell(f['message'])}")
            if f.get("diagnosis"):
                lines.append(f"  - Likely cause: {cell(fmt.cause(f['diagnosis']))}")
        lines.append("")
    else:
        lines += ["No requirement failed.", ""]
    return lines


def fingerprint_lines(fp: Mapping[str, Any], h: str) -> list[str]:
    lines = [f"{h} Cluster fingerprint", ""]
    lines += table(["Property", "Value"], [
        ("Kubernetes version", fmt.text(fp.get("kubernetes_version"))),
        ("GPU Operator version", fmt.text(fp.get("operator_version"))),
        ("Operator chart version", fmt.text(fp.get("chart_version"))),
        ("Driver version(s)", fmt.listing(fp.get("driver_versions"))),
        ("CUDA version(s)", fmt.listing(fp.get("cuda_versions"))),
        ("Sharing strategies", fmt.listing(fp.get("sharing_strategies"))),
        ("GPUs", gpu_summary(fp)),
    ])
    nodes = fp.get("nodes") or []
    if nodes:
        lines += table(
            ["Node", "GPU model", "GPUs", "Memory (MiB)", "Resource", "Allocatable", "Replicas",
             "Sharing", "MIG strategy", "Allocation", "Served by"],
            [[fmt.text(n.get(k)) for k in ("name", "gpu_product", "gpu_count", "gpu_memory_mib",
                                           "gpu_resource", "allocatable", "replicas",
                                           "sharing_strategy", "mig_strategy", "allocation",
                                           "served_by")]
             for n in nodes])
    return lines


def cncf_lines(rollup: Mapping[str, Any], h: str) -> list[str]:
    lines = [f"{h} CNCF Kubernetes AI Conformance", "",
             f"Checklist {rollup['checklist']}; status proposed from this run's verdicts.", ""]
    lines += table(["Item", "Level", "Status", "Supporting requirements", "Basis"], [
        (item["id"], item["level"], item["status"],
         ", ".join(f"{r['id']} ({verdict_label(r['verdict'])})" for r in item["requirements"]),
         item["basis"])
        for item in rollup["items"]
    ])
    if rollup["not_covered"]:
        ids = ", ".join(f"`{i['id']}`" for i in rollup["not_covered"])
        lines += [f"Not covered by this suite (no status claimed): {ids}.", ""]
    return lines


def measurement_lines(measurements: Mapping[str, Any], h: str) -> list[str]:
    lines = [f"{h} Measurements", ""]
    kernels = measure.kernels(measurements)
    if kernels:
        lines += [f"{h}# GPU kernels", "", *table(*tables.kernel_table(kernels))]
    for series in measure.interference(measurements):
        lines += [f"{h}# Interference: {cell(series.title)}", ""]
        lines += table(*tables.interference_table(series))
        if limits := tables.thresholds(series):
            lines += [f"Thresholds: {cell(limits)}", ""]
    versus = measure.pod_vs_process(measurements)
    if versus:
        lines += [f"{h}# Pods on one GPU against processes in one pod", "",
                  *table(*tables.pod_vs_process_table(versus))]
    for exp in measure.tail_latency(measurements):
        lines += [f"{h}# Tail latency under sharing", "",
                  *table(*tables.tail_latency_table(exp.curves)), "", exp.finding, ""]
    latency_versus = measure.latency_pod_vs_process(measurements)
    if latency_versus:
        lines += [f"{h}# Tail latency: sharers in pods against sharers in one pod", "",
                  *table(*tables.latency_pod_vs_process_table(latency_versus))]
    findings = measure.isolation(measurements)
    if findings:
        lines += [f"{h}# Isolation findings", "", *table(*tables.isolation_table(findings))]
    latency = measure.scheduling_latency(measurements)
    if latency:
        lines += [f"{h}# Scheduling latency (created to bound)", "",
                  *table(*tables.latency_table(latency))]
    for name, value in measure.other_families(measurements).items():
        lines += [f"{h}# Other measurements: {cell(name)}", ""]
        lines += fence(json.dumps(value, indent=2, default=str)[:EVIDENCE_LIMIT])
    if len(lines) == 2:
        lines += ["This run recorded no measurements.", ""]
    return lines


def requirement_lines(doc: Mapping[str, Any], raw: Mapping[str, Mapping[str, Any]],
                      h: str) -> list[str]:
    rows = doc["requirements"]
    lines = [f"{h} Requirements ({len(rows)})", ""]
    lines += table(["ID", "Requirement", "Area", "Layer", "Severity", "Verdict", "Message",
                    "Diagnosis"], [
        (r["id"], r["title"], AREA_LABELS.get(r["area"], r["area"]), r["layer"], r["severity"],
         verdict_label(r["verdict"]), r["message"], fmt.cause(r["diagnosis"]))
        for r in rows
    ])
    failed = [r for r in rows if r["verdict"] == "fail" and raw.get(r["id"], {}).get("evidence")]
    if failed:
        lines += [f"{h}# Evidence of failed requirements", ""]
    for row in failed:
        for item in raw[row["id"]]["evidence"]:
            if not isinstance(item, Mapping):
                continue
            content = str(item.get("content") or "")
            lines += [f"**{cell(row['id'])}** — `{cell(item.get('name'))}`", ""]
            lines += fence(content[:EVIDENCE_LIMIT])
    return lines


def run_lines(doc: Mapping[str, Any], raw: Mapping[str, Mapping[str, Any]],
              h: str = "##") -> list[str]:
    return (summary_lines(doc, h) + fingerprint_lines(doc["fingerprint"], h)
            + cncf_lines(doc["cncf"], h) + measurement_lines(doc["measurements"], h)
            + requirement_lines(doc, raw, h))


def _footer(generated: str) -> list[str]:
    return ["---", "", f"Generated {generated} by gpuconf from results format gpuconf-results "
            "v1. Secrets are redacted. Plots are in report.html.", ""]


def render_run(doc: Mapping[str, Any], raw: Mapping[str, Mapping[str, Any]],
               generated: str) -> str:
    run = doc["run"]
    lines = [f"# {TITLE}", "",
             f"Run `{cell(run.get('id') or '—')}` · target {cell(fmt.text(run.get('target')))}"
             f" · gpuconf {cell(fmt.text(run.get('gpuconf_version')))}", ""]
    return "\n".join(lines + run_lines(doc, raw) + _footer(generated))


def render_matrix(mdoc: Mapping[str, Any], raws: Sequence[Mapping[str, Mapping[str, Any]]],
                  generated: str) -> str:
    summary = mdoc["summary"]
    why = "; ".join(summary["reasons"]) or "every combination passed"
    lines = [f"# {TITLE} — matrix", "", "## Matrix summary", "",
             f"**Overall verdict: {summary['verdict']}** — {cell(why)}", ""]
    lines += table(["Combination", "Verdict", *(VERDICT_LABELS[v] for v in VERDICTS), "Total"],
                   [(c["combination"], c["verdict"],
                     *(c["counts"].get(v, 0) for v in (*VERDICTS, "total")))
                    for c in summary["combinations"]])
    for doc, raw in zip(mdoc["combinations"], raws, strict=True):
        lines += [f"## Combination: {cell(doc['combination'])}", ""]
        lines += run_lines(doc, raw, "###")
    return "\n".join(lines + _footer(generated))
