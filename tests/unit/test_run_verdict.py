"""One verdict: the terminal summary, the exit code and report.html agree, even for a run in
which every check skipped (it verified nothing, so it does not pass)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_run_that_verified_nothing_fails_everywhere_alike(tmp_path):
    # --target local on a host without NVML/CuPy: every node check skips with the reason.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("FAKE_NVML_GPUS", None)
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--target", "local",
                           "--suite", "stack", "--requirement", "STACK-NODE-001",
                           "--results", str(tmp_path)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert {r["verdict"] for r in doc["requirements"] if r["id"] == "STACK-NODE-001"} == {"skip"}
    assert "gpuconf FAIL" in proc.stdout and "no requirement was verified" in proc.stdout
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["summary"]["verdict"] == "FAIL"
