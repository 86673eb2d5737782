"""Run IDs: the label value every object of one run carries (``gpuconf.io/run-id``)."""

from __future__ import annotations

import secrets
import time


def new_run_id() -> str:
    """E.g. 20261203T075008Z-1a2b3c: sortable by start time, unique enough for parallel runs,
    and a valid label value (<= 63 characters of [A-Za-z0-9._-])."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


def short(run_id: str) -> str:
    """The random tail of a run ID, for names that must stay short (a run's sim cluster)."""
    return run_id[-6:]
