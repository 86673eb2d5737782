"""Stack / operands: every enabled operand DaemonSet is rolled out on every GPU node.

The reference is the cluster's GPU nodes, not the DaemonSet's own status: a node the DaemonSet
cannot reach (an untolerated taint, a wrong label) lowers its desired count and would
otherwise look healthy. The operands themselves (names, labels, switches) are the operator's
table in ``conformance.nvidia.operands``.

Checklist (gpu-operator tests/scripts/verify-operator.sh, verify-operand-restarts.sh):
- STACK-DRV-001 driver        - STACK-TK-001 container toolkit  - STACK-DP-001 device plugin
- STACK-DCGM-001 DCGM exporter - STACK-GFD-001 GFD               - STACK-MIG-001 MIG manager
- STACK-VAL-001 operator validator
- STACK-OPD-002 operand restarts at most --restart-threshold (upstream allows 1)
"""

from __future__ import annotations

import pytest

from conformance.checks import rollout
from conformance.cluster import evidence as ev
from conformance.nvidia import labels as L
from conformance.nvidia import operands
from conformance.plugin.api import not_applicable

# requirement -> the operand it checks
CHECKED = {
    "STACK-DRV-001": "driver",
    "STACK-TK-001": "container-toolkit",
    "STACK-DP-001": "device-plugin",
    "STACK-DCGM-001": "dcgm-exporter",
    "STACK-GFD-001": "gpu-feature-discovery",
    "STACK-MIG-001": "mig-manager",
    "STACK-VAL-001": "operator-validator",
}


def _expected_nodes(op: operands.Operand, nodes) -> list[str]:
    chosen = [n for n in nodes if n.deploys(op.deploy_key)]
    if op.mig_only:
        chosen = [n for n in chosen if n.label(L.MIG_CAPABLE) == "true"]
    return [n.name for n in chosen]


@pytest.mark.parametrize("op", [
    pytest.param(operands.get_operand(key), id=operands.get_operand(key).name,
                 marks=pytest.mark.requirement(req)) for req, key in CHECKED.items()])
def test_operand_rolled_out_on_every_gpu_node(op, cluster, cluster_policy, operator_view,
                                              require_gpu_nodes, allocation_paths, evidence):
    if cluster_policy is None:
        not_applicable("no ClusterPolicy: the GPU Operator does not manage this cluster")
    if not cluster_policy.enables(op):
        not_applicable(f"switched off in the ClusterPolicy ({op.spec_path}=false"
                       + (", or MIG is off" if op.mig_only else "") + ")")
    nodes = _expected_nodes(op, [n for n in require_gpu_nodes if op.key != "device-plugin"
                                 or allocation_paths.get(n.name) != "dra"])
    if not nodes:
        not_applicable(f"no GPU node should run {op.name}"
                       + (" (the DRA driver serves them)" if op.key == "device-plugin" else ""))
    result = rollout.rollout(operator_view, op.name, op.app, nodes)
    if op.name in operator_view.daemonsets:
        evidence.append(ev.Evidence(f"{op.name}.yaml", ev.to_yaml(operator_view.daemonsets[
            op.name])))
    evidence.append(ev.Evidence("operator-namespace-events.txt",
                                ev.events_text(cluster, operator_view.namespace)))
    assert result.daemonset_found, (
        f"DaemonSet {operator_view.namespace}/{op.name} not found although {op.spec_path} is "
        f"on: {len(nodes)} GPU node(s) run no {op.deploy_key}")
    assert not result.missing, (
        f"{op.name} has no pod on {len(result.missing)} of {len(nodes)} GPU node(s): "
        f"{', '.join(result.missing[:10])} (a taint it does not tolerate, or a node selector "
        f"it does not match: {op.node_selector_key})")
    assert not result.not_ready, (
        f"{op.name} pods are not Ready on {len(result.not_ready)} of {len(nodes)} GPU "
        f"node(s): {', '.join(result.not_ready[:10])}")


@pytest.mark.requirement("STACK-OPD-002")
def test_operand_restarts_under_threshold(operator_view, gpu_env, evidence):
    apps = {operands.get_operand(key).app for key in CHECKED.values()}
    seen = rollout.restarts(operator_view, apps)
    if not seen:
        not_applicable("no operand pods are running")
    limit = gpu_env.options.restart_threshold
    over = [(pod, c, n) for pod, c, n in seen if n > limit]
    evidence.append(ev.Evidence("operand-restarts.txt",
                                "\n".join(f"{p} {c} {n}" for p, c, n in seen)))
    assert not over, (
        f"{len(over)} operand container(s) restarted more than {limit} time(s): "
        + ", ".join(f"{p}/{c} ({n})" for p, c, n in over[:10]))
