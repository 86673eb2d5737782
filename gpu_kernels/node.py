"""The ``inventory`` kind: NVML inventory of the node plus its STACK-NODE verdicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpu_kernels import inventory, result, verdicts


def judged(inv: Mapping[str, Any], opts: verdicts.Options) -> dict[str, Any]:
    """The result object for an inventory (collected here or fabricated in a test)."""
    found = verdicts.evaluate(inv, opts)
    failed = any(v["verdict"] == verdicts.FAIL for v in found)
    out = result.header("inventory")
    out.update({
        "inventory": dict(inv),
        "verdicts": found,
        "options": {"expected_driver_version": opts.expected_driver_version,
                    "min_driver_version": opts.min_driver_version,
                    "allowed_compute_modes": list(opts.allowed_compute_modes)},
        "ok": not failed,
        "exit_code": result.EXIT_FAILED if failed else result.EXIT_OK,
    })
    return out


def run(expected_driver_version: str | None = None, min_driver_version: str | None = None,
        allowed_compute_modes: tuple[str, ...] = ("Default",)) -> dict[str, Any]:
    opts = verdicts.Options(expected_driver_version, min_driver_version, allowed_compute_modes)
    return judged(inventory.collect(), opts)
