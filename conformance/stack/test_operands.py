"""Stack / operands: every enabled operand DaemonSet is rolled out on every GPU node.

The reference is the set of nodes labelled nvidia.com/gpu.present=true, not the DaemonSet's own
status: a node the DaemonSet cannot reach (an untolerated taint, a wrong label) lowers its
desired count and would otherwise look healthy.

Checklist (gpu-operator tests/scripts/verify-operator.sh, verify-operand-restarts.sh):
- STACK-DRV-001 driver        - STACK-TK-001 container toolkit  - STACK-DP-001 device plugin
- STACK-DCGM-001 DCGM exporter - STACK-GFD-001 GFD               - STACK-MIG-001 MIG manager
- STACK-VAL-001 operator validator
- STACK-OPD-002 operand restarts at most --restart-threshold (upstream allows 1)
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from conformance import labels as L
from conformance.checks import operands
from conformance.checks.nodes import GpuNode
from conformance.cluster import evidence as ev
from conformance.plugin import not_applicable


@dataclass(frozen=True)
class Operand:
    requirement: str
    daemonset: str     # = its app label (gpu-operator assets/state-*/..daemonset.yaml)
    deploy_key: str    # nvidia.com/gpu.deploy.<key>
    policy_switch: str  # ClusterPolicy spec path that enables it
    mig_only: bool = False


OPERANDS = (
    Operand("STACK-DRV-001", "nvidia-driver-daemonset", "driver", "driver.enabled"),
    Operand("STACK-TK-001", "nvidia-container-toolkit-daemonset", "container-toolkit",
            "toolkit.enabled"),
    Operand("STACK-DP-001", "nvidia-device-plugin-daemonset", "device-plugin",
            "devicePlugin.enabled"),
    Operand("STACK-DCGM-001", "nvidia-dcgm-exporter", "dcgm-exporter", "dcgmExporter.enabled"),
    Operand("STACK-GFD-001", "gpu-feature-discovery", "gpu-feature-discovery", "gfd.enabled"),
    Operand("STACK-MIG-001", "nvidia-mig-manager", "mig-manager", "migManager.enabled",
            mig_only=True),
    Operand("STACK-VAL-001", "nvidia-operator-validator", "operator-validator",
            "validator.enabled"),
)


def _expected_nodes(op: Operand, nodes: list[GpuNode]) -> list[GpuNode]:
    chosen = [n for n in nodes if n.deploys(op.deploy_key)]
    if op.mig_only:
        chosen = [n for n in chosen if n.label(L.MIG_CAPABLE) == "true"]
    return chosen


@pytest.mark.parametrize("op", [pytest.param(op, id=op.daemonset,
                                             marks=pytest.mark.requirement(op.requirement))
                                for op in OPERANDS])
def test_operand_rolled_out_on_every_gpu_node(op, cluster, cluster_policy, operator_view,
                                              require_gpu_nodes, evidence):
    if not operands.spec_enabled(cluster_policy, op.policy_switch):
        not_applicable(f"disabled in the ClusterPolicy ({op.policy_switch}=false)")
    if op.mig_only and (cluster_policy or {}).get("spec", {}).get("mig", {}).get(
            "strategy", "none") == "none":
        not_applicable("MIG is off (ClusterPolicy spec.mig.strategy none)")
    nodes = _expected_nodes(op, require_gpu_nodes)
    if not nodes:
        not_applicable(f"no GPU node should run {op.daemonset}")
    result = operands.rollout(operator_view, op.daemonset, op.daemonset, nodes)
    if op.daemonset in operator_view.daemonsets:
        evidence.append(ev.Evidence(f"{op.daemonset}.yaml",
                                    ev.to_yaml(operator_view.daemonsets[op.daemonset])))
    evidence.append(ev.Evidence("operator-namespace-events.txt",
                                ev.events_text(cluster, operator_view.namespace)))
    assert result.daemonset_found, (
        f"DaemonSet {operator_view.namespace}/{op.daemonset} not found although "
        f"{op.policy_switch} is on: {len(nodes)} GPU node(s) run no {op.deploy_key}")
    assert not result.missing, (
        f"{op.daemonset} has no pod on {len(result.missing)} of {len(nodes)} GPU node(s): "
        f"{', '.join(result.missing[:10])} (a taint it does not tolerate, or a node selector "
        f"it does not match: nvidia.com/gpu.deploy.{op.deploy_key})")
    assert not result.not_ready, (
        f"{op.daemonset} pods are not Ready on {len(result.not_ready)} of {len(nodes)} GPU "
        f"node(s): {', '.join(result.not_ready[:10])}")


@pytest.mark.requirement("STACK-OPD-002")
def test_operand_restarts_under_threshold(operator_view, gpu_env, evidence):
    apps = {op.daemonset for op in OPERANDS}
    seen = operands.restarts(operator_view, apps)
    if not seen:
        not_applicable("no operand pods are running")
    limit = gpu_env.options.restart_threshold
    over = [(pod, c, n) for pod, c, n in seen if n > limit]
    evidence.append(ev.Evidence("operand-restarts.txt",
                                "\n".join(f"{p} {c} {n}" for p, c, n in seen)))
    assert not over, (
        f"{len(over)} operand container(s) restarted more than {limit} time(s): "
        + ", ".join(f"{p}/{c} ({n})" for p, c, n in over[:10]))
