"""The GPU CI pipelines: schema-valid (check-jsonschema's vendored schemas, offline) and
structurally what they must be: suite run, artifacts kept whatever happens, cluster deleted."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GITHUB = ROOT / "ci" / "github" / "gpu-conformance.yml"
GITLAB = ROOT / "ci" / "gitlab" / "gpu-conformance.gitlab-ci.yml"
# Any network use would go to a closed port: the vendored schemas must suffice.
OFFLINE = {**os.environ, "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
           "NO_PROXY": ""}


def check_jsonschema(schema: str, path: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("check_jsonschema", reason="check-jsonschema is not installed (dev extra)")
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True, text=True, timeout=120, env=OFFLINE, check=False)


@pytest.mark.parametrize(("schema", "path"), [("vendor.github-workflows", GITHUB),
                                              ("vendor.gitlab-ci", GITLAB)])
def test_pipeline_matches_its_vendored_schema(schema: str, path: Path) -> None:
    result = check_jsonschema(schema, path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("schema", "path", "old", "new"), [
    ("vendor.github-workflows", GITHUB, "runs-on: [self-hosted, linux, gpu]", "runs-on: 7"),
    ("vendor.gitlab-ci", GITLAB, "when: always", "when: sometimes"),
])
def test_schema_check_catches_a_broken_pipeline(tmp_path: Path, schema: str, path: Path,
                                                old: str, new: str) -> None:
    broken = tmp_path / path.name
    text = path.read_text()
    assert old in text
    broken.write_text(text.replace(old, new))
    assert check_jsonschema(schema, broken).returncode != 0


# --- GitHub Actions ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(GITHUB.read_text())


@pytest.fixture(scope="module")
def steps(workflow: dict) -> list[dict]:
    (job,) = workflow["jobs"].values()
    return job["steps"]


def runs(steps: list[dict]) -> str:
    return "\n".join(s.get("run", "") for s in steps)


def test_runs_on_a_self_hosted_gpu_runner(workflow: dict) -> None:
    (job,) = workflow["jobs"].values()
    assert job["runs-on"] == ["self-hosted", "linux", "gpu"]
    assert job["timeout-minutes"] > 0


def test_dispatch_inputs(workflow: dict) -> None:
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads `on` as true
    inputs = triggers["workflow_dispatch"]["inputs"]
    assert inputs["operator_version"]["type"] == "string"
    assert inputs["driver_enabled"]["type"] == "boolean"
    assert inputs["toolkit_enabled"]["type"] == "boolean"
    # every config with GPU workers (no-gpu.yaml is for hosts without GPUs, not GPU runners)
    assert set(inputs["kind_config"]["options"]) == {
        p.name for p in (ROOT / "kind-config").glob("*.yaml")
        if "nvidia-container-devices" in p.read_text()}


def test_setup_install_kind_and_operator(steps: list[dict]) -> None:
    uses = [s.get("uses", "") for s in steps]
    assert uses[0].startswith("actions/checkout@")
    assert any(u.startswith("actions/setup-python@") for u in uses)
    script = runs(steps)
    assert 'pip install ".[gpu]"' in script
    assert "kind-config/gpu-kind.sh host" in script
    assert 'kind-config/gpu-kind.sh create "$KIND_CLUSTER" "kind-config/$KIND_CONFIG"' in script
    assert "kind-config/gpu-kind.sh nodes" in script
    assert "helm upgrade --install gpu-operator nvidia/gpu-operator" in script
    assert '--set driver.enabled="$DRIVER_ENABLED"' in script
    assert '--set toolkit.enabled="$TOOLKIT_ENABLED"' in script
    assert '--version "$OPERATOR_VERSION"' in script


def test_inputs_reach_the_helm_install(workflow: dict) -> None:
    env = workflow["env"]
    assert "inputs.operator_version" in env["OPERATOR_VERSION"]
    assert "inputs.driver_enabled" in env["DRIVER_ENABLED"]
    assert "inputs.toolkit_enabled" in env["TOOLKIT_ENABLED"]


def test_suite_and_report_run(steps: list[dict]) -> None:
    suite = next(s for s in steps if "gpuconf run" in s.get("run", ""))
    assert re.search(r"gpuconf run --target (kind|existing)\b.*--results", suite["run"])
    report = next(s for s in steps if "gpuconf report" in s.get("run", ""))
    assert report["if"].startswith("always()")
    assert 'gpuconf report "$RESULTS" -o "$REPORT"' in report["run"]
    assert steps.index(suite) < steps.index(report)


def test_artifacts_are_uploaded_whatever_happens(steps: list[dict]) -> None:
    uploads = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert uploads and all(s["if"] == "always()" for s in uploads)
    paths = "\n".join(s["with"]["path"] for s in uploads)
    for expected in ("results/allure-results/", "results/junit.xml", "report/",
                     "results/results.json"):
        assert expected in paths


def test_kind_cluster_is_always_deleted_last(steps: list[dict]) -> None:
    last = steps[-1]
    assert last["if"].startswith("always()")
    assert 'kind-config/gpu-kind.sh delete "$KIND_CLUSTER"' in last["run"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_github_run_blocks_are_valid_bash(steps: list[dict]) -> None:
    for step in steps:
        if "run" in step:
            assert "${{" not in step["run"], "pass expressions through env, not into scripts"
            result = subprocess.run(["bash", "-n"], input=step["run"], text=True,
                                    capture_output=True, check=False)
            assert result.returncode == 0, (step["name"], result.stderr)


# --- GitLab CI ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def job() -> dict:
    return yaml.safe_load(GITLAB.read_text())["gpu-conformance"]


def test_gitlab_job_runs_on_gpu_runners(job: dict) -> None:
    assert job["tags"] == ["gpu"]


def test_gitlab_variables_mirror_the_dispatch_inputs() -> None:
    variables = yaml.safe_load(GITLAB.read_text())["variables"]
    for name in ("OPERATOR_VERSION", "DRIVER_ENABLED", "TOOLKIT_ENABLED", "KIND_CONFIG"):
        assert variables[name]["description"]
    assert variables["DRIVER_ENABLED"]["options"] == ["false", "true"]


def test_gitlab_runs_the_same_steps(job: dict) -> None:
    script = "\n".join(job["before_script"] + job["script"])
    assert 'pip install ".[gpu]"' in script
    for step in ("gpu-kind.sh host", "gpu-kind.sh create", "gpu-kind.sh nodes",
                 "helm upgrade --install gpu-operator nvidia/gpu-operator",
                 '--set driver.enabled="$DRIVER_ENABLED"',
                 '--set toolkit.enabled="$TOOLKIT_ENABLED"'):
        assert step in script
    assert re.search(r"gpuconf run --target (kind|existing)\b.*--results", job["script"][-1])


def test_gitlab_artifacts_and_cleanup(job: dict) -> None:
    artifacts = job["artifacts"]
    assert artifacts["when"] == "always"
    assert artifacts["reports"]["junit"] == "results/junit.xml"
    for expected in ("results/allure-results/", "results/junit.xml", "report/",
                     "results/results.json"):
        assert expected in artifacts["paths"]
    after = "\n".join(job["after_script"])
    assert 'gpuconf report "$RESULTS" -o "$REPORT"' in after
    assert 'kind-config/gpu-kind.sh delete "$KIND_CLUSTER"' in after


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_gitlab_scripts_are_valid_bash(job: dict) -> None:
    for line in job["before_script"] + job["script"] + job["after_script"]:
        result = subprocess.run(["bash", "-n"], input=line, text=True, capture_output=True,
                                check=False)
        assert result.returncode == 0, (line, result.stderr)


@pytest.mark.parametrize("path", [GITHUB, GITLAB])
def test_referenced_repository_files_exist(path: Path) -> None:
    text = path.read_text()
    for ref in set(re.findall(r"\b(kind-config/[\w.-]+\.(?:sh|yaml))", text)):
        assert (ROOT / ref).is_file(), ref
