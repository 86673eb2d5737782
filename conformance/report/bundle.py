"""The evidence bundle: a run's results laid out as kubernetes-sigs/ai-conformance lays its own.

The ai-conformance tests (``go test -v ./test``) hand back three files, which the CNCF AI
Conformance checklist (1.37) recommends as evidence and which CI jobs upload as they are:

- ``e2e.log``: the ``go test -v`` output;
- ``results.json``: the ``go test -json`` stream (Go's ``cmd/test2json`` events, one JSON object
  per line: Time, Action, Package, Test, Elapsed, Output);
- ``junit.xml``: JUnit XML.

A bundle holds the same three files for a gpu-conformance run, so the same upload steps and the
same readers (gotestsum, go-junit-report, Sonobuoy's ``gojson`` format) work on it:
``junit.xml`` is the run's own (pytest's); ``results.json`` renders the run as test2json events,
one package per area, one test per requirement and one subtest per pytest test; ``e2e.log`` is the
Output of those events, which is what ``go test -v`` prints. Beside them: ``ctrf-report.json``
(CTRF), ``gpuconf-results.json`` (the run's ``results.json``, format gpuconf-results),
``report/`` (HTML, Markdown, JSON) and, when a checklist version is named, ``PRODUCT.yaml``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from conformance.common.redact import redact_object, redact_shapes
from conformance.report import ctrf, product
from conformance.report.build import build_report
from conformance.report.errors import ReportInputError
from conformance.report.load import RESULTS_FILE, load_results

E2E_LOG, JUNIT, GO_JSON = "e2e.log", "junit.xml", "results.json"
GPUCONF_RESULTS = "gpuconf-results.json"
REPORT_DIR = "report"
PACKAGE_PREFIX = "gpu-conformance/"
# test2json's actions for a finished test, by pytest outcome
_ACTION = {"passed": "pass", "failed": "fail", "skipped": "skip", "not-applicable": "skip",
           "not-run": "skip"}
_WORD = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}


def _stamp(start: datetime, offset_s: float) -> str:
    return (start + timedelta(seconds=offset_s)).isoformat().replace("+00:00", "Z")


def _name(text: str) -> str:
    """A subtest name as ``go test`` writes one (spaces become underscores)."""
    return re.sub(r"\s", "_", text) or "_"


def _start(run: Mapping[str, Any]) -> datetime:
    try:
        return datetime.fromisoformat(str(run.get("started")).replace("Z", "+00:00"))
    except ValueError:
        return datetime.now(UTC)


class _Stream:
    """test2json events on a clock that advances by the tests' durations."""

    def __init__(self, start: datetime) -> None:
        self.start = start
        self.clock = 0.0
        self.package = ""
        self.events: list[dict[str, Any]] = []

    def emit(self, action: str, test: str | None = None, *, output: str | None = None,
             elapsed: float | None = None) -> None:
        event: dict[str, Any] = {"Time": _stamp(self.start, self.clock), "Action": action,
                                 "Package": self.package}
        if test is not None:
            event["Test"] = test
        if elapsed is not None:
            event["Elapsed"] = round(elapsed, 3)
        if output is not None:
            event["Output"] = output
        self.events.append(event)


def go_test_events(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The run as ``go test -json`` events (test2json), in the order ``go test`` emits them."""
    clean = redact_object(dict(results))
    out = _Stream(_start(clean.get("run") or {}))
    by_area: dict[str, list[dict[str, Any]]] = {}
    for req in clean["requirements"]:
        if req.get("tests"):
            by_area.setdefault(str(req.get("area") or "other"), []).append(req)
    for area, reqs in by_area.items():
        out.package = PACKAGE_PREFIX + area
        package_start = out.clock
        out.emit("start")
        package_failed = False
        for req in reqs:
            parent = _name(str(req["id"]))
            out.emit("run", parent)
            out.emit("output", parent, output=f"=== RUN   {parent}\n")
            parent_start = out.clock
            actions = []
            for test in req["tests"]:
                nodeid = str(test.get("nodeid") or "")
                name = f"{parent}/{_name(nodeid.rpartition('::')[2] or nodeid)}"
                out.emit("run", name)
                out.emit("output", name, output=f"=== RUN   {name}\n")
                for line in str(test.get("message") or "").splitlines()[:50]:
                    out.emit("output", name, output=f"    {line}\n")
                took = float(test.get("duration_s") or 0.0)
                out.clock += took
                action = _ACTION.get(str(test.get("outcome")), "fail")
                actions.append(action)
                out.emit("output", name,
                         output=f"    --- {_WORD[action]}: {name} ({took:.2f}s)\n")
                out.emit(action, name, elapsed=took)
            action = ("fail" if "fail" in actions else "pass" if "pass" in actions else "skip")
            package_failed |= action == "fail"
            took = out.clock - parent_start
            out.emit("output", parent, output=f"--- {_WORD[action]}: {parent} ({took:.2f}s)\n")
            out.emit(action, parent, elapsed=took)
        took = out.clock - package_start
        out.emit("output", output="FAIL\n" if package_failed else "PASS\n")
        out.emit("output", output=(f"FAIL\t{out.package}\t{took:.3f}s\n" if package_failed
                                   else f"ok  \t{out.package}\t{took:.3f}s\n"))
        out.emit("fail" if package_failed else "pass", elapsed=took)
    return out.events


def e2e_log(events: list[dict[str, Any]]) -> str:
    """What ``go test -v`` prints for these events: their Output, in order."""
    return "".join(e.get("Output", "") for e in events)


def write_bundle(results_dir: str | Path, out_dir: str | Path, *,
                 product_version: str | None = None,
                 product_metadata: Mapping[str, Any] | None = None,
                 evidence_url: str | None = None) -> dict[str, Path]:
    """Write the bundle of the run in ``results_dir`` (its results.json and junit.xml).

    Returns {name: path} of what was written. Raises :class:`ReportInputError` (one line)
    when the folder is not a run's results folder.
    """
    folder = Path(results_dir)
    if not folder.is_dir():
        raise ReportInputError(f"a bundle needs a run's results folder (results.json and "
                               f"junit.xml): {folder} is not a folder")
    results = load_results(folder)
    junit = folder / JUNIT
    if not junit.is_file():
        raise ReportInputError(f"no {JUNIT} beside {RESULTS_FILE} in {folder}: the bundle "
                               "carries the run's own JUnit; pass the folder `gpuconf run` wrote")
    if product_version is not None:
        product.checklist_text(product_version)  # an unknown version fails before writing
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}

    def put(name: str, text: str) -> None:
        path = out / name
        path.write_text(redact_shapes(text), encoding="utf-8")
        written[name] = path

    events = go_test_events(results)
    put(GO_JSON, "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events))
    put(E2E_LOG, e2e_log(events))
    put(JUNIT, junit.read_text(encoding="utf-8", errors="replace"))
    put(ctrf.FILENAME, json.dumps(ctrf.to_ctrf(results), indent=2, ensure_ascii=False) + "\n")
    put(GPUCONF_RESULTS, json.dumps(redact_object(results), indent=2, ensure_ascii=False) + "\n")
    for path in build_report(results, out / REPORT_DIR).values():
        written[f"{REPORT_DIR}/{path.name}"] = path
    if product_version is not None:
        written[product.FILENAME] = product.write(results, product_version, out,
                                                  metadata=product_metadata,
                                                  evidence_url=evidence_url)
    return written
