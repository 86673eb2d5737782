"""Stack / node level: what NVML reports on each GPU node, each item a check with a verdict.

On --target local the inventory is taken on this host; on real clusters in a pod on each GPU
node (gpu_kernels mounted from a ConfigMap into --workload-image). The sim has no devices.

The verdicts are reached on the node, by the rules of ``gpu_kernels/verdicts.py``
(``NODE_RULES`` and ``GPU_RULES`` map each ID to its rule); this file judges what they said.

Checklist (requirement, what it asks, its rule in gpu_kernels/verdicts.py):
- STACK-NODE-001 every GPU enumerated with model, memory and a distinct UUID: ``enumeration``
- STACK-NODE-002 driver and CUDA versions reported and the same on every GPU: ``versions``
- STACK-NODE-003 ECC enabled, no volatile uncorrectable errors: ``ecc``
- STACK-NODE-004 compute mode Default (sharing works): ``compute_mode``
- STACK-NODE-005 MIG mode reported, current == pending: ``mig``
- STACK-NODE-006 no hardware/thermal/power-brake slowdown: ``throttle``
- STACK-NODE-007 PCIe link at its maximum width (and generation under load): ``pcie``
- STACK-DRV-003 NVML's driver version is the expected one (--expected/--min-driver-version):
  ``versions``' verdict, and NVML's driver against GFD's label (here)
"""

from __future__ import annotations

import json

import pytest

from conformance.cluster import evidence as ev
from conformance.cluster import kernel_pods, workloads
from conformance.plugin.api import finding, not_applicable, not_run, with_real_gpus
from conformance.run import local_gpu
from gpu_kernels import verdicts

NODE_CHECKS = verdicts.REQUIREMENTS  # STACK-NODE-001..007, one rule each
INVENTORY_TIMEOUT_S = 120.0


def _inventory_args(gpu_env) -> list[str]:
    args = ["inventory"]
    if gpu_env.options.expected_driver_version:
        args += ["--expected-driver-version", gpu_env.options.expected_driver_version]
    if gpu_env.options.min_driver_version:
        args += ["--min-driver-version", gpu_env.options.min_driver_version]
    return args


def _local_inventory(gpu_env) -> dict[str, dict]:
    try:
        return {"localhost": local_gpu.run_kernels(_inventory_args(gpu_env),
                                                   timeout=INVENTORY_TIMEOUT_S)}
    except local_gpu.Unavailable as exc:
        pytest.skip(f"no GPU inventory on this host: {exc}")


UNREAD = "unread"  # an inventory's key: why the node's result could not be read


def _pod_inventories(gpu_env, nodes) -> dict[str, dict]:
    results = kernel_pods.on_each_node(
        gpu_env.require_cluster(), gpu_env.run_id, _inventory_args(gpu_env),
        image=gpu_env.options.workload_image, nodes=nodes, purpose="node-inventory",
        timeout=workloads.QUICK_RUN_TIMEOUT_S)
    out: dict[str, dict] = {}
    for node, r in results.items():
        doc = r.json_line()
        unread = r.unread(doc is not None)
        if unread:
            out[node] = {UNREAD: unread}
            continue
        out[node] = doc or {"verdicts": [  # the pod failed, with a diagnosis of its own
            {"id": i, "verdict": "fail",
             "message": f"inventory pod {r.pod}: {kernel_pods.no_result(r)}"}
            for i in (*NODE_CHECKS, "STACK-DRV-003")]}
    return out


@pytest.fixture(scope="module")
def inventories(gpu_env, request) -> dict[str, dict]:
    # Module fixtures are set up before the per-test requirement gate: check the target here.
    if gpu_env.target != "local" and not gpu_env.real_gpus:  # the sim, the mock NVML's node
        not_run(f"needs real GPUs: {gpu_env.gpu_source}")
    if gpu_env.target == "local":
        return _local_inventory(gpu_env)
    nodes = request.getfixturevalue("gpu_nodes")
    if not nodes:
        not_applicable("no GPU nodes")
    return _pod_inventories(gpu_env, with_real_gpus(nodes, gpu_env.simulated))


def _verdicts(inventories: dict[str, dict], req_id: str) -> list[tuple[str, dict]]:
    found = []
    for node, doc in inventories.items():
        for v in doc.get("verdicts", []):
            if v["id"] == req_id:
                found.append((node, v))
    return found


def _judge(inventories, req_id: str, attachments, request=None) -> None:
    found = _verdicts(inventories, req_id)
    attachments.append(ev.Evidence("nvml-inventory.json", json.dumps(
        {n: d.get("inventory") for n, d in inventories.items()}, indent=1)[:100_000]))
    failed = [f"{node}: {v['message']}" for node, v in found if v["verdict"] == "fail"]
    assert not failed, "; ".join(failed[:5])
    unread = [doc[UNREAD] for doc in inventories.values() if UNREAD in doc]
    if unread:  # a node unjudged leaves the check unjudged, not failed
        not_run("; ".join(unread[:3]))
    assert found, f"the inventory gave no verdict for {req_id}"
    if all(v["verdict"] == "not-applicable" for _n, v in found):
        not_applicable("; ".join(v["message"] for _n, v in found[:3]))
    if request is not None:  # what was seen, for the report
        finding(request, "; ".join(f"{node}: {v['message']}" for node, v in found[:3]))


@pytest.mark.parametrize("req_id", [pytest.param(r, id=r, marks=pytest.mark.requirement(r))
                                    for r in NODE_CHECKS])
def test_nvml_inventory(req_id, inventories, attachments, request):
    _judge(inventories, req_id, attachments, request)


@pytest.mark.requirement("STACK-DRV-003")
def test_nvml_driver_version_matches_labels(inventories, gpu_env, attachments, request):
    """NVML's driver (what containers load) against --expected-driver-version and GFD's label."""
    _judge(inventories, "STACK-NODE-002", attachments, request)
    nodes = request.getfixturevalue("gpu_nodes") if gpu_env.cluster is not None else []
    labels = {n.name: n.label("nvidia.com/cuda.driver-version.full") for n in nodes}
    mismatched = []
    for node, doc in inventories.items():
        nvml = (doc.get("inventory") or {}).get("driver_version")
        if node in labels and nvml and labels[node] and nvml != labels[node]:
            mismatched.append(f"{node}: NVML in a pod loads {nvml}, GFD labels say "
                              f"{labels[node]}")
    assert not mismatched, ("host-installed driver vs containerized driver: "
                            + "; ".join(mismatched[:5]))
