"""What a suite calls besides plain asserts: findings, not-applicable, measurements.

Everything travels on the test item's ``user_properties``, so it reaches the controller's
results through pytest-xdist too.
"""

from __future__ import annotations

import json

import pytest

from conformance.common.vocab import NOT_APPLICABLE_PREFIX
from conformance.nvidia.clusterpolicy import ClusterPolicy
from conformance.nvidia.operands import Operand

FINDING = "gpuconf.finding"
MEASUREMENT = "gpuconf.measurement"
OUTCOME = "gpuconf.outcome"


def finding(request: pytest.FixtureRequest, text: str) -> None:
    """Record what a passing check saw (shown as its message in the report)."""
    request.node.user_properties.append((FINDING, text))


def not_applicable(reason: str) -> None:
    """End the check as not-applicable: what it checks does not exist here (not a failure)."""
    pytest.skip(f"{NOT_APPLICABLE_PREFIX} {reason}")


def not_applicable_if_switched_off(policy: ClusterPolicy | None, op: Operand,
                                   so_nothing_to: str) -> None:
    """End the check as not-applicable where the ClusterPolicy switches ``op`` off.

    A switched-off operand is the cluster owner's choice, not a broken stack: every check of an
    operand (rolled out, serving, reconciled) says so the same way. ``so_nothing_to`` is what
    the check cannot do without it, e.g. "read metrics from". No policy: nothing to decide here.
    """
    if policy is None or policy.enables(op):
        return
    why = f"{op.spec_path}=false" + (", or MIG is off" if op.mig_only else "")
    not_applicable(f"{op.name} is switched off in the ClusterPolicy ({why}): "
                   f"nothing to {so_nothing_to}")


def record_measurement(request: pytest.FixtureRequest, family: str, value) -> None:
    """Keep a figure (kernel, interference, latency) for results.json and evidence/."""
    request.node.user_properties.append(
        (MEASUREMENT, json.dumps({"family": family, "value": value}, default=str)))
