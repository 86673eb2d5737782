"""An operand the ClusterPolicy switches off is the owner's choice: its checks end as
not-applicable with the field that switched it off, never as a failure or a pass."""

from __future__ import annotations

import pytest

from conformance.common.vocab import NOT_APPLICABLE_PREFIX
from conformance.nvidia import operands
from conformance.nvidia.clusterpolicy import ClusterPolicy
from conformance.plugin.api import not_applicable_if_switched_off

EXPORTER = operands.get_operand("dcgm-exporter")
MIG_MANAGER = operands.get_operand("mig-manager")


def _policy(spec: dict) -> ClusterPolicy:
    return ClusterPolicy({"metadata": {"name": "cluster-policy"}, "spec": spec})


def test_a_switched_off_exporter_is_not_applicable_and_names_its_field():
    with pytest.raises(pytest.skip.Exception) as ended:
        not_applicable_if_switched_off(_policy({"dcgmExporter": {"enabled": False}}),
                                       EXPORTER, "read metrics from")
    message = str(ended.value)
    assert message.startswith(NOT_APPLICABLE_PREFIX)
    assert "dcgmExporter.enabled=false" in message and "nothing to read metrics from" in message


@pytest.mark.parametrize("spec", [{}, {"dcgmExporter": {"enabled": True}}],
                         ids=["chart-default", "on"])
def test_an_enabled_exporter_goes_on_to_be_checked(spec):
    not_applicable_if_switched_off(_policy(spec), EXPORTER, "read metrics from")


def test_without_a_policy_the_check_goes_on():
    not_applicable_if_switched_off(None, EXPORTER, "roll out")


def test_the_mig_manager_is_off_while_mig_is_off():
    with pytest.raises(pytest.skip.Exception, match="or MIG is off"):
        not_applicable_if_switched_off(_policy({"mig": {"strategy": "none"}}), MIG_MANAGER,
                                       "roll out")
