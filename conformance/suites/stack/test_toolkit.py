"""Stack / container toolkit on real GPUs: containers see exactly what they were given.

Checklist (k8s-device-plugin issues #61, #87, #1605; gpu-operator toolkit-validation):
- STACK-TK-002 a pod requesting one GPU runs nvidia-smi -L and sees exactly one GPU
- STACK-TK-003 a pod requesting none sees none, even from a CUDA image that sets
  NVIDIA_VISIBLE_DEVICES=all (the toolkit must ignore that env from unprivileged pods)
"""

from __future__ import annotations

import pytest

from conformance.checks import smi, taints
from conformance.cluster import workloads
from conformance.cluster.pods import PodSpec


def _node(require_gpu_nodes) -> str:
    node = next((n for n in require_gpu_nodes if not taints.untolerated_taints(n)), None)
    assert node is not None, "every GPU node carries a taint GPU pods do not tolerate"
    return node.name


@pytest.mark.requirement("STACK-TK-002")
def test_one_gpu_pod_sees_one_gpu(cluster, namespace, gpu_env, require_gpu_nodes):
    spec = PodSpec("tk-one", gpus=1, image=gpu_env.options.cuda_image,
                   node_selector={"kubernetes.io/hostname": _node(require_gpu_nodes)},
                   command=["sh", "-c", smi.SMI_SCRIPT])
    r = workloads.run(cluster, namespace, spec, gpu_env.run_id,
                      timeout=workloads.QUICK_RUN_TIMEOUT_S)
    assert r.diagnosis is None, f"{r.pod}: {r.diagnosis}"
    seen = smi.gpu_uuids(r.logs) or smi.mig_uuids(r.logs)
    assert len(seen) == 1, f"a one-GPU pod sees {len(seen)} GPUs:\n{r.logs[-800:]}"


@pytest.mark.requirement("STACK-TK-003")
def test_no_gpu_pod_sees_no_gpu(cluster, namespace, gpu_env, require_gpu_nodes):
    spec = PodSpec("tk-none", gpus=None, image=gpu_env.options.cuda_image,
                   node_selector={"kubernetes.io/hostname": _node(require_gpu_nodes)},
                   command=["sh", "-c", smi.SMI_SCRIPT])
    r = workloads.run(cluster, namespace, spec, gpu_env.run_id,
                      timeout=workloads.QUICK_RUN_TIMEOUT_S)
    assert r.phase in ("Succeeded", "Failed") and "never started" not in (r.diagnosis or ""), (
        f"{r.pod}: {r.diagnosis}")
    seen = smi.gpu_uuids(r.logs)
    assert not seen, (f"a pod that requested no GPU sees {len(seen)}: set the toolkit's "
                      "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED=false and "
                      "DEVICE_LIST_STRATEGY=volume-mounts")
