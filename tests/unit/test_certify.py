"""Certification: a candidate run against a baseline run."""

from __future__ import annotations

import copy
import json

import pytest
from test_report_fixtures import make_results, with_failure

from conformance.report import ReportInputError, compare
from conformance.report.certify import CERTIFIED, NOT_CERTIFIED, classify


@pytest.fixture
def baseline() -> dict:
    return make_results()


def test_identical_runs_are_certified(baseline: dict) -> None:
    result = compare(baseline, copy.deepcopy(baseline))
    assert result.verdict == CERTIFIED and result.certified
    assert result.changed_requirements == [] and result.figure_changes == []
    assert result.fingerprint_changes == [] and result.regressions == []


def test_one_fault_names_exactly_the_changed_requirement(baseline: dict) -> None:
    candidate = with_failure(baseline, "STACK-TK-001", "toolkit DaemonSet absent on gpu-node-0")
    result = compare(baseline, candidate)
    assert result.verdict == NOT_CERTIFIED and not result.certified
    assert result.changed_requirements == ["STACK-TK-001"]
    assert result.regressed_requirements == ["STACK-TK-001"]
    change = result.requirement_changes[0]
    assert (change.baseline, change.candidate, change.kind) == ("pass", "fail", "regression")
    assert change.message == "toolkit DaemonSet absent on gpu-node-0"
    assert "container toolkit" in (change.diagnosis or "")
    markdown = result.to_markdown()
    assert markdown.startswith("# Certification: NOT CERTIFIED")
    assert "STACK-TK-001: pass \u2192 fail" in markdown
    other_ids = [r["id"] for r in baseline["requirements"] if r["id"] != "STACK-TK-001"]
    assert not any(f"| {i} |" in markdown for i in other_ids)


def test_fix_is_not_a_regression(baseline: dict) -> None:
    broken = with_failure(baseline, "STACK-DP-002", "no nvidia.com/gpu")
    result = compare(broken, baseline)
    assert result.certified
    assert [(c.id, c.kind) for c in result.requirement_changes] == [("STACK-DP-002", "fix")]


def test_kernel_figure_ten_percent_lower_is_flagged(baseline: dict) -> None:
    result = compare(baseline, make_results(kernel_scale=0.90), tolerance=0.05)
    assert not result.certified
    assert result.changed_requirements == []
    assert len(result.regressed_figures) == 3
    triad = next(f for f in result.figure_changes if "triad" in f.name)
    assert triad.kind == "regression" and triad.relative == pytest.approx(-0.10)
    assert "kernel membw · triad" in result.to_markdown()


def test_kernel_figure_two_percent_lower_is_within_tolerance(baseline: dict) -> None:
    result = compare(baseline, make_results(kernel_scale=0.98), tolerance=0.05)
    assert result.certified and result.figure_changes == []


def test_faster_kernel_is_an_improvement(baseline: dict) -> None:
    result = compare(baseline, make_results(kernel_scale=1.10))
    assert result.certified
    assert {f.kind for f in result.figure_changes} == {"improvement"}


def test_higher_latency_is_a_regression_lower_is_not(baseline: dict) -> None:
    slower = copy.deepcopy(baseline)
    for point in slower["measurements"]["interference"]:
        point["latency_p99_ms"] = [v * 1.2 for v in point["latency_p99_ms"]]
    result = compare(baseline, slower)
    assert not result.certified
    assert all("p99 latency" in name for name in result.regressed_figures)
    assert compare(slower, baseline).certified


def test_lower_aggregate_is_a_regression(baseline: dict) -> None:
    worse = copy.deepcopy(baseline)
    for point in worse["measurements"]["interference"]:
        if point["copies"] > 1:
            point["aggregate_vs_solo"] *= 0.9
    result = compare(baseline, worse)
    assert not result.certified
    assert result.regressed_figures and all(
        "aggregate vs solo" in n for n in result.regressed_figures)


def test_tolerance_is_configurable(baseline: dict) -> None:
    candidate = make_results(kernel_scale=0.90)
    assert compare(baseline, candidate, tolerance=0.15).certified
    with pytest.raises(ReportInputError, match="tolerance"):
        compare(baseline, candidate, tolerance=-0.1)


def test_fingerprint_differences_show_what_changed(baseline: dict) -> None:
    result = compare(baseline, make_results(driver="590.10.01"))
    assert result.certified
    assert [(c.field, c.baseline, c.candidate) for c in result.fingerprint_changes] == [
        ("Driver version(s)", "580.105.08", "590.10.01")]
    assert "| Driver version(s) | 580.105.08 | 590.10.01 |" in result.to_markdown()


def test_new_removed_and_unverified_requirements(baseline: dict) -> None:
    candidate = copy.deepcopy(baseline)
    candidate["requirements"] = [r for r in candidate["requirements"]
                                 if r["id"] != "STACK-OP-003"]
    next(r for r in candidate["requirements"] if r["id"] == "STACK-OP-001")["verdict"] = "skip"
    candidate["requirements"].append({"id": "STACK-NEW-001", "title": "new", "verdict": "fail"})
    result = compare(baseline, candidate)
    kinds = {c.id: (c.kind, c.note) for c in result.requirement_changes}
    assert kinds == {
        "STACK-OP-001": ("regression", "no longer verified"),
        "STACK-OP-003": ("regression", "removed; it passed in the baseline"),
        "STACK-NEW-001": ("regression", "new requirement fails"),
    }


@pytest.mark.parametrize(("before", "after", "kind"), [
    ("pass", "fail", "regression"), ("skip", "fail", "regression"),
    ("fail", "pass", "fix"), ("skip", "pass", "change"), ("pass", "not-applicable", "change"),
    ("fail", "skip", "change"), (None, "pass", "change"), ("skip", None, "change"),
    ("pass", "not-run", "regression"),
])
def test_transitions(before: str | None, after: str | None, kind: str) -> None:
    assert classify(before, after)[0] == kind


def test_to_dict_is_json(baseline: dict) -> None:
    candidate = with_failure(baseline, "STACK-TK-001", "absent")
    data = json.loads(json.dumps(compare(baseline, candidate).to_dict()))
    assert data["verdict"] == "NOT CERTIFIED" and data["certified"] is False
    assert data["regressions"] == {"requirements": ["STACK-TK-001"], "figures": []}
    assert data["baseline"]["counts"]["total"] == len(baseline["requirements"])


def test_rejects_results_of_another_version(baseline: dict) -> None:
    with pytest.raises(ReportInputError, match="the candidate are format version 0"):
        compare(baseline, {**baseline, "version": 0})


def test_secrets_do_not_reach_the_certificate(baseline: dict) -> None:
    candidate = with_failure(baseline, "STACK-TK-001", "auth failed: Bearer abc.def.ghi")
    result = compare(baseline, candidate)
    assert "abc.def.ghi" not in result.to_markdown()
    assert "abc.def.ghi" not in json.dumps(result.to_dict())
