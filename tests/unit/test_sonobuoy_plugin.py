"""The Sonobuoy plugin: deploy/sonobuoy/gpuconf-plugin.yaml loads with Sonobuoy's own code
(v0.57.3, the decoder `sonobuoy run --plugin` uses, then strictly) and its Job driver renders
the pod; the entry point honours the plugin contract (results in SONOBUOY_RESULTS_DIR, the
result's path in `done`), and Sonobuoy's worker/aggregator/post-processing code reads what it
hands over: the junit result-format and the bundle beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from bundle_fixtures import ROOT, results_folder, run_validator, sonobuoy_validator
from test_report_fixtures import make_results

from conformance.cli.main import build_parser
from conformance.options import Options
from conformance.run import sonobuoy

PLUGIN = ROOT / "deploy" / "sonobuoy" / "gpuconf-plugin.yaml"


@pytest.fixture(scope="module")
def validator(tmp_path_factory):
    return sonobuoy_validator(tmp_path_factory.getbasetemp())


def test_plugin_loads_and_renders_with_sonobuoy(validator):
    out = run_validator(validator, "plugin", str(PLUGIN))
    assert (out["name"], out["driver"], out["resultFormat"]) == ("gpuconf", "Job", "junit")
    containers = {c["name"]: c for c in out["pod"]["spec"]["containers"]}
    plugin = containers["plugin"]
    assert plugin["command"] == ["gpuconf", "sonobuoy-entrypoint"]
    assert {"name": "results", "mountPath": "/tmp/sonobuoy/results"} in plugin["volumeMounts"]
    worker_env = {e["name"]: e.get("value") for e in containers["sonobuoy-worker"]["env"]}
    assert worker_env["SONOBUOY_RESULTS_DIR"] == "/tmp/sonobuoy/results"


def test_a_misspelt_field_is_refused(validator, tmp_path):
    broken = tmp_path / "plugin.yaml"
    broken.write_text(PLUGIN.read_text().replace("result-format:", "result-fromat:"))
    proc = subprocess.run([str(validator), "plugin", str(broken)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode != 0 and "result-fromat" in proc.stderr


def test_the_plugin_command_is_a_valid_gpuconf_command():
    spec = yaml.safe_load(PLUGIN.read_text())["spec"]
    args = build_parser().parse_args([*spec["command"][1:], *spec["args"]])
    assert args.func.__name__ == "cmd_sonobuoy" and args.product_version == "1.37"
    from conformance.cli.job_commands import _run_options

    assert _run_options(args.run_args).suite == ["stack", "scheduling", "sharing"]


def test_entrypoint_hands_the_bundle_to_sonobuoy(validator, tmp_path, monkeypatch):
    results = make_results(verdicts={"STACK-DP-002": "fail"})

    def fake_run(options, folder, progress):  # the suites, as a finished run leaves them
        results_folder(folder, results)
        return 1

    monkeypatch.setattr(sonobuoy, "run_suites", fake_run)
    monkeypatch.setenv("SONOBUOY_RESULTS_DIR", str(tmp_path / "sonobuoy"))
    assert sonobuoy.sonobuoy_entrypoint(Options(), "1.37", lambda _m: None) == 0
    done = (tmp_path / "sonobuoy" / "done").read_text()
    assert done == str(tmp_path / "sonobuoy" / sonobuoy.SONOBUOY_TARBALL)
    tree = run_validator(validator, "results", str(PLUGIN), str(tmp_path / "sonobuoy"))
    assert {"junit.xml", "e2e.log", "results.json", "ctrf-report.json", "PRODUCT.yaml",
            "gpuconf-results.json", "report/report.html"} <= set(tree["files"])
    item = tree["item"]
    assert item["status"] == "failed"
    cases = [c for f in item["items"] for s in f["items"] for c in s["items"]]
    expected = [t for r in results["requirements"] for t in r["tests"]]
    assert len(cases) == len(expected)
    assert sum(c["status"] == "failed" for c in cases) == sum(
        t["outcome"] == "failed" for t in expected)


def test_entrypoint_writes_done_even_when_the_run_cannot_start(validator, tmp_path):
    """A real process, no cluster to reach: Sonobuoy still gets a result (and no hang)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env.update(HOME=str(tmp_path), SONOBUOY_RESULTS_DIR=str(tmp_path / "sonobuoy"))
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "sonobuoy-entrypoint",
                           "--", "--target=sim"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 2 and "cannot be passed" in proc.stderr  # bad input: exit 2
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "sonobuoy-entrypoint",
                           "--", "--suite", "stack"], env=env, capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert Path((tmp_path / "sonobuoy" / "done").read_text()).is_file()
    tree = run_validator(validator, "results", str(PLUGIN), str(tmp_path / "sonobuoy"))
    assert tree["item"]["status"] == "failed"
    assert "no kubeconfig" in proc.stderr


def test_entrypoint_without_sonobuoy_is_bad_input(tmp_path, capsys, monkeypatch):
    from conformance.cli.main import main

    monkeypatch.delenv("SONOBUOY_RESULTS_DIR", raising=False)
    monkeypatch.delenv("RESULTS_DIR", raising=False)
    assert main(["sonobuoy-entrypoint"]) == 2
    assert "SONOBUOY_RESULTS_DIR is not set" in capsys.readouterr().err
