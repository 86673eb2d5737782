"""Scheduling / isolation on real GPUs: each pod gets its own GPU and sees only that one.

Checklist (kubernetes e2e_node device_plugin_test.go "a second pod gets a different device";
KAR-0049):
- SCHED-ISO-001 two pods each requesting one GPU on one node get different GPU UUIDs
- SCHED-ISO-002 a pod sees only the devices it was allocated (nvidia-smi -L and
  NVIDIA_VISIBLE_DEVICES agree, one GPU)
"""

from __future__ import annotations

import pytest

from conformance.checks import smi, taints
from conformance.cluster import workloads
from conformance.cluster.pods import PodSpec
from conformance.nvidia import labels as L
from conformance.plugin.api import not_applicable, own_namespace, require_result


def _smi_pod(node: str, gpu_env) -> PodSpec:
    return PodSpec("smi", gpus=1, image=gpu_env.options.cuda_image,
                   node_selector={"kubernetes.io/hostname": node},
                   command=["sh", "-c", smi.SMI_SCRIPT])


@pytest.mark.requirement("SCHED-ISO-001")
def test_two_pods_get_different_gpus(request, cluster, gpu_env, real_gpu_nodes):
    multi = [n for n in real_gpu_nodes
             if n.gpu_resources.get(L.GPU_RESOURCE, 0) >= 2 and (n.int_label(L.REPLICAS) or 1) == 1
             and not taints.untolerated_taints(n)]
    if not multi:
        not_applicable("no untainted GPU node has two whole (unshared) GPUs")
    node = multi[0].name
    namespace = own_namespace(request)
    runs = [workloads.run(cluster, namespace, _smi_pod(node, gpu_env), gpu_env.run_id,
                      timeout=workloads.QUICK_RUN_TIMEOUT_S)
            for _ in range(2)]
    for r in runs:
        assert r.diagnosis is None and r.phase == "Succeeded", (
            f"nvidia-smi pod {r.pod} on {node}: {r.diagnosis or r.phase}\n{r.logs[-500:]}")
        require_result(r, smi.printed(smi.SMI_SCRIPT, r.logs))
    uuids = [smi.gpu_uuids(r.logs) for r in runs]
    assert all(len(u) == 1 for u in uuids), f"each pod should see one GPU, saw {uuids}"
    assert uuids[0] != uuids[1], f"both pods on {node} got GPU {uuids[0][0]}"


@pytest.mark.requirement("SCHED-ISO-002")
def test_pod_sees_only_its_own_gpu(request, cluster, gpu_env, real_gpu_nodes):
    node = next((n for n in real_gpu_nodes if n.gpu_resources.get(L.GPU_RESOURCE, 0) >= 2
                 and not taints.untolerated_taints(n)), None)
    if node is None:
        not_applicable("no untainted GPU node has more than one GPU to hide")
    namespace = own_namespace(request)
    r = workloads.run(cluster, namespace, _smi_pod(node.name, gpu_env), gpu_env.run_id,
                      timeout=workloads.QUICK_RUN_TIMEOUT_S)
    assert r.diagnosis is None, f"nvidia-smi pod {r.pod}: {r.diagnosis}"
    require_result(r, smi.printed(smi.SMI_SCRIPT, r.logs))
    seen = smi.gpu_uuids(r.logs)
    assert len(seen) == 1, (f"a pod allocated 1 GPU on {node.name} (which has "
                            f"{node.gpu_resources[L.GPU_RESOURCE]}) sees {len(seen)}: {seen}")
    visible = smi.visible_devices(r.logs)
    assert visible not in ("all", None, ""), (
        f"NVIDIA_VISIBLE_DEVICES={visible!r} in a pod allocated one GPU")
