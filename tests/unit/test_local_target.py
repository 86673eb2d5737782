"""`--target local` end to end on the fake NVML/CuPy of tests/unit/fakes: the node checks run,
and the results carry this host's GPU fingerprint (the report's "GPUs" line) from NVML."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKES = Path(__file__).resolve().parent / "fakes"


def test_local_run_fingerprints_the_hosts_gpus(tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{FAKES}{os.pathsep}{ROOT}",
           "FAKE_CUPY_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "conformance/suites/stack/test_node_gpu.py"),
         "--target=local", f"--gpu-results={tmp_path / 'r'}", "-q", "-p", "no:cacheprovider",
         f"--rootdir={ROOT / 'conformance' / 'suites'}", "-c", os.devnull],
        capture_output=True, text=True, timeout=300, env=env)
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    fp = doc["fingerprint"]
    assert fp["nodes"] and fp["nodes"][0]["gpu_product"] == "NVIDIA H200", proc.stdout[-2000:]
    assert fp["driver_versions"] and fp["gpu_node_count"] == 1
    node_checks = [r for r in doc["requirements"] if r["id"].startswith("STACK-NODE-")]
    assert node_checks and all(r["verdict"] == "pass" for r in node_checks), node_checks


def test_a_host_without_cupy_skips_the_experiments_with_the_install_hint(tmp_path):
    """--target local where CuPy is missing: the sharing experiments are skipped and say what
    to install; none of them fails."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)  # no fakes: no CuPy, no NVML
    subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "conformance/suites/sharing"),
         "--target=local", f"--gpu-results={tmp_path}", "-q", "-p", "no:cacheprovider",
         f"--rootdir={ROOT / 'conformance' / 'suites'}", "-c", os.devnull],
        capture_output=True, text=True, timeout=300, env=env)
    doc = json.loads((tmp_path / "results.json").read_text())
    rows = {r["id"]: r for r in doc["requirements"]}
    for req in ("SHARE-INT-001", "SHARE-ISO-001", "SHARE-ISO-002", "SHARE-LAT-001"):
        assert rows[req]["verdict"] == "skip", rows[req]
        assert "pip install cupy" in rows[req]["message"], rows[req]["message"]
