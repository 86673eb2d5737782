"""Render report documents as one self-contained HTML file (inline CSS and SVG, no scripts).

Every value goes through :func:`esc`; the only markup is what this module writes. Element
ids are prefixed per matrix combination so combinations never share an anchor.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from html import escape
from importlib import resources
from string import Template
from typing import Any

from conformance.report import cncf, figures, fmt, measure, tables
from conformance.report.model import AREA_LABELS, VERDICT_LABELS, VERDICTS, gpu_summary, run_facts

EVIDENCE_LIMIT = 64 * 1024  # characters of one evidence item shown inline
TITLE = "GPU Cluster Conformance Report"


def esc(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-").lower() or "x"


def _template(name: str) -> str:
    templates = resources.files("conformance.report").joinpath("templates")
    return templates.joinpath(name).read_text(encoding="utf-8")


def page(title: str, body: str, version: str | None) -> str:
    return Template(_template("page.html")).substitute(
        title=esc(title), css=_template("report.css"), body=body,
        gpuconf_version=esc(version or "unknown"),
    )


# --- small pieces -----------------------------------------------------------------------

def verdict_badge(verdict: str) -> str:
    css = verdict if verdict in VERDICTS else "unknown"
    return f'<span class="badge {css}">{esc(VERDICT_LABELS.get(verdict, verdict))}</span>'


def status_badge(status: str) -> str:
    css = "na" if status == cncf.NOT_APPLICABLE else slug(status)
    return f'<span class="badge {css}">{esc(status)}</span>'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], css: str = "grid",
          numeric: Sequence[int] = ()) -> str:
    """A table of pre-rendered cells; ``numeric`` column indexes are right-aligned."""
    def cls(i: int) -> str:
        return ' class="n"' if i in numeric else ""

    head = "".join(f'<th{cls(i)} scope="col">{esc(h)}</th>' for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f"<td{cls(i)}>{cell}</td>" for i, cell in enumerate(row)) + "</tr>"
        for row in rows
    )
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def kv_table(pairs: Iterable[tuple[str, str]]) -> str:
    rows = "".join(f'<tr><th scope="row">{esc(k)}</th><td>{v}</td></tr>' for k, v in pairs)
    return f'<table class="grid kv"><tbody>{rows}</tbody></table>'


def heading(level: int, number: str, text: str, anchor: str) -> str:
    num = f'<span class="num">{esc(number)}</span>' if number else ""
    return f'<h{level} id="{esc(anchor)}">{num}{esc(text)}</h{level}>'


# --- header and summary -------------------------------------------------------------------

def header(subtitle: str, meta: Sequence[tuple[str, str]]) -> str:
    facts = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in meta)
    return (
        '<header class="report-header"><div>'
        '<div class="kicker">Compliance report · gpuconf</div>'
        f"<h1>{esc(TITLE)}</h1><div class=\"subtitle\">{esc(subtitle)}</div></div>"
        f"<dl>{facts}</dl></header>"
    )


def run_subtitle(doc: Mapping[str, Any]) -> str:
    fp, run = doc["fingerprint"], doc["run"]
    parts = [f"Kubernetes {fmt.text(fp.get('kubernetes_version'), 'unknown')}",
             gpu_summary(fp), f"target {fmt.text(run.get('target'), 'unknown')}"]
    if run.get("combination"):
        parts.append(f"combination {run['combination']}")
    return " · ".join(parts)


def run_meta(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    run = doc["run"]
    return [("Run", fmt.text(run.get("id"))), ("Started", fmt.text(run.get("started"))),
            ("gpuconf", fmt.text(run.get("gpuconf_version")))]


def verdict_block(summary: Mapping[str, Any]) -> str:
    counts = summary["counts"]
    verdict = summary["verdict"]
    if summary["reasons"]:
        why = "; ".join(summary["reasons"])
    else:
        why = f"{counts.get('pass', 0)} of {counts['total']} requirements passed, none failed"
    tiles = "".join(
        f'<div class="count {css}"><div class="n">{counts.get(key, 0)}</div>'
        f'<div class="k">{esc(label)}</div></div>'
        for key, css, label in [*((v, v, VERDICT_LABELS[v]) for v in VERDICTS),
                                ("total", "total", "Total")]
    )
    return (
        f'<div class="verdict-row"><div class="verdict {esc(verdict)}">'
        f'<div class="label">Overall verdict</div><div class="value">{esc(verdict)}</div>'
        f'<div class="why">{esc(why)}</div></div><div class="counts">{tiles}</div></div>'
    )


def facts(doc: Mapping[str, Any]) -> str:
    pairs = run_facts(doc)
    cells = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in pairs)
    return f'<dl class="facts">{cells}</dl>'


def diagnosis(text: str | None) -> str:
    if not text:
        return ""
    return f'<div class="diagnosis"><b>Likely cause:</b> {esc(fmt.cause(text))}</div>'


def failing_block(summary: Mapping[str, Any], prefix: str) -> str:
    failing = summary["failing"]
    interrupted = any("interrupted" in reason for reason in summary["reasons"])
    note = ('<div class="warn-note">The run was interrupted; verdicts are incomplete.</div>'
            if interrupted else "")
    if not failing:
        return note or '<div class="ok-note">No requirement failed.</div>'
    rows = [
        (f'<a class="mono nowrap" href="#{esc(prefix)}req-{esc(slug(f["id"]))}">'
         f'{esc(f["id"])}</a>',
         esc(f["title"]), f'<span class="sev {esc(f["severity"])}">{esc(f["severity"])}</span>',
         esc(f["message"]) + diagnosis(f["diagnosis"]))
        for f in failing
    ]
    return (note + f"<h4>Failing requirements ({len(failing)})</h4>"
            + table(["ID", "Requirement", "Severity", "Finding and likely cause"], rows,
                    "grid failing-table"))


# --- fingerprint -----------------------------------------------------------------------------

def fingerprint_block(fp: Mapping[str, Any]) -> str:
    pairs = [
        ("Kubernetes version", esc(fmt.text(fp.get("kubernetes_version")))),
        ("GPU Operator version", esc(fmt.text(fp.get("operator_version")))),
        ("Operator chart version", esc(fmt.text(fp.get("chart_version")))),
        ("Driver version(s)", esc(fmt.listing(fp.get("driver_versions")))),
        ("CUDA version(s)", esc(fmt.listing(fp.get("cuda_versions")))),
        ("Sharing strategies", esc(fmt.listing(fp.get("sharing_strategies")))),
        ("GPUs", esc(gpu_summary(fp))),
    ]
    nodes = fp.get("nodes") or []
    node_rows = [
        (f'<span class="mono">{esc(n.get("name"))}</span>', esc(fmt.text(n.get("gpu_product"))),
         esc(fmt.text(n.get("gpu_count"))), esc(fmt.number(n.get("gpu_memory_mib"))),
         esc(fmt.text(n.get("gpu_resource"))), esc(fmt.text(n.get("allocatable"))),
         esc(fmt.text(n.get("replicas"))), esc(fmt.text(n.get("sharing_strategy"))),
         esc(fmt.text(n.get("mig_strategy"))), esc(fmt.text(n.get("allocation"))),
         esc(fmt.text(n.get("served_by"))))
        for n in nodes
    ]
    node_table = (
        table(["Node", "GPU model", "GPUs", "Memory (MiB)", "Resource", "Allocatable",
               "Replicas", "Sharing", "MIG strategy", "Allocation", "Served by"], node_rows,
              numeric=(2, 3, 5, 6))
        if nodes else '<p class="muted">No GPU nodes were found.</p>'
    )
    return kv_table(pairs) + "<h4>GPU nodes</h4>" + node_table


# --- CNCF --------------------------------------------------------------------------------

def req_link(prefix: str, req_id: str, verdict: str) -> str:
    css = verdict if verdict in VERDICTS else "unknown"
    return (f'<a class="reqlink" href="#{esc(prefix)}req-{esc(slug(req_id))}" '
            f'title="{esc(VERDICT_LABELS.get(verdict, verdict))}">'
            f'<span class="dot {css}"></span>{esc(req_id)}</a>')


def cncf_block(rollup: Mapping[str, Any], prefix: str) -> str:
    rows = [
        (f'<b>{esc(item["id"])}</b><div class="small muted">{esc(item["description"])}</div>',
         esc(item["level"]), status_badge(item["status"]),
         " ".join(req_link(prefix, r["id"], r["verdict"]) for r in item["requirements"]),
         f'<span class="small">{esc(item["basis"])}</span>')
        for item in rollup["items"]
    ]
    intro = (f'<p class="muted small">Checklist {esc(rollup["checklist"])}. The status is '
             "proposed from this run's verdicts: Implemented needs every applicable supporting "
             "requirement to pass.</p>")
    out = intro + table(["Item", "Level", "Status", "Supporting requirements", "Basis"], rows)
    if rollup["not_covered"]:
        ids = ", ".join(f"<code>{esc(i['id'])}</code>" for i in rollup["not_covered"])
        out += (f'<p class="small muted">Not covered by this suite (no status claimed): '
                f"{ids}.</p>")
    return out


# --- measurements ----------------------------------------------------------------------------

def _figure(svg: str | None, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>" if svg else ""


def kernels_block(kernels: Sequence[measure.Kernel]) -> str:
    if not kernels:
        return ""
    headers, rows = tables.kernel_table(kernels)
    return (
        "<h4>GPU kernels</h4>"
        + _figure(figures.kernel_chart(kernels),
                  "Median of the trials (bar) with the minimum and maximum (whisker) against "
                  "the performance floor (bar line). Each row has its own scale.")
        + text_table(headers, rows, {tables.KERNEL_MET_COLUMN: _met_badge}, (2, 3, 4, 5, 6))
    )


def _met_badge(text: str) -> str:
    return {"yes": verdict_badge("pass"), "no": verdict_badge("fail")}.get(text, esc(text))


def _isolated_badge(text: str) -> str:
    css = {"isolated": "pass", "not isolated": "fail"}.get(text)
    return f'<span class="badge {css}">{esc(text)}</span>' if css else esc(text)


def _verdict_cell(text: str) -> str:
    return esc(text) if text == "—" else verdict_badge(text)


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
               special: Mapping[int, Callable[[str], str]] | None = None,
               numeric: Sequence[int] = ()) -> str:
    """A table of plain-text cells, escaped, with ``special`` columns rendered by a function."""
    special = special or {}
    return table(headers, [[special.get(i, esc)(c) for i, c in enumerate(row)] for row in rows],
                 numeric=numeric)


def interference_block(series_list: Sequence[measure.Series]) -> str:
    out = []
    for series in series_list:
        headers, rows = tables.interference_table(series)
        limits = tables.thresholds(series)
        out.append(
            f"<h4>Interference: {esc(series.title)}</h4>"
            + _figure(figures.interference_chart(series),
                      "Left: each copy's slowdown against running alone, with the fair share "
                      "(N times slower) dashed. Right: throughput of all N copies together "
                      "relative to one copy alone, with Jain's fairness index (1 = fair).")
            + text_table(headers, rows, {tables.INTERFERENCE_VERDICT_COLUMN: _verdict_cell},
                         (0, 1, 2, 3, 4, 5, 6))
            + (f'<p class="small muted">Thresholds: {esc(limits)}</p>' if limits else "")
        )
    return "".join(out)


def pod_vs_process_block(rows: Sequence[measure.PodVsProcess]) -> str:
    if not rows:
        return ""
    return ("<h4>Pods on one GPU against processes in one pod</h4>"
            + text_table(*tables.pod_vs_process_table(rows))
            + '<p class="small muted">N pods, each holding one unit of one GPU, against the '
              "same N copies as processes in one pod (the control): the ratio of their "
              "aggregate rates.</p>")


def latency_pod_vs_process_block(rows: Sequence[measure.LatencyPodVsProcess]) -> str:
    if not rows:
        return ""
    return ("<h4>Tail latency: sharers in pods against sharers in one pod</h4>"
            + text_table(*tables.latency_pod_vs_process_table(rows))
            + '<p class="small muted">The latency client beside S sharers, each sharer a pod '
              "holding one unit of the client's GPU, against the same sharers as processes "
              "in one pod (the control): pods / processes, and their ratio.</p>")


def isolation_block(findings: Sequence[measure.Isolation]) -> str:
    if not findings:
        return ""
    headers, rows = tables.isolation_table(findings)
    return ("<h4>Isolation findings</h4>"
            + text_table(headers, rows, {tables.ISOLATION_COLUMN: _isolated_badge}))


def other_block(others: Mapping[str, Any]) -> str:
    if not others:
        return ""
    items = "".join(
        f'<details class="evidence"><summary>{esc(name)}</summary>'
        f"<pre>{esc(json.dumps(value, indent=2, default=str)[:EVIDENCE_LIMIT])}</pre></details>"
        for name, value in others.items()
    )
    return f"<h4>Other measurements</h4>{items}"


def latency_block(latency: Mapping[str, Any] | None) -> str:
    if not latency:
        return ""
    headers, rows = tables.latency_table(latency)
    return ("<h4>Scheduling latency (created to bound)</h4>"
            + text_table(headers, rows, numeric=(0, 1, 2, 3)))


def tail_latency_block(experiments: Sequence[measure.TailLatency]) -> str:
    out = []
    for exp in experiments:
        headers, rows = tables.tail_latency_table(exp.curves)
        out.append(
            "<h4>Tail latency under sharing</h4>"
            + _figure(figures.latency_cdf_chart(exp.curves),
                      "Latency of a batch-1 inference-like client, as a cumulative distribution "
                      "(log-scaled time): alone, beside N time-sliced sharers (solid) and "
                      "under MPS (dashed). A curve further right is slower; a long flat tail "
                      "is jitter.")
            + text_table(headers, rows, numeric=(1, 2, 3, 4))
            + (f'<p class="small">{esc(exp.finding)}</p>' if exp.finding else ""))
    return "".join(out)


def measurements_block(measurements: Mapping[str, Any], target: str | None) -> str:
    body = (kernels_block(measure.kernels(measurements))
            + interference_block(measure.interference(measurements))
            + pod_vs_process_block(measure.pod_vs_process(measurements))
            + tail_latency_block(measure.tail_latency(measurements))
            + latency_pod_vs_process_block(measure.latency_pod_vs_process(measurements))
            + isolation_block(measure.isolation(measurements))
            + latency_block(measure.scheduling_latency(measurements))
            + other_block(measure.other_families(measurements)))
    if body:
        return body
    return (f'<p class="muted">This run recorded no measurements (target '
            f"{esc(fmt.text(target, 'unknown'))}; GPU kernels need real GPUs).</p>")


# --- requirements ----------------------------------------------------------------------------

def evidence_details(req: Mapping[str, Any]) -> str:
    tests = [t for t in req.get("tests") or [] if isinstance(t, Mapping)]
    items = [e for e in req.get("evidence") or [] if isinstance(e, Mapping)]
    if not tests and not items:
        return ""
    parts = []
    if tests:
        rows = "".join(
            f'<tr><td><span class="mono">{esc(t.get("nodeid"))}</span></td>'
            f"<td>{esc(t.get('outcome'))}</td>"
            f"<td>{esc(fmt.number(t.get('duration_s'), 's'))}</td>"
            f"<td>{esc(t.get('message') or '')}</td></tr>"
            for t in tests
        )
        parts.append(f'<table class="tests"><tbody>{rows}</tbody></table>')
    for item in items:
        content = str(item.get("content") or "")
        note = ""
        if len(content) > EVIDENCE_LIMIT:
            note = (f'<div class="small muted">Shown: first {EVIDENCE_LIMIT:,} of '
                    f"{len(content):,} characters; the full file is in the results folder.</div>")
            content = content[:EVIDENCE_LIMIT]
        parts.append(
            f'<div class="item"><span class="item-name">{esc(item.get("name"))}</span> '
            f'<span class="small muted">{esc(item.get("mime") or "")}</span>'
            f"<pre>{esc(content)}</pre>{note}</div>"
        )
    label = ", ".join(
        f"{n} {word}{'s' if n != 1 else ''}"
        for n, word in ((len(items), "evidence file"), (len(tests), "test")) if n
    )
    return (f'<details class="evidence"><summary>Evidence: {esc(label)}</summary>'
            + "".join(parts) + "</details>")


def requirements_block(doc: Mapping[str, Any], raw: Mapping[str, Mapping[str, Any]],
                       prefix: str) -> str:
    head = "".join(f'<th scope="col">{h}</th>' for h in
                   ("ID", "Requirement", "Area", "Layer", "Severity", "Verdict", "Result"))
    body, area = [], None
    for row in doc["requirements"]:
        if row["area"] != area:
            area = row["area"]
            label = AREA_LABELS.get(area, area or "Other")
            body.append(f'<tr class="group"><th colspan="7">{esc(label)}</th></tr>')
        message = esc(row["message"]) if row["message"] else '<span class="muted">—</span>'
        body.append(
            f'<tr id="{esc(prefix)}req-{esc(slug(row["id"]))}" class="req {esc(row["verdict"])}"'
            f' data-requirement="{esc(row["id"])}">'
            f'<td class="id">{esc(row["id"])}</td><td>{esc(row["title"])}</td>'
            f"<td>{esc(row['area'])}</td><td>{esc(row['layer'])}</td>"
            f'<td><span class="sev {esc(row["severity"])}">{esc(row["severity"])}</span></td>'
            f"<td>{verdict_badge(row['verdict'])}</td>"
            f'<td class="result">{message}{diagnosis(row["diagnosis"])}'
            f"{evidence_details(raw.get(row['id'], {}))}</td></tr>"
        )
    cols = "".join(f'<col class="c-{name}">' for name in
                   ("id", "title", "area", "layer", "severity", "verdict", "result"))
    return (f'<table class="grid requirements"><colgroup>{cols}</colgroup>'
            f"<thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


# --- whole documents -----------------------------------------------------------------------

def run_sections(doc: Mapping[str, Any], raw: Mapping[str, Mapping[str, Any]], level: int = 2,
                 prefix: str = "", number: str = "") -> str:
    """Summary, fingerprint, CNCF rollup, measurements and the requirement table of one run."""
    def h(index: int, text: str, anchor: str) -> str:
        return heading(level, f"{number}{index}", text, f"{prefix}{anchor}")

    total = doc["summary"]["counts"]["total"]
    return (
        f'<section id="{esc(prefix)}summary" class="summary">'
        + h(1, "Summary", "summary-heading") + verdict_block(doc["summary"]) + facts(doc)
        + failing_block(doc["summary"], prefix) + "</section>"
        + "<section>" + h(2, "Cluster fingerprint", "fingerprint")
        + fingerprint_block(doc["fingerprint"]) + "</section>"
        + "<section>" + h(3, "CNCF Kubernetes AI Conformance", "cncf")
        + cncf_block(doc["cncf"], prefix) + "</section>"
        + "<section>" + h(4, "Measurements", "measurements")
        + measurements_block(doc["measurements"], doc["run"].get("target")) + "</section>"
        + "<section>" + h(5, f"Requirements ({total})", "requirements")
        + requirements_block(doc, raw, prefix) + "</section>"
    )


def footer(version: str | None, generated: str) -> str:
    return (f"<footer>Generated {esc(generated)} by gpuconf {esc(version or 'unknown')} from "
            "results format gpuconf-results v1. Self-contained: this file loads nothing from "
            "the network. Secrets are redacted.</footer>")


def render_run(doc: Mapping[str, Any], raw: Mapping[str, Mapping[str, Any]],
               generated: str) -> str:
    version = doc["run"].get("gpuconf_version")
    body = (header(run_subtitle(doc), run_meta(doc)) + run_sections(doc, raw)
            + footer(version, generated))
    return page(f"{TITLE} — {doc['summary']['verdict']}", body, version)


def render_matrix(mdoc: Mapping[str, Any], raws: Sequence[Mapping[str, Mapping[str, Any]]],
                  generated: str) -> str:
    combos = mdoc["combinations"]
    version = next((d["run"].get("gpuconf_version") for d in combos), None)
    summary = mdoc["summary"]
    rows = [
        (f'<a href="#combo-{esc(slug(c["combination"]))}">{esc(c["combination"])}</a>',
         f'<span class="badge {"pass" if c["verdict"] == "PASS" else "fail"}">'
         f'{esc(c["verdict"])}</span>',
         *(esc(c["counts"].get(v, 0)) for v in (*VERDICTS, "total")))
        for c in summary["combinations"]
    ]
    why = "; ".join(summary["reasons"]) or f"all {len(combos)} combinations passed"
    overview = (
        '<section id="summary" class="summary">' + heading(2, "", "Matrix summary", "matrix")
        + f'<div class="verdict-row"><div class="verdict {esc(summary["verdict"])}">'
        f'<div class="label">Overall verdict</div><div class="value">'
        f'{esc(summary["verdict"])}</div><div class="why">{esc(why)}</div></div><div>'
        + table(["Combination", "Verdict", *(VERDICT_LABELS[v] for v in VERDICTS), "Total"],
                rows, "grid matrix-nav", numeric=(2, 3, 4, 5, 6, 7))
        + "</div></div></section>"
    )
    sections = "".join(
        f'<section class="combination" id="combo-{esc(slug(doc["combination"]))}">'
        f'<h2>Combination: {esc(doc["combination"])}</h2>'
        + run_sections(doc, raw, level=3, prefix=f"c{i + 1}-", number=f"{i + 1}.")
        + "</section>"
        for i, (doc, raw) in enumerate(zip(combos, raws, strict=True))
    )
    subtitle = f"Matrix of {len(combos)} combination{'s' if len(combos) != 1 else ''}"
    body = (header(subtitle, [("Combinations", str(len(combos))), ("gpuconf", version or "—")])
            + overview + sections + footer(version, generated))
    return page(f"{TITLE} — matrix — {summary['verdict']}", body, version)
