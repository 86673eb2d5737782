"""Stack / container toolkit on real GPUs: containers see exactly what they were given.

Checklist (k8s-device-plugin issues #61, #87, #1605; gpu-operator toolkit-validation):
- STACK-TK-002 a pod requesting one GPU runs nvidia-smi -L and sees exactly one GPU
- STACK-TK-003 a pod requesting none sees none, even from a CUDA image that sets
  NVIDIA_VISIBLE_DEVICES=all (the toolkit must ignore that env from unprivileged pods)

On a node whose GPUs cannot be opened (NVIDIA's mock NVML) both count the /dev/nvidiaN device
nodes the pod got instead: the devices are handed out and injected (CDI) as on real GPUs.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conformance.checks import smi, taints
from conformance.cluster import evidence as ev
from conformance.cluster import workloads
from conformance.cluster.pods import PodSpec
from conformance.plugin.api import require_result


def _node(require_gpu_nodes, attachments=None) -> str:
    """A GPU node a pod can land on; with ``attachments``, one that has a GPU to hand out (said
    at once, with every node's GPU resources, rather than after a Pending pod's timeout)."""
    nodes = [n for n in require_gpu_nodes if not taints.untolerated_taints(n)]
    assert nodes, "every GPU node carries a taint GPU pods do not tolerate"
    if attachments is None:
        return nodes[0].name
    with_gpus = [n for n in nodes if n.main_resource[1] > 0]
    if not with_gpus:
        attachments.append(ev.Evidence("gpu-nodes.txt", "\n".join(
            f"{n.describe_evidence()}; allocatable {n.gpu_resources}" for n in nodes)))
    assert with_gpus, (f"none of {len(nodes)} GPU node(s) has an allocatable GPU resource: "
                       "the device plugin is missing or unhealthy there (a GPU pod would stay "
                       "Pending)")
    return with_gpus[0].name


def _probe(gpu_env) -> tuple[str, str, Callable[[str], list[str]]]:
    """(image, script, what the output says the pod sees): nvidia-smi -L on real GPUs, the
    device nodes where GPUs cannot be opened."""
    if gpu_env.gpu_source:
        return smi.DEVICE_PROBE_IMAGE, smi.DEVICE_NODES_SCRIPT, smi.device_nodes
    return (gpu_env.options.cuda_image, smi.SMI_SCRIPT,
            lambda logs: smi.gpu_uuids(logs) or smi.mig_uuids(logs))


@pytest.mark.requirement("STACK-TK-002")
@pytest.mark.device_nodes
def test_one_gpu_pod_sees_one_gpu(cluster, gpu_env, real_gpu_nodes, namespace, attachments):
    image, script, seen_in = _probe(gpu_env)
    spec = PodSpec("tk-one", gpus=1, image=image,
                   node_selector={"kubernetes.io/hostname": _node(real_gpu_nodes, attachments)},
                   command=["sh", "-c", script])
    r = workloads.run(cluster, namespace, spec, gpu_env.run_id,
                      timeout=workloads.QUICK_RUN_TIMEOUT_S)
    assert r.diagnosis is None, f"{r.pod}: {r.diagnosis}"
    require_result(r, smi.printed(script, r.logs))
    seen = seen_in(r.logs)
    assert len(seen) == 1, f"a one-GPU pod sees {len(seen)} GPUs:\n{r.logs[-800:]}"


@pytest.mark.requirement("STACK-TK-003")
@pytest.mark.device_nodes
def test_no_gpu_pod_sees_no_gpu(cluster, gpu_env, real_gpu_nodes, namespace):
    image, script, seen_in = _probe(gpu_env)
    spec = PodSpec("tk-none", gpus=None, image=image,
                   node_selector={"kubernetes.io/hostname": _node(real_gpu_nodes)},
                   command=["sh", "-c", script])
    r = workloads.run(cluster, namespace, spec, gpu_env.run_id,
                      timeout=workloads.QUICK_RUN_TIMEOUT_S)
    assert r.phase in ("Succeeded", "Failed") and "never started" not in (r.diagnosis or ""), (
        f"{r.pod}: {r.diagnosis}")
    require_result(r, smi.printed(script, r.logs))
    seen = seen_in(r.logs)
    assert not seen, (f"a pod that requested no GPU sees {len(seen)}: set the toolkit's "
                      "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED=false and "
                      "DEVICE_LIST_STRATEGY=volume-mounts")
