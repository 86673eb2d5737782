"""The evidence bundle is laid out as kubernetes-sigs/ai-conformance lays its own (e2e.log,
junit.xml, results.json = `go test -json`), and Go-side readers accept it: every results.json
line is a test2json event, and Sonobuoy's gojson reader (its own Go code) counts the same tests."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from bundle_fixtures import results_folder, run_validator, sonobuoy_validator
from test_report_fixtures import JWT, make_results

from conformance.cli.main import main
from conformance.common.redact import redact_shapes
from conformance.report import bundle
from conformance.report.errors import ReportInputError

# cmd/test2json: type TestEvent struct { Time time.Time; Action string; Package string;
# Test string; Elapsed float64; Output string; FailedBuild string }
TEST_EVENT_FIELDS = {"Time": str, "Action": str, "Package": str, "Test": str,
                     "Elapsed": (int, float), "Output": str, "FailedBuild": str}
ACTIONS = {"start", "run", "pause", "cont", "pass", "bench", "fail", "output", "skip"}


@pytest.fixture
def written(tmp_path):
    results = make_results(verdicts={"STACK-DP-002": "fail"},
                           messages={"STACK-DP-002": f"2 nodes advertise no GPU (token {JWT})"})
    folder = results_folder(tmp_path / "run", results)
    return results, bundle.write_bundle(folder, tmp_path / "bundle", product_version="1.37")


def test_layout(written):
    _results, files = written
    assert {"e2e.log", "junit.xml", "results.json", "ctrf-report.json", "gpuconf-results.json",
            "report/report.html", "report/report.md", "report/report.json",
            "PRODUCT.yaml"} <= set(files)
    assert all(p.is_file() for p in files.values())


def test_results_json_is_a_go_test_json_stream(written):
    results, files = written
    events = [json.loads(line) for line in files["results.json"].read_text().splitlines()]
    for event in events:
        assert set(event) <= set(TEST_EVENT_FIELDS), event
        for key, value in event.items():
            assert isinstance(value, TEST_EVENT_FIELDS[key]), (key, value)
        assert event["Action"] in ACTIONS
        datetime.fromisoformat(event["Time"].replace("Z", "+00:00"))
    ends = {e["Test"]: e["Action"] for e in events
            if e.get("Test") and e["Action"] in ("pass", "fail", "skip") and "/" in e["Test"]}
    expected = {t["nodeid"].rpartition("::")[2]: t["outcome"]
                for r in results["requirements"] for t in r["tests"]}
    assert len(ends) == len(expected)
    assert sorted(a for a in ends.values()) == sorted(
        {"passed": "pass", "failed": "fail"}.get(o, "skip") for o in expected.values())
    assert ends["STACK-DP-002/test_stack_dp_002"] == "fail"
    packages = [e for e in events if "Test" not in e and e["Action"] in ("pass", "fail")]
    assert {p["Package"] for p in packages} == {
        "gpu-conformance/" + r["area"] for r in results["requirements"] if r["tests"]}
    assert [p["Action"] for p in packages if p["Package"].endswith("/stack")] == ["fail"]


def test_e2e_log_is_the_go_test_v_output(written):
    _results, files = written
    events = [json.loads(line) for line in files["results.json"].read_text().splitlines()]
    log = files["e2e.log"].read_text()
    assert log == "".join(e.get("Output", "") for e in events)
    assert "=== RUN   STACK-DP-002\n" in log
    assert "--- FAIL: STACK-DP-002 (" in log
    assert "FAIL\tgpu-conformance/stack\t" in log
    assert "ok  \tgpu-conformance/scheduling\t" in log


def test_junit_is_the_runs_own_and_nothing_leaks(written, tmp_path):
    _results, files = written
    original = (tmp_path / "run" / "junit.xml").read_text()
    assert JWT in original  # the fixture planted it; the bundle's copy is the same, redacted
    assert files["junit.xml"].read_text() == redact_shapes(original)
    for path in files.values():
        assert JWT not in path.read_text(), path


def test_sonobuoy_gojson_reader_accepts_results_json(written, tmp_path_factory):
    results, files = written
    binary = sonobuoy_validator(tmp_path_factory.getbasetemp())
    tree = run_validator(binary, "gojson", str(files["results.json"]))
    leaves = [i for i in tree["items"] if "/" in i["name"]]
    expected = [t for r in results["requirements"] for t in r["tests"]]
    assert len(leaves) == len(expected)
    assert sum(i["status"] == "failed" for i in leaves) == sum(
        t["outcome"] == "failed" for t in expected)


def test_bad_input_is_one_line(tmp_path, capsys):
    with pytest.raises(ReportInputError, match=r"no junit\.xml"):
        folder = tmp_path / "only-json"
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps(make_results()))
        bundle.write_bundle(folder, tmp_path / "out")
    assert main(["report", str(tmp_path), "--bundle", str(tmp_path / "b")]) == 2
    assert main(["report", str(tmp_path), "--product-version", "1.37", "-o",
                 str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("gpuconf: error: ") for line in err)


def test_cli_writes_the_bundle(tmp_path, capsys):
    folder = results_folder(tmp_path / "run")
    assert main(["report", str(folder), "--bundle", str(tmp_path / "b"),
                 "--product-version", "1.35"]) == 0
    out = capsys.readouterr()
    assert "PRODUCT.yaml" in out.out and "PRODUCT.yaml is a draft" in out.err
    assert (tmp_path / "b" / "e2e.log").is_file()
