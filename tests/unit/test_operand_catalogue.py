"""The operand catalogue: its defaults, and agreement with the operator's assets and chart values.

Upstream facts are checked against ../shared/upstream where that tree exists (the project's CI);
elsewhere those tests skip.
"""

from __future__ import annotations

import pytest
import yaml
from sim_label_helpers import OPERATOR, labels_of, upstream

from conformance.nvidia import operands


def test_operand_catalogue_defaults():
    assert [op.key for op in operands.OPERANDS] == [
        "driver", "container-toolkit", "device-plugin", "mps-control-daemon",
        "gpu-feature-discovery", "dcgm-exporter", "dcgm", "mig-manager", "operator-validator",
        "node-status-exporter"]
    spec = operands.default_cluster_policy_spec()
    enabled = {op.key for op in operands.enabled_operands(spec)}
    assert enabled == {op.key for op in operands.OPERANDS} - {"dcgm", "node-status-exporter"}
    assert operands.get_operand("dcgm").enabled({"dcgm": {"enabled": True}})
    assert not operands.get_operand("gpu-feature-discovery").enabled({"gfd": {"enabled": False}})
    assert operands.get_operand("nvidia-dcgm-exporter").spec_path == "dcgmExporter.enabled"
    assert operands.get_operand("operator-validator").spec_path is None
    assert operands.get_operand("driver").update_strategy == "OnDelete"
    assert operands.operand_env(operands.get_operand("device-plugin"),
                                {"mig": {"strategy": "mixed"},
                                 "devicePlugin": {"env": [{"name": "A", "value": "1"}]}}) == {
        "MIG_STRATEGY": "mixed", "A": "1"}
    # every operand runs on every GPU node of the sim that its switch selects
    labels = labels_of("healthy", "h100")
    assert all(op.selects(labels) for op in operands.OPERANDS if op.key != "mps-control-daemon")
    with pytest.raises(ValueError, match="known"):
        operands.get_operand("nvidia-gpu-operator")


def test_operands_match_the_operator_assets():
    root = upstream(OPERATOR / "assets")
    for op in operands.OPERANDS:
        ds = yaml.safe_load((root / op.asset).read_text())
        pod = ds["spec"]["template"]
        assert ds["kind"] == "DaemonSet" and ds["metadata"]["name"] == op.name
        assert ds["spec"]["selector"]["matchLabels"]["app"] == op.app
        assert pod["metadata"]["labels"] == {"app": op.app, **op.extra_labels}, op.key
        assert pod["spec"]["nodeSelector"] == op.node_selector, op.key
        assert pod["spec"]["tolerations"] == list(operands.DEFAULT_TOLERATIONS), op.key
        assert pod["spec"]["containers"][0]["name"] == op.container, op.key
        assert tuple(c["name"] for c in pod["spec"].get("initContainers", [])) == (
            op.init_containers), op.key
        assert pod["spec"]["priorityClassName"] == operands.PRIORITY_CLASS
        strategy = (ds["spec"].get("updateStrategy") or {}).get("type", "RollingUpdate")
        assert strategy == op.update_strategy, op.key
        if op.service:
            svc = yaml.safe_load((root / op.service.asset).read_text())
            assert svc["metadata"]["name"] == op.service.name
            assert (svc["spec"]["ports"][0]["port"], svc["spec"]["ports"][0]["name"]) == (
                op.service.port, op.service.port_name)
            assert svc["spec"].get("internalTrafficPolicy") == op.service.internal_traffic_policy


def test_operand_defaults_match_the_chart_values():
    values = yaml.safe_load(upstream(OPERATOR / "chart" / "values.yaml").read_text())
    assert values["daemonsets"]["tolerations"] == list(operands.DEFAULT_TOLERATIONS)
    assert values["mig"]["strategy"] == operands.default_cluster_policy_spec()["mig"]["strategy"]
    assert values["migManager"]["config"]["default"] == "all-disabled"
    spec = operands.default_cluster_policy_spec()
    for op in operands.OPERANDS:
        if op.spec_section:
            assert values[op.spec_section]["enabled"] == op.default_enabled, op.key
        section = values[op.image_section]
        expected = (f"{section['repository']}/{section['image']}:"
                    f"{section.get('version') or operands.OPERATOR_VERSION}")
        assert op.image(spec) == op.image(None) == expected, op.key
