"""Stack / operands: every NVIDIA component DaemonSet is rolled out on every GPU node.

The reference is the cluster's GPU nodes, not the DaemonSet's own status: a node the DaemonSet
cannot reach (an untolerated taint, a wrong label, a node NFD did not label) lowers its desired
count and would otherwise look healthy. Under the GPU Operator every operand is checked where
the ClusterPolicy enables it; without the operator, the device plugin and GFD are checked as
the device plugin chart runs them, and the operator's own operands are not-applicable; where the
operator runs a GPUCluster instead, its own operands are DRA-OP-001's.

Checklist (gpu-operator tests/scripts/verify-operator.sh, verify-operand-restarts.sh):
- STACK-DRV-001 driver        - STACK-TK-001 container toolkit  - STACK-DP-001 device plugin
- STACK-DCGM-001 DCGM exporter - STACK-GFD-001 GFD               - STACK-MIG-001 MIG manager
- STACK-VAL-001 operator validator
- STACK-OPD-002 component restarts at most --restart-threshold (upstream allows 1)
"""

from __future__ import annotations

import pytest

from conformance.checks import rollout
from conformance.cluster import evidence as ev
from conformance.nvidia import labels as L
from conformance.nvidia import operands
from conformance.plugin.api import not_applicable, not_applicable_if_switched_off

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
# What a cluster without the operator runs as DaemonSets (the device plugin chart).
WITHOUT_OPERATOR = ("device-plugin", "gpu-feature-discovery")


def _expected_nodes(op: operands.Operand, nodes, by_operator: bool) -> list[str]:
    chosen = [n for n in nodes if not by_operator or n.deploys(op.deploy_key)]
    if op.mig_only:
        chosen = [n for n in chosen if n.label(L.MIG_CAPABLE) == "true"]
    return [n.name for n in chosen]


def _where(op: operands.Operand, stack) -> str:
    if stack.operator_installed:
        return f"DaemonSet {stack.operator_namespace}/{op.name}"
    return f"the device plugin chart's {op.key} DaemonSet"


@pytest.mark.parametrize("op", [
    pytest.param(operands.get_operand(key), id=operands.get_operand(key).name,
                 marks=pytest.mark.requirement(req)) for req, key in CHECKED.items()])
def test_operand_rolled_out_on_every_gpu_node(op, cluster, gpu_stack, require_gpu_nodes,
                                              allocation_paths, attachments):
    policy = gpu_stack.policy
    if gpu_stack.runs_gpucluster:
        not_applicable(f"the operator runs a GPUCluster (the DRA stack), not a ClusterPolicy: "
                       f"it deploys no {op.name}; DRA-OP-001 checks its operands")
    if gpu_stack.operator_installed:
        not_applicable_if_switched_off(policy, op, "roll out")
    elif op.key not in WITHOUT_OPERATOR:
        not_applicable(f"no GPU Operator: nothing deploys {op.name} (stack: {gpu_stack.shape})")
    elif gpu_stack.shape == "none":
        not_applicable(f"no GPU Operator and no device plugin chart: {op.key} is deployed by "
                       "something this suite does not know; its effects are checked by "
                       "STACK-DP-002 and STACK-GFD-002")
    nodes = _expected_nodes(op, [n for n in require_gpu_nodes if op.key != "device-plugin"
                                 or allocation_paths.get(n.name) != "dra"],
                            gpu_stack.operator_installed)
    if not nodes:
        not_applicable(f"no GPU node should run {op.name}"
                       + (" (the DRA driver serves them)" if op.key == "device-plugin" else ""))
    components = gpu_stack.of(op.key)
    pods = [p for c in components for p in c.pods]
    result = rollout.rollout(pods, nodes, found=bool(components))
    for comp in components:
        attachments.append(ev.Evidence(f"{comp.daemonset.metadata.name}.yaml",
                                    ev.to_yaml(comp.daemonset)))
        attachments.append(ev.Evidence(f"events-{comp.daemonset.metadata.namespace}.txt",
                                    ev.events_text(cluster, comp.daemonset.metadata.namespace)))
    if not components:  # what runs instead, and what the namespace says about the missing one
        attachments.append(ev.Evidence("nvidia-daemonsets.txt", "\n".join(sorted(
            f"{c.name} ({c.key}, {c.deployed_by})" for cs in gpu_stack.components.values()
            for c in cs)) or "no NVIDIA component DaemonSet found"))
        if gpu_stack.operator_installed:
            attachments.append(ev.Evidence(
                f"events-{gpu_stack.operator_namespace}.txt",
                ev.events_text(cluster, gpu_stack.operator_namespace)))
    assert result.daemonset_found, (
        f"{_where(op, gpu_stack)} not found: {len(nodes)} GPU node(s) run no {op.key}")
    hint = (f"a taint it does not tolerate, or a node selector it does not match: "
            f"{op.node_selector_key}" if gpu_stack.operator_installed else
            f"the chart schedules on nodes labelled {L.NFD_PCI_NVIDIA}=true or "
            f"{L.GPU_PRESENT}=true (is NFD running?), or a taint it does not tolerate")
    assert not result.missing, (
        f"{op.key} has no pod on {len(result.missing)} of {len(nodes)} GPU node(s): "
        f"{', '.join(result.missing[:10])} ({hint})")
    assert not result.not_ready, (
        f"{op.key} pods are not Ready on {len(result.not_ready)} of {len(nodes)} GPU "
        f"node(s): {', '.join(result.not_ready[:10])}")


@pytest.mark.requirement("STACK-OPD-002")
def test_operand_restarts_under_threshold(gpu_stack, gpu_env, attachments):
    seen = rollout.restarts(gpu_stack.pods())
    if not seen:
        not_applicable("no NVIDIA component pods are running")
    limit = gpu_env.options.restart_threshold
    over = [(pod, c, n) for pod, c, n in seen if n > limit]
    attachments.append(ev.Evidence("operand-restarts.txt",
                                "\n".join(f"{p} {c} {n}" for p, c, n in seen)))
    assert not over, (
        f"{len(over)} NVIDIA component container(s) restarted more than {limit} time(s): "
        + ", ".join(f"{p}/{c} ({n})" for p, c, n in over[:10]))
