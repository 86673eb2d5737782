"""CTRF: every document written validates against the published CTRF schema (npm ctrf 0.3.0,
tests/data/ctrf), carries each test with the status pytest gave it, and leaks no secret."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from bundle_fixtures import results_folder
from test_report_fixtures import JWT, PEM, make_results

from conformance.report.ctrf import FILENAME, to_ctrf

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "data" / "ctrf"
                     / "ctrf-schema-0.0.json").read_text())


def validate(doc: dict) -> None:
    jsonschema.Draft7Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(doc)


@pytest.mark.parametrize("verdicts", [
    {}, {"STACK-DP-002": "fail", "SCHED-INT-001": "fail"},
    {r: "not-applicable" for r in ("STACK-OP-001", "STACK-OP-002")},
])
def test_documents_validate_against_the_ctrf_schema(verdicts):
    validate(to_ctrf(make_results(verdicts=verdicts)))


def test_the_schema_check_is_not_vacuous():
    doc = to_ctrf(make_results())
    doc["results"]["tests"][0]["status"] = "broken"
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)
    doc = to_ctrf(make_results())
    doc["results"]["summary"]["start"] = "yesterday"
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


def test_each_pytest_test_is_one_ctrf_test_with_its_status():
    results = make_results(verdicts={"STACK-DP-002": "fail"})
    doc = to_ctrf(results)
    tests = {t["testId"]: t for t in doc["results"]["tests"]}
    expected = {t["nodeid"]: t["outcome"] for r in results["requirements"]
                for t in r["tests"]}
    assert set(tests) == set(expected)
    for nodeid, outcome in expected.items():
        status = {"not-applicable": "skipped"}.get(outcome, outcome)
        assert tests[nodeid]["status"] == status
        if outcome == "not-applicable":
            assert tests[nodeid]["rawStatus"] == "not-applicable"
    failed = [t for t in doc["results"]["tests"] if t["status"] == "failed"]
    assert failed and all(t["extra"]["requirement"] == "STACK-DP-002" for t in failed)
    assert failed[0]["extra"]["diagnosis"]
    summary = doc["results"]["summary"]
    assert summary["tests"] == len(tests)
    assert summary["failed"] == len(failed)
    assert summary["passed"] + summary["failed"] + summary["skipped"] == summary["tests"]
    assert summary["stop"] - summary["start"] == 80_000  # 11:30:00 -> 11:31:20
    assert summary["extra"]["gpuconf"]["summary"] == results["summary"]
    assert doc["runId"] == results["run"]["id"]
    assert to_ctrf(results)["reportId"] == doc["reportId"]  # stable for the same run


def test_no_secret_reaches_the_document():
    results = make_results(messages={"STACK-DP-002": f"token {JWT} key {PEM}"},
                           verdicts={"STACK-DP-002": "fail"})
    text = json.dumps(to_ctrf(results))
    assert JWT not in text and "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in text


def test_the_run_plan_writes_ctrf_beside_junit(tmp_path):
    from conformance.common.console import quiet
    from conformance.run.plan import write_report

    folder = results_folder(tmp_path / "results")
    write_report(folder, quiet)
    doc = json.loads((folder / FILENAME).read_text())
    validate(doc)
    assert (folder / "report" / "report.html").is_file()
