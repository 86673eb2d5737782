"""What a suite calls besides plain asserts: findings, not-applicable, measurements.

Everything travels on the test item's ``user_properties``, so it reaches the controller's
results through pytest-xdist too.
"""

from __future__ import annotations

import json

import pytest

from conformance.common.vocab import NOT_APPLICABLE_PREFIX

FINDING = "gpuconf.finding"
MEASUREMENT = "gpuconf.measurement"
OUTCOME = "gpuconf.outcome"


def finding(request: pytest.FixtureRequest, text: str) -> None:
    """Record what a passing check saw (shown as its message in the report)."""
    request.node.user_properties.append((FINDING, text))


def not_applicable(reason: str) -> None:
    """End the check as not-applicable: what it checks does not exist here (not a failure)."""
    pytest.skip(f"{NOT_APPLICABLE_PREFIX} {reason}")


def record_measurement(request: pytest.FixtureRequest, family: str, value) -> None:
    """Keep a figure (kernel, interference, latency) for results.json and evidence/."""
    request.node.user_properties.append(
        (MEASUREMENT, json.dumps({"family": family, "value": value}, default=str)))
