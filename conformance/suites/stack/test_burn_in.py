"""Stack / burn-in on real GPUs: results stay correct with the board at its power limit.

On --target local on this host's GPUs; on real clusters in one pod per GPU node holding all
its GPUs (gpu_kernels mounted into --workload-image). The kernel (gpu_kernels ``burn``)
alternates a GEMM compared with a reference computed once and a memory stress with a
checksum, and samples NVML (power, clocks, temperature, throttle reasons, XID and ECC).

Checklist:
- STACK-BURN-001 no miscompare on any GPU (the failing GPU named by UUID), no new ECC or XID
  errors, and the median power reaches 95 % of the enforced limit, for --burn-seconds
"""

from __future__ import annotations

import json

import pytest

from conformance.cluster import evidence as ev
from conformance.cluster import kernel_pods
from conformance.nvidia import labels as L
from conformance.plugin.api import (
    finding,
    not_applicable,
    not_run,
    record_measurement,
    with_real_gpus,
)
from conformance.run import local_gpu

STARTUP_S = 300.0  # pulling the workload image and starting CuPy, beyond the burn itself


def _burns(gpu_env, nodes) -> tuple[dict[str, dict | str], list[str]]:
    """(node -> burn result, or the diagnosis of its pod; why results could not be read)."""
    args = ["burn", "--seconds", str(gpu_env.options.burn_seconds)]
    timeout = gpu_env.options.burn_seconds + STARTUP_S
    if gpu_env.target == "local":
        try:
            return {"localhost": local_gpu.run_kernels(args, timeout=timeout)}, []
        except local_gpu.Unavailable as exc:
            pytest.skip(f"cannot run the burn-in here: {exc}")
    whole = [n for n in with_real_gpus(nodes, gpu_env.simulated)
             if n.gpu_resources.get(L.GPU_RESOURCE)
             and (n.int_label(L.REPLICAS) or 1) == 1]
    if not whole:
        not_applicable("no GPU node offers whole GPUs (shared or MIG only)")
    results = kernel_pods.on_each_node(
        gpu_env.require_cluster(), gpu_env.run_id, args, image=gpu_env.options.workload_image,
        nodes=whole, purpose="burn-in", timeout=timeout,
        gpus=lambda node: node.gpu_resources[L.GPU_RESOURCE])
    burns: dict[str, dict | str] = {}
    unread = []
    for node, r in results.items():
        doc = r.json_line()
        why = r.unread(doc is not None)
        if why:
            unread.append(why)
        else:
            burns[node] = doc or f"burn pod {r.pod}: {kernel_pods.no_result(r)}"
    return burns, unread


@pytest.mark.requirement("STACK-BURN-001")
def test_burn_in_stays_correct_at_the_power_limit(request, gpu_env, attachments):
    nodes = request.getfixturevalue("gpu_nodes") if gpu_env.cluster is not None else []
    burns, unread = _burns(gpu_env, nodes)
    problems, seen = [], []
    for node, doc in burns.items():
        if isinstance(doc, str):
            problems.append(doc)
            continue
        record_measurement(request, "burn", doc)
        attachments.append(ev.Evidence(f"burn-{node}.json", json.dumps(
            {k: v for k, v in doc.items() if k != "gpus"} | {"gpus": [
                {k: v for k, v in g.items() if k != "samples"} for g in doc.get("gpus", [])]},
            indent=1, default=str)))
        if doc.get("verdict") != "pass":
            problems.append(f"{node}: " + "; ".join(doc.get("reasons") or [str(doc.get(
                "error") or "failed")]))
        for gpu in doc.get("gpus") or []:
            power = gpu.get("power") or {}
            seen.append(f"{node} {str(gpu.get('uuid'))[:12]}: {gpu.get('iterations', '?')} "
                        f"iterations, {power.get('median_w')} W median of "
                        f"{power.get('limit_w')} W")
    assert not problems, "burn-in failed: " + " | ".join(problems[:5])
    if unread:
        not_run("; ".join(unread[:3]))
    finding(request, "; ".join(seen[:8]))
