"""What a suite calls besides plain asserts: findings, not-applicable, measurements.

Everything travels on the test item's ``user_properties``, so it reaches the controller's
results through pytest-xdist too.
"""

from __future__ import annotations

import json
from typing import NoReturn

import pytest

from conformance.checks import simulated
from conformance.cluster.workloads import WorkloadResult
from conformance.common.vocab import NOT_APPLICABLE_PREFIX, NOT_RUN_PREFIX
from conformance.nvidia.clusterpolicy import ClusterPolicy
from conformance.nvidia.operands import Operand

FINDING = "gpuconf.finding"
MEASUREMENT = "gpuconf.measurement"
OUTCOME = "gpuconf.outcome"


def finding(request: pytest.FixtureRequest, text: str) -> None:
    """Record what a passing check saw (shown as its message in the report)."""
    request.node.user_properties.append((FINDING, text))


def own_namespace(request: pytest.FixtureRequest) -> str:
    """The check's own namespace (the ``namespace`` fixture), made at this call. A check that
    can still end not-applicable or not-run before it writes anything asks here once it knows
    it goes on: every namespace costs the API server a create and, at its deletion, a list and
    a delete of each namespaced kind it serves."""
    return request.getfixturevalue("namespace")


def not_applicable(reason: str) -> None:
    """End the check as not-applicable: what it checks does not exist here (not a failure)."""
    pytest.skip(f"{NOT_APPLICABLE_PREFIX} {reason}")


def not_run(reason: str) -> NoReturn:
    """End the check unjudged: it applies here, but what it needs could not be had (a result
    the suite could not read, GPUs no pod can open). Verdict ``not-run`` with the reason, never
    a finding."""
    pytest.skip(f"{NOT_RUN_PREFIX} {reason}")


def require_result(result: WorkloadResult, found: bool) -> None:
    """Not run when a workload's result could not be read (``found``: whether its log holds
    the result its command always prints; see ``WorkloadResult.unread``)."""
    why = result.unread(found)
    if why:
        not_run(why)


def with_real_gpus(nodes: list, simulated_nodes: dict[str, str]) -> list:
    """``nodes`` less the simulated ones (``Env.simulated``); not run when none is left."""
    real = [n for n in nodes if n.name not in simulated_nodes]
    if nodes and not real:
        not_run("needs real GPUs: " + simulated.summary(simulated_nodes,
                                                        [n.name for n in nodes]))
    return real


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
