"""`gpuconf run`, the main job: sim by default, results written, interrupts clean up."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

import pytest

from conformance.binaries import binaries
from conformance.common.console import quiet
from conformance.controlplane.components import clusters_dir

# `gpuconf run` without a kubeconfig starts a sim of its own (run-<id>); these tests look for
# what such runs leave, so under xdist they share one worker with the matrix run (loadgroup)
pytestmark = [pytest.mark.skipif(bool(binaries.locate().missing()),
                                 reason="control-plane binaries not built: run `make setup`"),
              pytest.mark.xdist_group("run-sims")]


def _env(tmp_path) -> dict:
    # No kubeconfig anywhere: the default must be the embedded sim.
    return {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": "",
            "GPUCONF_CACHE": str(binaries.cache_dir())}


def _own_sim(output: str) -> str | None:
    """The sim a run started for itself, as it says (other runs on the host have their own)."""
    found = re.search(r"starting the local simulated cluster '(run-[0-9a-z]+)'", output)
    return found.group(1) if found else None


def _active_test_namespaces(cluster) -> list[str]:
    """Namespaces of checks still running (a Terminating one may belong to a finished run)."""
    items = cluster.core.list_namespace(label_selector="app.kubernetes.io/managed-by="
                                        "gpu-conformance").items
    return [ns.metadata.name for ns in items if ns.status.phase == "Active"]


def test_run_defaults_to_the_sim_and_writes_results(tmp_path):
    results = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--results",
                           str(results)], capture_output=True, text=True, timeout=600,
                          env=_env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    own_sim = _own_sim(proc.stderr)
    assert own_sim, proc.stderr[-2000:]
    assert "gpuconf PASS" in proc.stdout
    doc = json.loads((results / "results.json").read_text())
    assert doc["run"]["target"] == "sim" and doc["summary"]["fail"] == 0
    assert doc["summary"]["pass"] >= 20
    junit = ET.parse(results / "junit.xml").getroot()
    assert int(junit.find("testsuite").get("tests")) >= 25
    assert list((results / "allure-results").glob("*-result.json"))
    labels = {lab["name"]: lab["value"] for f in (results / "allure-results").glob(
        "*-result.json") for lab in json.loads(f.read_text()).get("labels", [])}
    assert {"epic", "feature", "story"} <= set(labels)
    html = (results / "report" / "report.html").read_text()
    assert all(r["id"] in html for r in doc["requirements"]), "a requirement is missing"
    assert (results / "report" / "report.md").is_file()
    assert not (clusters_dir() / own_sim).exists(), f"the run's sim {own_sim} was left"


def test_run_with_a_fault_fails_and_names_it(tmp_path):
    results = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--results",
                           str(results), "--fault", "clusterpolicy-notready", "--suite", "stack"],
                          capture_output=True, text=True, timeout=600, env=_env(tmp_path))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "FAIL STACK-OP-002" in proc.stdout


def test_interrupted_run_cleans_up_and_keeps_results(tmp_path):
    from conformance.cluster.client import connect
    from conformance.cluster.namespaces import leftover_namespaces
    from conformance.sim import cluster as simcluster

    results = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-m", "conformance.cli", "run", "--results",
                             str(results), "--keep", "--suite", "scheduling"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=_env(tmp_path))
    lines: list[str] = []  # what the run says, read as it goes (its pipe must not fill up)
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        name = cluster = None
        while time.monotonic() < deadline:  # wait until a check has created its namespace
            name = name or _own_sim("".join(lines))
            if name and cluster is None and (clusters_dir() / name / "kubeconfig").exists():
                try:
                    cluster = connect(str(clusters_dir() / name / "kubeconfig"))
                except Exception:
                    cluster = None
            if cluster is not None:
                try:
                    if _active_test_namespaces(cluster):
                        break
                except Exception:
                    pass
            time.sleep(0.2)
        assert cluster is not None, "the run never created a test namespace"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=180)
        reader.join(timeout=10)
        out = "".join(lines)
        assert proc.returncode == 130, out[-3000:]
        assert leftover_namespaces(cluster) == [], "namespaces left behind after SIGTERM"
        doc = json.loads((results / "results.json").read_text())
        assert doc["run"]["interrupted"] is True
    finally:
        if proc.poll() is None:
            proc.kill()
        if name and (clusters_dir() / name).exists():
            simcluster.down(name, progress=quiet)
