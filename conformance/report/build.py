"""Write report.html, report.md and report.json for one run or for a matrix of runs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from conformance.common.redact import redact_object, redact_shapes
from conformance.report import html_report, markdown_report, model
from conformance.report.load import check_results

HTML, MARKDOWN, JSON = "html", "markdown", "json"
FILENAMES = {HTML: "report.html", MARKDOWN: "report.md", JSON: "report.json"}


def _prepare(results: Mapping[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Check and redact results; return (report document, raw requirements by id)."""
    check_results(results, where)
    clean = redact_object(dict(results))
    raw = {str(r["id"]): r for r in clean["requirements"]}
    return model.document(clean), raw


def _write(out_dir: Path, html: str, markdown: str, document: Mapping[str, Any]) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    texts = {HTML: html, MARKDOWN: markdown,
             JSON: json.dumps(document, indent=2, ensure_ascii=False) + "\n"}
    paths = {}
    for key, text in texts.items():
        path = out_dir / FILENAMES[key]
        # Second guard: anything shaped like a secret that reached a renderer unredacted.
        path.write_text(redact_shapes(text), encoding="utf-8")
        paths[key] = path
    return paths


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_report(results: Mapping[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """Write the compliance report of one run; returns {"html"|"markdown"|"json": path}.

    Raises :class:`ReportInputError` when ``results`` are not gpuconf results
    of the supported version.
    """
    document, raw = _prepare(results, "the results")
    generated = _now()
    document["generated"] = generated
    return _write(Path(out_dir), html_report.render_run(document, raw, generated),
                  markdown_report.render_run(document, raw, generated), document)


def build_matrix_report(results_list: Sequence[Mapping[str, Any]],
                        out_dir: str | Path) -> dict[str, Path]:
    """Write one report for several runs (a matrix), each combination in its own section.

    Combinations are named by ``run.combination`` (or the run's position and id); two runs
    of one combination get distinct names so their tables never merge.
    """
    prepared = [_prepare(r, f"results #{i + 1}") for i, r in enumerate(results_list)]
    documents = [doc for doc, _ in prepared]
    raws = [raw for _, raw in prepared]
    matrix = model.matrix_document(documents)
    generated = _now()
    matrix["generated"] = generated
    return _write(Path(out_dir), html_report.render_matrix(matrix, raws, generated),
                  markdown_report.render_matrix(matrix, raws, generated), matrix)
