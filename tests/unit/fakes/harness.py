"""gpu_kernels' CLI run on the fakes of this folder (CuPy, NVML, MPS control), for unit tests.

``fake_env`` puts the fakes first on PYTHONPATH and PATH; ``run_cli`` runs one kind and
returns its one JSON line, asserting the exit code; ``usage_error`` asserts exit 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

FAKES = Path(__file__).resolve().parent
ROOT = FAKES.parents[2]


def fake_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"PYTHONPATH": str(FAKES), "FAKE_CUPY_DIR": str(tmp_path),
                "PATH": f"{FAKES / 'bin'}{os.pathsep}{env.get('PATH', '')}", **extra})
    return env


def bare_env() -> dict[str, str]:
    """No fakes: no CuPy, no NVML (the could-not-run-here path)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def run_cli(env: dict[str, str], *args: str, code: int | None = 0,
            timeout: float = 180) -> dict[str, Any]:
    """``python -m gpu_kernels ARGS --json``: exactly one JSON line; exit ``code`` (None: any)."""
    done = subprocess.run([sys.executable, "-m", "gpu_kernels", *args, "--json"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    if code is not None:
        assert done.returncode == code, done.stderr[-2000:]
    res = json.loads(lines[0])
    assert res["exit_code"] == done.returncode
    return res


def usage_error(*args: str) -> None:
    """The arguments are refused: exit 2, nothing on stdout, one error line on stderr."""
    done = subprocess.run([sys.executable, "-m", "gpu_kernels", *args], cwd=ROOT,
                          env=bare_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.startswith("gpu_kernels: error: ")
    assert len(done.stderr.strip().splitlines()) == 1
