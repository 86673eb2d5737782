"""CTRF (Common Test Report Format) JSON from a run's ``results.json``.

CTRF is the JSON test report NVIDIA's aicr validators aggregate into, and the one that CI
summaries (github-actions-ctrf and friends) read. The document follows the published schema
``ctrf-schema-0.0.json`` (npm ``ctrf`` 0.3.0, ``specVersion`` 0.0.0); the tests validate every
document written against it.

One CTRF test per pytest test of a requirement. Statuses: passed / failed / skipped as pytest
reported them; a ``not-applicable`` test is ``skipped`` with ``rawStatus: not-applicable`` (the
schema's place for a framework's own status). Requirements no test covered (``not-run``) have
no test to list: they are counted in ``extra.gpuconf.summary``. Timestamps are the run's.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from conformance.common.redact import redact_object
from conformance.report.load import check_results

SPEC_VERSION = "0.0.0"
FILENAME = "ctrf-report.json"
TOOL = "gpu-conformance"
_STATUS = {"passed": "passed", "failed": "failed", "skipped": "skipped",
           "not-applicable": "skipped", "not-run": "skipped"}
# A fixed namespace: the same run always gets the same report and test IDs.
_NAMESPACE = uuid.UUID("6f1d1c55-3f0e-4a58-9a39-0b7c1c0f6a21")


def _epoch_ms(stamp: str | None) -> int:
    if not stamp:
        return 0
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


def _test(req: Mapping[str, Any], test: Mapping[str, Any]) -> dict[str, Any]:
    nodeid = str(test.get("nodeid") or req["id"])
    outcome = str(test.get("outcome") or "")
    status = _STATUS.get(outcome, "other")
    out: dict[str, Any] = {
        "name": f"{req['id']} {nodeid.rpartition('::')[2] or nodeid}",
        "status": status,
        "duration": max(0, round(float(test.get("duration_s") or 0) * 1000)),
        "testId": nodeid,
        "suite": [str(req.get("area") or "gpu-conformance"), str(req["id"])],
        "filePath": nodeid.partition("::")[0],
        "tags": [str(req["id"]), *(str(c) for c in req.get("cncf") or ())],
        "extra": {"requirement": req["id"], "title": req.get("title"),
                  "layer": req.get("layer"), "severity": req.get("severity"),
                  "cncf": list(req.get("cncf") or ())},
    }
    if status != outcome:
        out["rawStatus"] = outcome
    if test.get("message"):
        out["message"] = str(test["message"])
    if status == "failed" and req.get("diagnosis"):
        out["extra"]["diagnosis"] = req["diagnosis"]
    return out


def to_ctrf(results: Mapping[str, Any]) -> dict[str, Any]:
    """The CTRF document of one run (results already checked or checked here)."""
    check_results(results, "the results")
    clean = redact_object(dict(results))
    run = clean.get("run") or {}
    tests = [_test(req, test) for req in clean["requirements"] for test in req.get("tests") or ()]
    counts = {s: sum(t["status"] == s for t in tests)
              for s in ("passed", "failed", "skipped", "pending", "other")}
    start, stop = _epoch_ms(run.get("started")), _epoch_ms(run.get("finished"))
    fp = clean.get("fingerprint") or {}
    run_id = str(run.get("id") or "unknown")
    environment = {
        "reportName": f"gpu-conformance {run.get('target') or ''}".strip(),
        "appName": "kubernetes",
        "testEnvironment": str(run.get("target") or "unknown"),
        "extra": {k: fp.get(k) for k in ("kubernetes_version", "operator_version",
                                          "driver_versions", "cuda_versions",
                                          "sharing_strategies") if fp.get(k)},
    }
    if fp.get("kubernetes_version"):
        environment["appVersion"] = str(fp["kubernetes_version"])
    doc: dict[str, Any] = {
        "reportFormat": "CTRF",
        "specVersion": SPEC_VERSION,
        "reportId": str(uuid.uuid5(_NAMESPACE, f"{run_id}/{run.get('finished')}")),
        "runId": run_id,
        "generatedBy": f"{TOOL} {run.get('gpuconf_version') or ''}".strip(),
        "results": {
            "tool": {"name": TOOL, **({"version": str(run["gpuconf_version"])}
                                      if run.get("gpuconf_version") else {})},
            "summary": {"tests": len(tests), **counts,
                        "suites": len({t["suite"][0] for t in tests}),
                        "start": start, "stop": max(stop, start),
                        "duration": max(0, stop - start),
                        "extra": {"gpuconf": {"summary": clean.get("summary"),
                                              "interrupted": bool(run.get("interrupted"))}}},
            "tests": tests,
            "environment": environment,
        },
    }
    if run.get("finished"):
        doc["timestamp"] = str(run["finished"])
    return doc
