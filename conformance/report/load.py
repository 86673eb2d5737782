"""Read and check a ``results.json`` (format ``gpuconf-results``) before anything renders it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conformance.report.errors import ReportInputError

RESULTS_FORMAT = "gpuconf-results"
RESULTS_VERSION = 1
RESULTS_FILE = "results.json"


def load_results(path: str | Path) -> dict[str, Any]:
    """Load results from a results folder (holding ``results.json``) or from the file itself.

    Raises :class:`ReportInputError` with one clear line when the input is missing, is not
    JSON, is another format or another format version.
    """
    given = Path(path)
    if given.is_dir():
        file = given / RESULTS_FILE
        if not file.is_file():
            raise ReportInputError(
                f"no {RESULTS_FILE} in {given}: run `gpuconf run --results {given}` first"
            )
    elif given.is_file():
        file = given
    else:
        raise ReportInputError(f"results not found: {given} does not exist")

    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ReportInputError(f"{file} is not JSON (not UTF-8 text)") from None
    except OSError as exc:
        raise ReportInputError(f"cannot read {file}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportInputError(
            f"{file} is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    check_results(data, where=str(given))
    return data


def check_results(data: Any, where: str = "the results") -> None:
    """Check the envelope and the shape the report relies on; raise ReportInputError if wrong."""
    if not isinstance(data, dict):
        raise ReportInputError(f"{where} is not a gpuconf results document (a JSON object)")
    fmt = data.get("format")
    if fmt != RESULTS_FORMAT:
        raise ReportInputError(
            f"{where} is not gpuconf results (format {fmt!r}, expected {RESULTS_FORMAT!r})"
        )
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ReportInputError(
            f"results in {where} carry no valid format version ({version!r}); "
            f"this gpuconf reads version {RESULTS_VERSION}: re-run the suite"
        )
    if version < RESULTS_VERSION:
        raise ReportInputError(
            f"results in {where} are format version {version}; this gpuconf reads version "
            f"{RESULTS_VERSION}: re-run the suite"
        )
    if version > RESULTS_VERSION:
        raise ReportInputError(
            f"results in {where} are format version {version}; this gpuconf reads version "
            f"{RESULTS_VERSION}: upgrade gpuconf"
        )
    requirements = data.get("requirements")
    if not isinstance(requirements, list):
        raise ReportInputError(f"results in {where} have no requirements list")
    for index, req in enumerate(requirements):
        if not isinstance(req, dict) or not isinstance(req.get("id"), str):
            raise ReportInputError(
                f"results in {where} are malformed: requirement #{index + 1} has no id"
            )
