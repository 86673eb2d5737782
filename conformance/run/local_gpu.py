"""gpu_kernels as a process on this host (``--target local``): one JSON result back.

An environment that cannot run the kernels (no CuPy, no NVML, no GPU: gpu_kernels' exit code
3) is :class:`Unavailable`, which the suites turn into a skip with the install hint, never a
conformance failure.
"""

from __future__ import annotations

import json
import subprocess
import sys

from conformance.common.vocab import EXIT_UNAVAILABLE


class Unavailable(Exception):
    """This host cannot run the kernels; the message says what is missing."""


def run_kernels(args: list[str], *, timeout: float) -> dict:
    """``python -m gpu_kernels ARGS --json`` here; its JSON result."""
    proc = subprocess.run([sys.executable, "-m", "gpu_kernels", *args, "--json"],
                          capture_output=True, text=True, timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    doc = _json(lines[-1]) if lines else None
    if proc.returncode == EXIT_UNAVAILABLE or (doc or {}).get("exit_code") == EXIT_UNAVAILABLE:
        raise Unavailable((doc or {}).get("error") or proc.stderr.strip()[-200:]
                          or "gpu_kernels cannot run here")
    if doc is None:
        raise RuntimeError(f"gpu_kernels {args[0]} printed no result (exit {proc.returncode}):"
                           f" {proc.stderr.strip()[-500:]}")
    return doc


def _json(line: str) -> dict | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
