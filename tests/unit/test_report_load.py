"""Reading results: a folder or a file; clear one-line errors for anything else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_report_fixtures import make_results

from conformance.report import ReportInputError, build_report, load_results


def write(folder: Path, doc: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "results.json"
    path.write_text(json.dumps(doc))
    return path


def test_loads_a_folder_and_a_file(tmp_path: Path) -> None:
    path = write(tmp_path / "results", make_results())
    assert load_results(tmp_path / "results")["format"] == "gpuconf-results"
    assert load_results(path)["version"] == 1
    assert load_results(str(path))["requirements"]


def error(path: Path) -> str:
    with pytest.raises(ReportInputError) as caught:
        load_results(path)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_missing_folder(tmp_path: Path) -> None:
    assert error(tmp_path / "nope") == f"results not found: {tmp_path / 'nope'} does not exist"


def test_folder_without_results(tmp_path: Path) -> None:
    message = error(tmp_path)
    assert message.startswith(f"no results.json in {tmp_path}")
    assert "gpuconf run" in message


def test_not_json(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text("{not json")
    assert "is not JSON (line 1, column 2" in error(tmp_path)


def test_binary_file(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_bytes(b"\xff\xfe\x00garbage")
    assert "is not JSON" in error(tmp_path)


def test_other_format(tmp_path: Path) -> None:
    write(tmp_path, {"format": "junit", "version": 1, "requirements": []})
    assert error(tmp_path) == (f"{tmp_path} is not gpuconf results (format 'junit', "
                               "expected 'gpuconf-results')")


def test_json_that_is_not_an_object(tmp_path: Path) -> None:
    write(tmp_path, [1, 2, 3])
    assert "is not a gpuconf results document" in error(tmp_path)


def test_older_version(tmp_path: Path) -> None:
    write(tmp_path, {**make_results(), "version": 0})
    assert error(tmp_path) == (f"results in {tmp_path} are format version 0; this gpuconf reads "
                               "version 1: re-run the suite")


def test_newer_version(tmp_path: Path) -> None:
    write(tmp_path, {**make_results(), "version": 2})
    assert error(tmp_path).endswith("format version 2; this gpuconf reads version 1: "
                                    "upgrade gpuconf")


def test_missing_version(tmp_path: Path) -> None:
    doc = make_results()
    del doc["version"]
    write(tmp_path, doc)
    assert "carry no valid format version" in error(tmp_path)


def test_malformed_requirements(tmp_path: Path) -> None:
    write(tmp_path, {**make_results(), "requirements": [{"verdict": "pass"}]})
    assert "requirement #1 has no id" in error(tmp_path)


def test_the_cli_turns_it_into_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    from conformance.cli.main import main

    (tmp_path / "results.json").write_text("{not json")
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuconf: error: ") and "is not JSON" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_build_report_checks_its_input(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match="format version 0"):
        build_report({**make_results(), "version": 0}, tmp_path)


def test_tolerates_missing_optional_sections(tmp_path: Path) -> None:
    doc = make_results()
    for key in ("run", "fingerprint", "measurements", "summary"):
        del doc[key]
    paths = build_report(doc, tmp_path)
    assert "no GPU nodes found" in paths["html"].read_text()
