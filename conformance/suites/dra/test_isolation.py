"""DRA / isolation on real GPUs: a claim gives a pod exactly its devices, no claim gives none.

Checklist (kubernetes-sigs/ai-conformance TestSecureAcceleratorAccess, DRA form: the probe counts
/dev/nvidia[0-9]* and must equal the request; the CNCF secure_accelerator_access item):
- DRA-ISO-001 a pod with a claim for N GPUs (N = 2 where a node has two free, else 1) sees
  exactly N, by nvidia-smi and by its device nodes
- DRA-ISO-002 a pod with no claim on the same DRA node sees no GPU
"""

from __future__ import annotations

import re

import pytest

from conformance.checks import smi
from conformance.cluster import dra as cluster_dra
from conformance.cluster import evidence as ev
from conformance.cluster import workloads
from conformance.plugin.api import finding

PROBE = (smi.SMI_SCRIPT + "; echo \"DEVICE_NODES=$(ls /dev/nvidia[0-9]* 2>/dev/null | "
         "wc -l)\"")
_NODES = re.compile(r"^DEVICE_NODES=(\d+)", re.M)


def _device_nodes(logs: str) -> int | None:
    match = _NODES.search(logs)
    return int(match[1]) if match else None


def _run(cluster, namespace, gpu_env, prefix, node, template=None):
    body = cluster_dra.claim_pod_manifest(prefix, gpu_env.run_id, template=template, node=node,
                                          image=gpu_env.options.cuda_image,
                                          command=["sh", "-c", PROBE])
    return workloads.run_manifest(cluster, namespace, body,
                                  timeout=workloads.QUICK_RUN_TIMEOUT_S)


@pytest.mark.requirement("DRA-ISO-001")
@pytest.mark.usefixtures("gpu_allocation_lock")
def test_claim_pod_sees_exactly_its_gpus(request, cluster, gpu_env, targets, namespace,
                                         attachments):
    target = max(targets, key=lambda t: len(t.free))
    count = min(2, len(target.free))
    tpl = cluster_dra.create_template(cluster, namespace, "iso", cluster_dra.claim_spec(
        cluster_dra.request(count=count, device_class=target.device_class)), gpu_env.run_id)
    r = _run(cluster, namespace, gpu_env, "iso-claim", target.node.name, tpl)
    attachments.append(ev.Evidence("pod.log", r.logs))
    assert r.diagnosis is None, f"{r.pod}: {r.diagnosis}"
    seen = smi.gpu_uuids(r.logs) or smi.mig_uuids(r.logs)
    nodes = _device_nodes(r.logs)
    assert len(seen) == count, f"a pod claiming {count} GPU(s) sees {len(seen)}:\n{r.logs[-800:]}"
    assert nodes in (None, count) or target.device_class != "gpu.nvidia.com", (
        f"a pod claiming {count} GPU(s) has {nodes} /dev/nvidia[0-9]* device nodes")
    finding(request, f"a pod claiming {count} on {target.node.name} sees {len(seen)}")


@pytest.mark.requirement("DRA-ISO-002")
def test_pod_without_claim_sees_no_gpu(request, cluster, gpu_env, targets, namespace, attachments):
    node = targets[0].node.name
    r = _run(cluster, namespace, gpu_env, "iso-none", node)
    attachments.append(ev.Evidence("pod.log", r.logs))
    assert r.phase in ("Succeeded", "Failed") and "never started" not in (r.diagnosis or ""), (
        f"{r.pod}: {r.diagnosis}")
    seen = smi.gpu_uuids(r.logs)
    nodes = _device_nodes(r.logs)
    assert not seen and not nodes, (f"a pod with no claim on {node} sees {len(seen)} GPU(s) "
                                    f"and {nodes} device node(s):\n{r.logs[-800:]}")
    finding(request, f"a pod with no claim on {node} sees no GPU")
