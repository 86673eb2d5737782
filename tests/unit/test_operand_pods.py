"""Which pods the operator's per-node switch (nvidia.com/gpu.deploy.operands=false) must take
off a node: its operand DaemonSets' pods, not its own pod or NFD's worker."""

from __future__ import annotations

from kubernetes import client

from conformance.checks.rollout import OperatorView


def _ds(name: str, selector: dict[str, str]) -> client.V1DaemonSet:
    return client.V1DaemonSet(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DaemonSetSpec(
            selector=client.V1LabelSelector(match_labels={"app": name}),
            template=client.V1PodTemplateSpec(spec=client.V1PodSpec(
                containers=[client.V1Container(name=name)], node_selector=selector))))


def _pod(name: str, node: str, owner_kind: str, owner: str, *, deleting: bool = False):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name=name, deletion_timestamp="2026-12-04T19:26:00Z" if deleting else None,
            owner_references=[client.V1OwnerReference(api_version="apps/v1", kind=owner_kind,
                                                      name=owner, uid="u")]),
        spec=client.V1PodSpec(node_name=node, containers=[client.V1Container(name="c")]))


def test_the_operators_own_pod_and_nfd_stay_on_a_switched_off_node():
    # the H200 node runs the operator on its only node: OPS-REC-002 waited on it for 180 s
    plugin = _ds("nvidia-device-plugin-daemonset",
                 {"nvidia.com/gpu.deploy.device-plugin": "true"})
    nfd = _ds("gpu-operator-node-feature-discovery-worker", {})
    view = OperatorView("gpu-operator", {d.metadata.name: d for d in (plugin, nfd)}, {
        "nvidia-device-plugin-daemonset": [
            _pod("plugin-a", "vm", "DaemonSet", "nvidia-device-plugin-daemonset"),
            _pod("plugin-b", "other", "DaemonSet", "nvidia-device-plugin-daemonset"),
            _pod("plugin-old", "vm", "DaemonSet", "nvidia-device-plugin-daemonset",
                 deleting=True)],
        "gpu-operator": [_pod("gpu-operator-6cd5c7696c-tx2v4", "vm", "ReplicaSet",
                              "gpu-operator-6cd5c7696c")],
        "nfd-worker": [_pod("nfd-worker-x", "vm", "DaemonSet", nfd.metadata.name)],
    })
    assert view.operand_pods_on("vm") == ["plugin-a"]
    assert view.operand_pods_on("nowhere") == []
