"""The install path: the real GPU Operator chart into the sim with Helm, the suite against it,
and an uninstall that leaves no operator objects behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.cluster.client import connect
from conformance.common.console import quiet
from conformance.options import Options
from conformance.run import operator_install
from conformance.sim import cluster as simcluster
from tests.helpers import REPO, run_suites, verdicts

CHART = REPO.parent / "shared" / "upstream" / "gpu-operator-v26.7.0" / "chart"


@pytest.fixture
def chart_sim():
    if not CHART.is_dir():
        pytest.skip(f"the GPU Operator chart is not at {CHART} (only the project's CI has it)")
    if not Path(operator_install.helm_binary()).exists():
        pytest.skip("helm not built: run `make setup`")
    state = simcluster.up("itest-chart", profile="healthy", operator="chart",
                          progress=quiet)
    yield state
    simcluster.down("itest-chart", progress=quiet)


def _args(**over) -> Options:
    return Options(operator_chart=str(CHART)).replace(**over)


def test_chart_install_suite_and_clean_uninstall(chart_sim, tmp_path):
    kc = str(chart_sim.kubeconfig)
    installed = operator_install.install_operator(_args(), kc, "sim", progress=quiet)
    assert installed is not None
    cluster = connect(kc)
    try:
        code, doc, out = run_suites(chart_sim.kubeconfig, tmp_path, "stack",
                                    extra=[f"--helm-release={installed.release}"])
        assert code == 0, out[-3000:]
        assert {"STACK-OP-001", "STACK-OP-002", "STACK-OP-003", "STACK-DP-001",
                "STACK-GFD-002"} <= verdicts(doc, "pass")
        rows = {r["id"]: r for r in doc["requirements"]}
        assert rows["STACK-DRV-001"]["verdict"] == "not-applicable"  # driver.enabled=false
    finally:
        installed.uninstall(progress=quiet)
    assert cluster.apps.list_daemon_set_for_all_namespaces(
        label_selector="app.kubernetes.io/managed-by=gpu-operator").items == []
    assert cluster.apps.list_deployment_for_all_namespaces(
        label_selector="app.kubernetes.io/component=gpu-operator").items == []
    assert cluster.custom.list_cluster_custom_object(
        "nvidia.com", "v1", "clusterpolicies")["items"] == []
    assert "gpu-operator" not in {n.metadata.name for n in cluster.core.list_namespace().items}


def test_existing_operator_is_left_alone(sim):
    assert operator_install.install_operator(_args(), str(sim.kubeconfig), "sim",
                                             progress=quiet) is None


def test_matrix_runs_keep_combinations_apart(tmp_path):
    """Two values sets of the real chart on the sim: two runs, results and report apart."""
    import json
    import subprocess
    import sys

    if not CHART.is_dir():
        pytest.skip(f"the GPU Operator chart is not at {CHART}")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text("values:\n  default: {}\n  no-dcgm: {dcgmExporter.enabled: 'false'}\n"
                      "sharing:\n  none: {sim_profile: healthy}\n")
    results = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--matrix",
                           str(matrix), "--operator-chart", str(CHART), "--suite", "stack",
                           "--results", str(results)], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    docs = {d.name: json.loads((d / "results.json").read_text())
            for d in results.iterdir() if (d / "results.json").is_file()}
    assert set(docs) == {"chart_default_none", "chart_no-dcgm_none"}
    dcgm = {name: {r["id"]: r["verdict"] for r in doc["requirements"]}["STACK-DCGM-001"]
            for name, doc in docs.items()}
    assert dcgm == {"chart_default_none": "pass", "chart_no-dcgm_none": "not-applicable"}
    assert all(doc["run"]["combination"] == name for name, doc in docs.items())
    html = (results / "matrix-report" / "report.html").read_text()
    assert "chart_default_none" in html and "chart_no-dcgm_none" in html
