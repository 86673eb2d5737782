"""The compliance report: every requirement, right counts, diagnosis, escaping, redaction,
self-containment, figures, and Markdown/JSON agreeing with each other."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_report_fixtures import BEARER, JWT, PEM, SCRIPT, make_results

from conformance.catalog import REQUIREMENTS
from conformance.report import build_matrix_report, build_report
from conformance.report.model import VERDICTS

FAILING = "STACK-DP-002"
FAIL_MESSAGE = "2 of 3 GPU nodes advertise no nvidia.com/gpu: gpu-node-0, gpu-node-1"


@pytest.fixture
def results() -> dict:
    return make_results(
        verdicts={FAILING: "fail", "SHARE-LBL-001": "fail"},
        messages={FAILING: FAIL_MESSAGE, "STACK-OP-001": f"operator ready {SCRIPT}"},
        evidence={FAILING: [
            {"name": "kubeconfig", "mime": "text/plain",
             "content": f"users:\n- user:\n    token: s3cr3t-token-value\n{PEM}\n"},
            {"name": "events.txt", "mime": "text/plain",
             "content": f"Authorization: {BEARER}\nsa token {JWT}\n<b>bold</b>"},
        ]},
    )


@pytest.fixture
def built(results: dict, tmp_path: Path) -> dict[str, Path]:
    return build_report(results, tmp_path / "report")


def texts(paths: dict[str, Path]) -> dict[str, str]:
    return {kind: path.read_text(encoding="utf-8") for kind, path in paths.items()}


class _Collector(HTMLParser):
    """Element ids, requirement rows, and every src/href attribute of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[str] = []
        self.links: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        found = dict(attrs)
        if tag == "tr" and found.get("data-requirement"):
            self.rows.append(str(found["data-requirement"]))
        self.links += [v or "" for k, v in attrs if k in ("src", "href", "xlink:href")]


def row_of(html: str, req_id: str) -> str:
    """The HTML of one requirement row (rows nest a tests table, so cut at the next row)."""
    start = html.index(f'id="req-{req_id.lower()}"')
    ends = [i for i in (html.find('<tr id="', start), html.find('<tr class="group"', start))
            if i != -1]
    return html[start:min(ends, default=len(html))]


def parse(html: str) -> _Collector:
    collector = _Collector()
    collector.feed(html)
    return collector


def test_writes_html_markdown_and_json(built: dict[str, Path]) -> None:
    assert set(built) == {"html", "markdown", "json"}
    assert [p.name for p in built.values()] == ["report.html", "report.md", "report.json"]
    assert all(p.stat().st_size > 0 for p in built.values())


def test_every_requirement_has_a_row(built: dict[str, Path]) -> None:
    page = parse(built["html"].read_text())
    assert page.rows == [r.id for r in REQUIREMENTS]
    markdown = built["markdown"].read_text()
    for req in REQUIREMENTS:
        assert re.search(rf"^\| {re.escape(req.id)} \|", markdown, re.M), req.id
    doc = json.loads(built["json"].read_text())
    assert [r["id"] for r in doc["requirements"]] == [r.id for r in REQUIREMENTS]


def test_summary_counts_are_right(results: dict, built: dict[str, Path]) -> None:
    expected = {v: sum(r["verdict"] == v for r in results["requirements"]) for v in VERDICTS}
    doc = json.loads(built["json"].read_text())
    counts = doc["summary"]["counts"]
    assert {v: counts[v] for v in VERDICTS} == expected
    assert counts["total"] == len(REQUIREMENTS)
    assert doc["summary"]["verdict"] == "FAIL"
    assert [f["id"] for f in doc["summary"]["failing"]] == [FAILING, "SHARE-LBL-001"]
    html = built["html"].read_text()
    summary = html[html.index('id="summary"'):html.index('id="fingerprint"')]
    for verdict in VERDICTS:
        assert f'<div class="count {verdict}"><div class="n">{expected[verdict]}</div>' in summary
    assert '<div class="value">FAIL</div>' in summary


def test_summary_comes_first_and_names_the_failure_with_its_diagnosis(
        built: dict[str, Path]) -> None:
    html = built["html"].read_text()
    suspect = next(r.suspect for r in REQUIREMENTS if r.id == FAILING)
    summary = html[html.index('id="summary"'):html.index('id="fingerprint"')]
    assert FAILING in summary and FAIL_MESSAGE in summary and suspect in summary
    assert html.index('id="summary"') < html.index('id="requirements"')
    row = row_of(html, FAILING)
    assert "Likely cause:" in row and suspect in row
    markdown = built["markdown"].read_text()
    assert markdown.index("## Summary") < markdown.index("## Requirements")
    assert f"Likely cause: {suspect}" in markdown


def test_passing_run_passes(tmp_path: Path) -> None:
    doc = json.loads(build_report(make_results(), tmp_path)["json"].read_text())
    assert doc["summary"]["verdict"] == "PASS"
    assert doc["summary"]["failing"] == [] and doc["summary"]["reasons"] == []


def test_interrupted_run_does_not_pass(tmp_path: Path) -> None:
    results = make_results()
    results["run"]["interrupted"] = True
    doc = json.loads(build_report(results, tmp_path)["json"].read_text())
    assert doc["summary"]["verdict"] == "FAIL"
    assert any("interrupted" in reason for reason in doc["summary"]["reasons"])


def test_planted_markup_is_escaped(built: dict[str, Path]) -> None:
    html = built["html"].read_text()
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "&lt;b&gt;bold&lt;/b&gt;" in html  # evidence content
    assert "script" not in parse(html).tags
    assert "<script>" not in built["markdown"].read_text()


@pytest.mark.parametrize("secret", [JWT, "eyJhbGciOi", "abc.def.ghi", "s3cr3t-token-value",
                                    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"])
def test_planted_secrets_appear_in_no_output(built: dict[str, Path], secret: str) -> None:
    for kind, text in texts(built).items():
        assert secret not in text, f"{secret!r} leaked into {kind}"


def test_redaction_keeps_context(built: dict[str, Path]) -> None:
    html = built["html"].read_text()
    assert "token: [REDACTED]" in html  # the reader still sees what was there


def test_html_loads_nothing_from_the_network(built: dict[str, Path]) -> None:
    html = built["html"].read_text()
    page = parse(html)
    assert page.links, "expected in-page anchors"
    assert all(link.startswith("#") for link in page.links), page.links
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", html, re.I)
    assert "@import" not in html
    assert {"link", "script", "img", "iframe"}.isdisjoint(page.tags)
    assert "default-src 'none'" in html  # Content-Security-Policy as a second fence


def test_svg_figures_present_with_measurements(built: dict[str, Path]) -> None:
    html = built["html"].read_text()
    charts = re.findall(r'<svg class="chart"', html)
    assert len(charts) == 3  # kernels + two interference experiments
    assert "Kernel results" in html and "Interference membw" in html
    assert "Jain 1.000" in html


def test_no_svg_without_measurements(tmp_path: Path) -> None:
    html = build_report(make_results(measurements=False), tmp_path)["html"].read_text()
    assert "<svg" not in html
    assert "recorded no measurements" in html


def test_requirement_table_columns_and_collapsed_evidence(built: dict[str, Path]) -> None:
    html = built["html"].read_text()
    table = html[html.index('<table class="grid requirements"'):]
    for header in ("ID", "Requirement", "Area", "Layer", "Severity", "Verdict", "Result"):
        assert f'<th scope="col">{header}</th>' in table
    row = row_of(table, FAILING)
    assert '<details class="evidence">' in row and "<details open" not in html
    assert "kubeconfig" in row and "events.txt" in row


def test_fingerprint_is_shown(built: dict[str, Path]) -> None:
    html = built["html"].read_text()
    fingerprint = html[html.index('id="fingerprint"'):html.index('id="cncf"')]
    for fact in ("v1.36.3", "v26.7.0", "580.105.08", "13.0", "time-slicing",
                 "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB", "gpu-node-2"):
        assert fact in fingerprint
    assert "16 x NVIDIA-H100-80GB-HBM3, 8 x NVIDIA-A100-SXM4-40GB on 3 nodes" in fingerprint


def test_markdown_and_json_agree(built: dict[str, Path]) -> None:
    doc = json.loads(built["json"].read_text())
    markdown = built["markdown"].read_text()
    labels = {"pass": "Pass", "fail": "Fail", "skip": "Skipped",
              "not-applicable": "Not applicable", "not-run": "Not run"}
    for row in doc["requirements"]:
        line = next(ln for ln in markdown.splitlines() if ln.startswith(f"| {row['id']} |"))
        assert f"| {labels[row['verdict']]} |" in line
    assert f"**Overall verdict: {doc['summary']['verdict']}**" in markdown
    counts = doc["summary"]["counts"]
    count_row = "| " + " | ".join(str(counts[v]) for v in (*VERDICTS, "total")) + " |"
    assert count_row in markdown


def test_json_carries_cncf_items_and_rollup(built: dict[str, Path]) -> None:
    doc = json.loads(built["json"].read_text())
    row = next(r for r in doc["requirements"] if r["id"] == FAILING)
    assert row["cncf"] == ["secure_accelerator_access"]
    items = {i["id"]: i for i in doc["cncf"]["items"]}
    access = items["secure_accelerator_access"]
    assert access["status"] == "Partially Implemented"
    assert {"id": FAILING, "verdict": "fail"} in access["requirements"]
    assert items["driver_runtime_management"]["status"] == "Implemented"
    assert "virtualized_accelerator" in {i["id"] for i in doc["cncf"]["not_covered"]}
    assert set(doc) >= {"summary", "fingerprint", "requirements", "cncf", "run"}


def test_combination_is_shown(tmp_path: Path) -> None:
    results = make_results(combination="op-v26.7.0-timeslicing")
    paths = build_report(results, tmp_path)
    assert "op-v26.7.0-timeslicing" in paths["html"].read_text()
    assert "op-v26.7.0-timeslicing" in paths["markdown"].read_text()


def test_matrix_keeps_combinations_apart(tmp_path: Path) -> None:
    runs = [make_results(combination="timeslicing"),
            make_results(combination="mps", verdicts={FAILING: "fail"}),
            make_results(combination="mps")]
    paths = build_matrix_report(runs, tmp_path)
    html = paths["html"].read_text()
    page = parse(html)
    assert page.rows == [r.id for r in REQUIREMENTS] * 3
    for combo in ("timeslicing", "mps", "mps-2"):
        assert f'id="combo-{combo}"' in html
    assert html.count('<table class="grid requirements"') == 3
    ids = re.findall(r'\sid="([^"]+)"', html)
    assert len(ids) == len(set(ids)), "element ids must be unique across combinations"
    second = html[html.index('id="combo-mps"'):html.index('id="combo-mps-2"')]
    assert 'class="req fail"' in second
    first = html[html.index('id="combo-timeslicing"'):html.index('id="combo-mps"')]
    assert 'class="req fail"' not in first
    doc = json.loads(paths["json"].read_text())
    assert doc["kind"] == "matrix"
    assert [c["combination"] for c in doc["summary"]["combinations"]] == [
        "timeslicing", "mps", "mps #2"]
    assert [c["verdict"] for c in doc["summary"]["combinations"]] == ["PASS", "FAIL", "PASS"]
    assert doc["summary"]["verdict"] == "FAIL"
    markdown = paths["markdown"].read_text()
    assert markdown.count("## Combination: ") == 3


def test_report_shows_the_diagnosis_the_results_carry(tmp_path: Path) -> None:
    """The report reads the results format only: a diagnosis comes from results.json."""
    results = make_results(verdicts={FAILING: "fail"})
    row = next(r for r in results["requirements"] if r["id"] == FAILING)
    row["diagnosis"] = "Likely broken: a layer named in the results"
    doc = json.loads(build_report(results, tmp_path)["json"].read_text())
    assert doc["summary"]["failing"][0]["diagnosis"] == row["diagnosis"]


def test_diagnosis_prefix_is_not_doubled(tmp_path: Path) -> None:
    results = make_results(verdicts={FAILING: "fail"})
    row = next(r for r in results["requirements"] if r["id"] == FAILING)
    row["diagnosis"] = "Likely broken: the device plugin"
    paths = build_report(results, tmp_path)
    assert "Likely cause:</b> the device plugin" in paths["html"].read_text()
    assert "Likely cause: the device plugin" in paths["markdown"].read_text()


def test_long_evidence_is_cut_with_a_note(tmp_path: Path) -> None:
    results = make_results(verdicts={FAILING: "fail"},
                           evidence={FAILING: [{"name": "big.txt", "content": "x" * 100_000}]})
    html = build_report(results, tmp_path)["html"].read_text()
    assert "x" * 100_000 not in html and "the full file is in the results folder" in html
