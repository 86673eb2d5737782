"""A run's results folder (results.json + junit.xml) built from the report fixtures, for the
bundle, CTRF, PRODUCT.yaml and Sonobuoy tests. Nothing here is collected as a test."""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from test_report_fixtures import make_results

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR_SRC = ROOT / "deploy" / "sonobuoy" / "validate"


def junit_of(results: dict[str, Any]) -> str:
    """JUnit XML with one testcase per test of the results (what pytest's --junitxml holds)."""
    suite = ET.Element("testsuite", name="pytest")
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for req in results["requirements"]:
        for test in req.get("tests") or ():
            path, _, name = test["nodeid"].partition("::")
            case = ET.SubElement(suite, "testcase", classname=path.replace("/", ".")[:-3],
                                 name=name, time=str(test.get("duration_s", 0)))
            counts["tests"] += 1
            if test["outcome"] == "failed":
                ET.SubElement(case, "failure", message=test.get("message") or "failed")
                counts["failures"] += 1
            elif test["outcome"] in ("skipped", "not-applicable"):
                ET.SubElement(case, "skipped", message=test.get("message") or "skipped")
                counts["skipped"] += 1
    suite.attrib.update({k: str(v) for k, v in counts.items()}, errors="0")
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="unicode")


def results_folder(folder: Path, results: dict[str, Any] | None = None) -> Path:
    results = results if results is not None else make_results()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(results, indent=2))
    (folder / "junit.xml").write_text(junit_of(results))
    return folder


def sonobuoy_validator(cache: Path) -> Path:
    """The Go harness of deploy/sonobuoy/validate built once (Sonobuoy v0.57.3's own code);
    skips with the reason where Go or the module proxy is missing."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go is not installed: the Sonobuoy plugin is checked with Sonobuoy's own "
                    "Go packages (deploy/sonobuoy/validate)")
    binary = cache / "sonobuoy-validate"
    if not binary.exists():
        proc = subprocess.run([go, "build", "-o", str(binary), "."], cwd=VALIDATOR_SRC,
                              capture_output=True, text=True, timeout=900, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            if any("dial tcp" in line or "proxy" in line for line in tail):
                pytest.skip("cannot download Sonobuoy v0.57.3 from the Go module proxy: "
                            + " ".join(tail))
            raise AssertionError("building deploy/sonobuoy/validate failed:\n" + proc.stderr)
    return binary


def run_validator(binary: Path, *args: str) -> dict[str, Any]:
    proc = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
